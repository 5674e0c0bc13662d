"""Desktop application (PySide6 + pyqtgraph) for kpca-denoise.

This is the only package that imports Qt.  It calls the same
:func:`kpca_denoise.pipeline.denoise_set` as the command line, in a worker
thread, and reads and writes files only through :mod:`kpca_denoise.io`.

Modules
-------
app          ``main()``: QApplication, command-line entry, ``--demo`` and screenshots
main_window  the window: docks, actions, run / cancel / export glue
worker       the QThread worker and the per-(image, parameters, rank) result cache
views        image panels, the comparison grid and the before/after split view
spectrum     the live eigen-spectrum plot
params_panel the parameter form
imageset     loaded images, thumbnails, the image-set list
"""

from ._compat import guard_emit_refcount_bug

# before any widget exists: PySide6 6.12.0 loses a reference to True per emit()
guard_emit_refcount_bug()
