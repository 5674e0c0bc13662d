"""Desktop application (PySide6 + pyqtgraph) for kpca-denoise.

This is the only package that imports Qt.  It calls the same
:func:`kpca_denoise.pipeline.denoise_set` as the command line, in a compute
process, and reads and writes files only through :mod:`kpca_denoise.io`.

Modules
-------
app           ``main()``: QApplication, command-line entry, ``--demo`` and screenshots
main_window   the window: connects the widgets to the session and to the modules below
layout        the window's widgets and docks
settings      settings kept between sessions; placing the window on the screen
actions       actions, keys, toolbar, menus, Help and About
messages      the log, the banner, the status bar, questions
loading       opening images and references; the current image
running       starting and cancelling runs, taking in their results
preview       the preview: a region denoised at every rank before the long run
drawing       drawing the views from the session
viewer        zoom and fit, contrast, ROI, cursor readout
ranks         the ranks compared and selected; results of other parameters
export        writing results, sidecars and the comparison sheet
model         the window's state without Qt: images, result cache, selection
texts         the window's texts without Qt: captions, log lines, messages
jobs          the computing side's vocabulary without Qt: jobs, outcomes, keys, metrics, caches
preview_parts the steps both previews share, without Qt
stack_preview a stack page's preview through the stack path, without Qt
image_preview an image region's preview (one tile of the tiled engine), without Qt
compute       the compute process's loop without Qt: runs jobs, sends outcomes and progress
worker        the QThread worker and the compute process it talks to
views         image panels, the comparison grid and the before/after split view
spectrum      the live eigen-spectrum plot
params_panel  the parameter form
imageset      loaded images, thumbnails, the image-set list
panels        progress, log, banner, Help and About dialogs
_compat       a guard against a PySide6 bug (a reference lost per emit)
"""

from ._compat import guard_emit_refcount_bug

# before any widget exists: PySide6 6.12.0 loses a reference to True per emit()
guard_emit_refcount_bug()
