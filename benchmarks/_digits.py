"""The noisy-digits problem the digits benchmarks share (as tests/conftest.py's fixture):
scikit-learn's digits on [0, 1], shuffled with seed 0, 1000 training samples, noise
std 0.25 on training and test samples."""

import numpy as np


def noisy_digits():
    """(noisy training digits, clean test digits, noisy test digits)."""
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    rng = np.random.default_rng(0)
    X = X[rng.permutation(len(X))]
    Xtr, Xte = X[:1000], X[1000:]
    return Xtr + rng.normal(0, 0.25, Xtr.shape), Xte, Xte + rng.normal(0, 0.25, Xte.shape)
