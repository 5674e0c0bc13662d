"""The dock widget "Denoise (kernel PCA)": the selected image layer through the pipeline.

The pipeline runs on napari's thread worker (a generator that yields progress, see
:func:`._layers.denoise_steps`); the GUI thread only draws the progress, the noise level
and the result layers.  Cancel sets the pipeline's :class:`~kpca_denoise.CancelToken`,
which it checks between chunks.  qtpy, not a fixed binding: the widget runs in whatever
Qt napari runs on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from napari.layers import Image
from napari.qt.threading import thread_worker
from qtpy.QtCore import Signal
from qtpy.QtWidgets import (QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel,
                            QLineEdit, QProgressBar, QPushButton, QVBoxLayout, QWidget)

from ..core.progress import Cancelled, CancelToken, ProgressEvent
from ..params import METHODS, NOISE_MODELS, DenoiseParams, parse_ranks
from ._layers import Pages, denoise_steps, noise_text, rank_outputs, result_name, split_pages

__all__ = ["DenoiseWidget"]

#: the noise std box's largest value (pixel units: 16-bit images)
SIGMA_MAX = 65535.0


@dataclass(frozen=True)
class _Source:
    """What a result layer takes from its input layer (read when the run starts, so
    removing or renaming the input meanwhile changes nothing)."""

    name: str
    geometry: dict  # scale, translate, rotate, shear, affine, units, axis labels
    rgb: bool
    display: dict


@dataclass(frozen=True)
class _Outcome:
    """What the worker returns: the pipeline's result, or the exception that stopped it.
    Returned, not raised: superqt's worker drops a RuntimeError (``Cancelled`` is one)
    without emitting ``finished``."""

    result: Any = None
    error: BaseException | None = None


def _geometry(layer: Image) -> dict:
    """Where an image layer lies in the world: what a result layer needs to overlay it."""
    return {"scale": tuple(layer.scale), "translate": tuple(layer.translate),
            "rotate": layer.rotate, "shear": layer.shear,
            "affine": layer.affine.affine_matrix, "units": layer.units,
            "axis_labels": layer.axis_labels}


@thread_worker(start_thread=False)
def _denoise_worker(pages: Pages, params: DenoiseParams, cancel: CancelToken):
    try:
        result = yield from denoise_steps(pages, params, cancel)
    except Exception as exc:  # noqa: BLE001 - shown in the widget
        return _Outcome(error=exc)
    return _Outcome(result=result)


class DenoiseWidget(QWidget):
    """Denoise the selected image layer; one result layer per rank.

    ``run_finished`` is emitted with ``"done"``, ``"cancelled"`` or ``"error"`` when a run
    ends (tests wait for it)."""

    run_finished = Signal(str)

    def __init__(self, napari_viewer):
        super().__init__()
        self.viewer = napari_viewer
        self.worker = None
        self._cancel: CancelToken | None = None
        #: the running job's input (source layer, pages) and how it ended
        self._job: tuple | None = None
        self._status = "error"

        self.layer_label = QLabel()
        self.method = QComboBox()
        self.method.addItems(METHODS)
        self.method.setToolTip("grouped: non-local kernel PCA with shrinkage (default); "
                               "global: one kernel PCA on patches (Mika et al. 1998)")
        self.sigma = QDoubleSpinBox()
        self.sigma.setRange(0.0, SIGMA_MAX)
        self.sigma.setDecimals(3)
        self.sigma.setSpecialValueText("estimate")
        self.sigma.setToolTip("noise standard deviation in pixel units (25 = 25 grey levels "
                              "of an 8-bit image); 'estimate' (0) measures it per image")
        self.ranks = QLineEdit("auto")
        self.ranks.setToolTip("kernel principal components kept, e.g. 4,8,16 to compare "
                              "ranks (one layer each); auto: the method's choice")
        self.noise_model = QComboBox()
        self.noise_model.addItems(NOISE_MODELS)
        self.run_button = QPushButton("Denoise")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        self.noise_label = QLabel("noise σ: –")
        self.status = QLabel()
        self.status.setWordWrap(True)

        form = QFormLayout()
        form.addRow("layer", self.layer_label)
        form.addRow("method", self.method)
        form.addRow("noise σ", self.sigma)
        form.addRow("ranks", self.ranks)
        form.addRow("noise model", self.noise_model)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        box = QVBoxLayout(self)
        box.addLayout(form)
        box.addLayout(buttons)
        box.addWidget(self.progress)
        box.addWidget(self.noise_label)
        box.addWidget(self.status)
        box.addStretch(1)

        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)
        self.viewer.layers.selection.events.active.connect(self._show_layer)
        self._show_layer()

    # -- input -------------------------------------------------------------------------
    def image_layer(self) -> Image | None:
        layer = self.viewer.layers.selection.active
        return layer if isinstance(layer, Image) else None

    def _show_layer(self, event=None) -> None:
        layer = self.image_layer()
        self.layer_label.setText(layer.name if layer is not None else "(select an image layer)")
        self.run_button.setEnabled(layer is not None and self.worker is None)

    def params(self) -> DenoiseParams:
        """The parameters the widget shows; raises ``ParamError`` naming a bad one."""
        sigma = self.sigma.value()
        return DenoiseParams(method=self.method.currentText(),
                             ranks=parse_ranks(self.ranks.text()),
                             noise_sigma=sigma if sigma > 0 else None,
                             noise_model=self.noise_model.currentText()).validate()

    # -- a run -------------------------------------------------------------------------
    def run(self) -> None:
        """Start denoising the selected layer (does nothing while a run is going)."""
        layer = self.image_layer()
        if layer is None or self.worker is not None:
            return
        self.noise_label.setText("noise σ: –")  # the last run's no longer stands
        try:
            if layer.multiscale:
                raise ValueError("multiscale layers are not supported; open the full "
                                 "resolution as one image")
            params = self.params()
            pages = split_pages(layer.data, layer.rgb)
        except ValueError as exc:
            self._say(str(exc), error=True)
            return
        display = {} if layer.rgb else {"colormap": layer.colormap.name}
        display.update(contrast_limits=tuple(layer.contrast_limits), gamma=layer.gamma,
                       opacity=layer.opacity, blending=layer.blending)
        source = _Source(layer.name, _geometry(layer), layer.rgb, display)
        self._cancel = CancelToken()
        self.worker = _denoise_worker(pages, params, self._cancel)
        self.worker.yielded.connect(self._on_progress)
        # bound methods, not lambdas: the slots then run in this widget's (the GUI) thread
        self._job = (source, pages, layer)
        self.worker.returned.connect(self._on_outcome)
        self.worker.finished.connect(self._on_finished)
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setValue(0)
        n = len(pages.images)
        self._say(f"denoising {source.name}" + (f" ({n} pages)" if pages.stack else ""))
        self.worker.start()

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()
            self._say("cancelling…")

    def _on_progress(self, event: ProgressEvent) -> None:
        if event.total > 0:
            self.progress.setValue(int(100 * min(event.done, event.total) / event.total))
        self.progress.setFormat(f"{event.stage} %p%")

    def _on_outcome(self, outcome: _Outcome) -> None:
        source, pages, layer = self._job
        if isinstance(outcome.error, Cancelled):
            self._status = "cancelled"
            self._say("cancelled")
            return
        try:
            if outcome.error is not None:
                raise outcome.error
            res = outcome.result
            outputs = rank_outputs(pages, res)
        except Exception as exc:  # noqa: BLE001 - a bad image or parameter, shown here
            self._status = "error"
            self._say(f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError)
                      else str(exc), error=True)
            return
        for rank, data in outputs.items():
            self.viewer.add_image(data, name=result_name(source.name, rank), rgb=source.rgb,
                                  **source.geometry, **source.display)
        if layer in self.viewer.layers:  # the input again: Denoise once more runs on it
            self.viewer.layers.selection.active = layer
        self.noise_label.setText(noise_text(res))
        self.progress.setValue(100)
        self.progress.setFormat("done")
        seconds = res.timings.get("total", float("nan"))
        self._status = "done"
        self._say(f"{len(outputs)} layer{'s' * (len(outputs) > 1)} added in {seconds:.1f} s")

    def _on_finished(self) -> None:
        status = self._status
        self.worker, self._cancel, self._job, self._status = None, None, None, "error"
        self.cancel_button.setEnabled(False)
        self._show_layer()
        self.run_finished.emit(status)

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #e0584f;" if error else "")
