"""Shared test helpers."""

from kpca_denoise import KernelPCA

#: KernelPCA with the denoiser's choices (rbf, gamma='noise', float32 Gram,
#: seed 0, tol 1e-4), each overridable by keyword.
KPCA = KernelPCA.for_denoising
