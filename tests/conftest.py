import os

import numpy as np
import pytest

# Qt tests run without a display; set before anything imports Qt.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def camera():
    from PIL import Image

    here = os.path.dirname(__file__)
    return np.asarray(Image.open(os.path.join(here, "..", "sample_images", "camera.png")))


@pytest.fixture(scope="session")
def astronaut():
    from PIL import Image

    here = os.path.dirname(__file__)
    return np.asarray(Image.open(os.path.join(here, "..", "sample_images", "astronaut.png")))


@pytest.fixture(scope="session")
def digits():
    """Noisy digits (sigma 0.25 on [0, 1]): 1000 noisy training digits, 797 clean
    test digits and their noisy copies."""
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    rng = np.random.default_rng(0)
    X = X[rng.permutation(len(X))]
    Xtr, Xte = X[:1000], X[1000:]
    return (Xtr + rng.normal(0, 0.25, Xtr.shape), Xte, Xte + rng.normal(0, 0.25, Xte.shape))
