"""Numerical core: kernels, kernel PCA, pre-image, patches, noise estimation.

Only numpy, scipy and numba are imported here: no Qt, no Pillow, no files.
"""
