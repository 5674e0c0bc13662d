"""Desktop application (PySide6 + pyqtgraph) for kpca-denoise.

This is the only package that imports Qt.  It calls the same
:func:`kpca_denoise.pipeline.denoise_set` as the command line, in a worker
thread, and reads and writes files only through :mod:`kpca_denoise.io`.

Modules
-------
app          ``main()``: QApplication, command-line entry, ``--demo`` and screenshots
main_window  the window: connects the widgets to the session and to the modules below
layout       the window's widgets and docks
settings     settings kept between sessions; placing the window on the screen
actions      actions, keys, toolbar, menus, Help and About
messages     the log, the banner, the status bar, questions
loading      opening images and references; the current image
running      starting and cancelling runs, taking in their results
preview      the preview: a region denoised at every rank before the long run
drawing      drawing the views from the session
viewer       zoom and fit, contrast, ROI, cursor readout
ranks        the ranks compared and selected; results of other parameters
export       writing results, sidecars and the comparison sheet
model        the window's state without Qt: images, result cache, selection
texts        the window's texts without Qt: captions, log lines, messages
compute      the computing side without Qt: jobs, outcomes, the compute process's loop
worker       the QThread worker and the compute process it talks to
views        image panels, the comparison grid and the before/after split view
spectrum     the live eigen-spectrum plot
params_panel the parameter form
imageset     loaded images, thumbnails, the image-set list
panels       progress, log, banner, Help and About dialogs
"""

from ._compat import guard_emit_refcount_bug

# before any widget exists: PySide6 6.12.0 loses a reference to True per emit()
guard_emit_refcount_bug()
