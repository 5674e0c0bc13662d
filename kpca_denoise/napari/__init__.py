"""The napari plugin (npe2): a dock widget, a function and sample data.

napari finds ``napari.yaml`` in this package through the ``napari.manifest`` entry point
(``pip install 'kpca-denoise[napari]'``, ``docs/napari.md``).  Importing this package
imports neither napari nor Qt: the manifest names the modules that do, and napari
imports them only when the plugin is used.

* :mod:`._layers`: a layer's pixels as the pipeline's images and back (no napari, no Qt);
* :mod:`._widget`: the dock widget "Denoise (kernel PCA)" (qtpy, napari's thread worker);
* :mod:`._function`: ``denoise_layer(ImageData) -> ImageData`` for scripts and workflows;
* :mod:`._sample_data`: the shipped sample images with Gaussian noise of std 25.
"""

__all__ = ["denoise_layer"]


def __getattr__(name):  # lazy: ``denoise_layer``'s module imports napari's types when present
    if name == "denoise_layer":
        from ._function import denoise_layer

        return denoise_layer
    raise AttributeError(name)
