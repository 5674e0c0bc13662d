"""The parameter form: builds a :class:`~kpca_denoise.params.DenoiseParams`.

Automatic choices (kernel width, noise level, patch size) are the ``None``
values of ``DenoiseParams``; after a run the panel shows the value the
method chose next to the "auto" box, so the user can copy it to manual.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QDoubleValidator, QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ..params import MAX_STRENGTH, PROFILES, SEQUENCE_CHOICES, DenoiseParams
from .model import DEFAULT_RANKS, default_ranks
from .texts import format_ranks, parse_ranks

__all__ = ["ParamsPanel", "parse_ranks", "format_ranks", "DEFAULT_LANDMARKS"]

#: landmarks offered when the Nyström box is ticked: at n_train 2000 (the default)
#: the cost of the fit is then of the order of the exact one, and it falls as m
#: goes down or pays off as n_train goes up
DEFAULT_LANDMARKS = 1000

_METHOD_TEXT = {
    "grouped": "grouped (non-local, default)",
    "global": "global (Mika et al. 1998)",
}


class _AutoSpin(QSpinBox):
    """A whole number from ``low`` to ``high`` whose value below them shows as "auto": one
    widget instead of a checkbox + spin box.  The range is in the tooltip, and a number
    typed outside it is not changed silently: ``notice`` says what happened (the window
    puts it in the status bar), where Qt alone left 9 of a typed 999 and "auto" of a 1."""

    notice = Signal(str)

    def __init__(self, name: str, low: int, high: int, tip: str, unit: str = " pixels") -> None:
        super().__init__()
        self.name, self.low, self.high, self.unit = name, low, high, unit
        self.setRange(low - 1, high)
        self.setSpecialValueText("auto")
        self.setValue(low - 1)
        self.setToolTip(f"{self.range_text()} (below {low}); {tip}")
        self.setKeyboardTracking(False)
        self._typed = ""
        self.lineEdit().textEdited.connect(self._on_edited)
        self.editingFinished.connect(self._on_finished)

    def range_text(self) -> str:
        return f"{self.low} to {self.high}{self.unit}, or auto"

    def validate(self, text: str, pos: int):  # noqa: D102 (Qt's)
        result = super().validate(text, pos)
        state = result[0] if isinstance(result, tuple) else result
        t = text.strip()
        if state == QValidator.State.Invalid and t and t.lstrip("-").isdigit():
            # a key that would leave the range is refused: say why
            self.notice.emit(f"{self.name}: at most {self.high}{self.unit}"
                             if not t.startswith("-") else f"{self.name}: {self.range_text()}")
        return result

    def _on_edited(self, text: str) -> None:
        self._typed = text.strip()

    def _on_finished(self) -> None:
        typed, self._typed = self._typed, ""
        if typed.isdigit() and int(typed) < self.low:
            self.notice.emit(f"{self.name}: {typed} is below {self.low}, so auto "
                             f"({self.range_text()})")


class _AutoFloat(QWidget):
    """'auto' check box + a number field + the value the method chose."""

    changed = Signal()

    def __init__(self, tip: str, fmt: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.fmt = fmt
        self.auto = QCheckBox("auto", self)
        self.auto.setChecked(True)
        self.edit = QLineEdit(self)
        v = QDoubleValidator(0.0, 1e12, 8, self.edit)
        v.setNotation(QDoubleValidator.Notation.ScientificNotation)
        self.edit.setValidator(v)
        self.edit.setPlaceholderText("value")
        self.edit.setMinimumWidth(60)
        self.edit.setEnabled(False)
        self.edit.setToolTip(tip)
        self.auto.setToolTip(tip)
        self.chosen = QLabel("", self)
        self.chosen.setStyleSheet("color: #2e7d32;")
        self.chosen.setToolTip("the value the method chose in the last run")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.auto)
        lay.addWidget(self.edit, 1)
        lay.addWidget(self.chosen)
        self.auto.toggled.connect(self._on_auto)
        self.edit.editingFinished.connect(self.changed)

    def _on_auto(self, on: bool) -> None:
        self.edit.setEnabled(not on)
        if not on and not self.edit.text() and self.chosen.property("value") is not None:
            # switching to manual starts from what automatic chose
            self.edit.setText(self.fmt.format(self.chosen.property("value")))
        self.changed.emit()

    def value(self, name: str) -> float | None:
        if self.auto.isChecked():
            return None
        t = self.edit.text().strip()
        try:
            return float(t)
        except ValueError:
            raise ValueError(f"{name}: enter a number or tick 'auto'") from None

    def set_value(self, v: float | None) -> None:
        self.auto.setChecked(v is None)
        if v is not None:
            self.edit.setText(self.fmt.format(v))

    def show_chosen(self, v: float | None, prefix: str = "→ ") -> None:
        self.chosen.setProperty("value", v)
        self.chosen.setText("" if v is None else prefix + self.fmt.format(v))


def _form(parent: QWidget) -> QFormLayout:
    """A form whose long rows put the field under its label (keeps the panel narrow)."""
    f = QFormLayout(parent)
    f.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    return f


_SEQUENCE_TIPS = {
    "auto": "a stack's pages together when neighbouring pages show one scene;\n"
            "separate images each alone (the command line's --sequence auto)",
    "yes": "a stack's pages together; the loaded separate images of one size, channel count\n"
           "and type together, in their load order (the image set's order)",
    "no": "every image and every page alone",
}


def _choice(form: QFormLayout, label: str, items: dict, tooltip: str,
            item_tips: dict | None = None) -> QComboBox:
    """A row of ``form``: a list of ``items`` (value: text shown), with tooltips."""
    box = QComboBox(form.parentWidget())
    for value, text in items.items():
        box.addItem(text, value)
        if item_tips:
            box.setItemData(box.count() - 1, item_tips[value], Qt.ItemDataRole.ToolTipRole)
    box.setToolTip(tooltip)
    form.addRow(label, box)
    return box


class _WheelGuard(QObject):
    """Keeps the mouse wheel from changing a list, or a number field that is not
    focused: the wheel event goes to the form around it, which scrolls.  A list keeps
    the focus after a pick, so it never takes the wheel: scrolling the form past it
    changed the noise model unseen."""

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Wheel and (isinstance(obj, QComboBox)
                                                  or not obj.hasFocus()):
            event.ignore()  # not accepted: Qt passes it on to the parent widgets
            return True
        return False


class _WindowKeys(QObject):
    """Lets P and S (no modifier) through a focused field to the window's shortcuts."""

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
        return (event.type() == QEvent.Type.ShortcutOverride
                and event.key() in (Qt.Key.Key_P, Qt.Key.Key_S)
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier)


class ParamsPanel(QScrollArea):
    """Every denoising parameter, plus the clean-reference controls."""

    changed = Signal()
    notice = Signal(str)  # a word for the status bar (a number typed out of its range)
    referenceRequested = Signal()
    referenceCleared = Signal()
    suggestRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        self.setWidget(body)
        outer = QVBoxLayout(body)
        outer.setContentsMargins(6, 6, 6, 6)
        outer.addWidget(self._method_group(body))
        outer.addWidget(self._patch_group(body))
        outer.addWidget(self._noise_group(body))
        outer.addWidget(self._reference_group(body))
        self.error = QLabel("", body)
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b71c1c;")
        outer.addWidget(self.error)
        outer.addStretch(1)
        self._connect_fields()
        self._blocked = False
        self._ranks_of: dict = {}  # method -> the rank list the user last had with it
        self._method_shown: str | None = None
        self._on_method()
        # the mouse wheel scrolls the form: a list or number field under the pointer
        # changes only once clicked (focused), never while the form scrolls past it
        self._wheel_guard = _WheelGuard(self)
        # P (preview) and S (split) are no character of any field here: they reach the
        # window's actions from any field (a focused field took them: P after editing the
        # strength did nothing)
        self._window_keys = _WindowKeys(self)
        for w in body.findChildren(QWidget):
            w.installEventFilter(self._window_keys)
        for w in body.findChildren(QComboBox) + body.findChildren(QAbstractSpinBox):
            w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            w.installEventFilter(self._wheel_guard)
        # never narrower than the form: with no horizontal scrolling a control cut at the
        # right edge could not be reached
        self.setMinimumWidth(body.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
                             + 2 * self.frameWidth())

    def _method_group(self, body: QWidget) -> QGroupBox:
        """The method and the ranks to compare."""
        g_method = QGroupBox("Method", body)
        f = _form(g_method)
        self.method = _choice(f, "method", _METHOD_TEXT, (
            "grouped: kernel PCA on groups of similar patches with shrinkage, two stages.\n"
            "global: one kernel PCA on patches sampled from the image (Mika et al. 1998);\n"
            "its eigen-spectrum is shown live."))
        self.profile = _choice(f, "profile", {k: k for k in PROFILES}, (
            "the grouped method's speed/quality preset (docs/speed.md):\n"
            + "\n".join(f"{k}: {v}" for k, v in PROFILES.items())), PROFILES)
        self.sequence = _choice(f, "set as sequence", {k: k for k in SEQUENCE_CHOICES}, (
            "images denoised together, groups taking patches from neighbouring pages\n"
            "(docs/stacks.md), as --sequence on the command line: the pages of a stack\n"
            "(a z-stack, a time-lapse), and with 'yes' the separate images of one size\n"
            "(a burst, a folder of time-lapse frames) in their load order:\n"
            "auto: a stack's pages when neighbouring pages show one scene, separate images alone;\n"
            "yes: always; no: each image and page alone"), _SEQUENCE_TIPS)
        self.ranks = QLineEdit(format_ranks(DEFAULT_RANKS["grouped"]), g_method)
        self.ranks.setToolTip("Kernel principal components kept, compared side by side.\n"
                              "grouped: components each group keeps whole (low: smooth, high: noisy); "
                              "'auto' = the shrinkage.\n"
                              "global: 'auto' = the rank from the noise level for patch sets, 16 for "
                              "images.\nAlready computed ranks show instantly.")
        f.addRow("ranks to compare", self.ranks)
        self.suggest = QPushButton("Suggested ranks", g_method)
        self.suggest.setToolTip("Ranks where the result visibly changes for this method and input "
                                "(measured by benchmarks/ranks.py), 'auto' included")
        self.suggest.clicked.connect(self.suggestRequested)
        f.addRow("", self.suggest)
        return g_method

    def _patch_group(self, body: QWidget) -> QGroupBox:
        """Patch size, stride, training patches, landmarks, γ, iterations, seed."""
        g_patch = QGroupBox("Patches and kernel", body)
        f = _form(g_patch)
        self.patch_size = _AutoSpin("patch size", 2, 64, "patch side in pixels; auto: 8 for "
                                    "'global', 5 for 'grouped'")
        f.addRow("patch size", self.patch_size)
        self.stride = _AutoSpin("stride", 1, 64, "step between patches ('global'); auto: "
                                "patch size / 2")
        f.addRow("stride", self.stride)
        self.n_train = QSpinBox(g_patch)
        self.n_train.setRange(2, 100_000)
        self.n_train.setSingleStep(250)
        self.n_train.setValue(2000)
        self.n_train.setKeyboardTracking(False)
        self.n_train.setToolTip("training patches sampled for the kernel PCA ('global');\n"
                                "exact: cost grows as n² (Gram) and n per pre-image;\n"
                                "with Nyström landmarks (m): as n·m², and m per pre-image")
        f.addRow("training patches", self.n_train)
        row = QWidget(g_patch)
        h = QHBoxLayout(row)
        h.setContentsMargins(0, 0, 0, 0)
        landmarks_tip = (
            "Nyström approximation ('global' only): the kernel PCA is fitted through m landmarks\n"
            "drawn from the training patches instead of the full n × n Gram matrix.\n"
            "It trades a small approximation error for fitting many more training patches:\n"
            "time O(n_train·m²) and memory O(m²) instead of O(n_train²); the pre-image\n"
            "costs O(m) per patch.  m must be at least the largest rank; m ≥ n_train is exact.\n"
            "Unticked: exact kernel PCA.")
        self.landmarks_on = QCheckBox("on", row)
        self.landmarks_on.setToolTip(landmarks_tip)
        self.n_landmarks = QSpinBox(row)
        self.n_landmarks.setRange(1, 100_000)
        self.n_landmarks.setSingleStep(100)
        self.n_landmarks.setValue(DEFAULT_LANDMARKS)
        self.n_landmarks.setSuffix(" m")
        self.n_landmarks.setKeyboardTracking(False)
        self.n_landmarks.setEnabled(False)
        self.n_landmarks.setToolTip(landmarks_tip)
        h.addWidget(self.landmarks_on)
        h.addWidget(self.n_landmarks, 1)
        f.addRow("Nyström landmarks", row)
        self.gamma = _AutoFloat("RBF kernel parameter γ in k(x,y)=exp(-γ‖x−y‖²); "
                                "auto chooses it from the data and the noise level", "{:.4g}")
        f.addRow("kernel width γ", self.gamma)
        self.iterations = QSpinBox(g_patch)
        self.iterations.setRange(1, 10_000)
        self.iterations.setValue(100)
        self.iterations.setKeyboardTracking(False)
        self.iterations.setToolTip("cap on the fixed-point pre-image iterations per patch "
                                   "(method global; grouped uses 1 per group)")
        f.addRow("pre-image iterations", self.iterations)
        self.seed = QSpinBox(g_patch)
        self.seed.setRange(0, 2_147_483_647)
        self.seed.setKeyboardTracking(False)
        self.seed.setToolTip("random seed: training-patch sampling, eigensolver start, added noise")
        f.addRow("seed", self.seed)
        return g_patch

    def _noise_group(self, body: QWidget) -> QGroupBox:
        """The noise level and model, and the noise added to try the method."""
        g_noise = QGroupBox("Noise", body)
        f = _form(g_noise)
        self.noise_sigma = _AutoFloat("noise standard deviation in pixel units (25 = 25 grey levels "
                                      "of an 8-bit image); auto estimates it per image", "{:.3g}")
        f.addRow("noise level σ", self.noise_sigma)
        self.strength = QDoubleSpinBox(g_noise)
        self.strength.setRange(0.1, MAX_STRENGTH)
        self.strength.setDecimals(2)
        self.strength.setSingleStep(0.1)
        self.strength.setValue(1.0)
        self.strength.setPrefix("× ")
        self.strength.setKeyboardTracking(False)
        self.strength.setToolTip("how much noise to remove: a factor on the noise level (estimated "
                                 "or given); below 1 keeps more detail and noise, above 1 smooths "
                                 "more.  With a preview (P) shown, the preview follows.")
        f.addRow("strength", self.strength)
        self.noise_model = QComboBox(g_noise)
        self.noise_model.addItem("auto (measured)", "auto")
        self.noise_model.addItem("white", "white")
        self.noise_model.addItem("correlated (camera JPEG)", "correlated")
        self.noise_model.addItem("Poisson-Gaussian (camera, microscope)", "poisson-gaussian")
        self.noise_model.setToolTip("auto: measured from the image (white, correlated as a camera's "
                                    "JPEG leaves it, or growing with the signal); Poisson-Gaussian: "
                                    "denoised after the generalised Anscombe transform (σ is then "
                                    "its Gaussian part)")
        f.addRow("noise model", self.noise_model)
        self.poisson_gain = _AutoFloat("Poisson gain (pixel units per photon); auto estimates it", "{:.3g}")
        f.addRow("Poisson gain", self.poisson_gain)
        row = QWidget(g_noise)
        h = QHBoxLayout(row)
        h.setContentsMargins(0, 0, 0, 0)
        self.add_noise_on = QCheckBox("add", row)
        self.add_noise_on.setToolTip("add white Gaussian noise before denoising, to try the method "
                                     "on a clean image; PSNR/SSIM are then measured against it")
        self.add_noise = QDoubleSpinBox(row)
        self.add_noise.setRange(0.1, 1e6)
        self.add_noise.setDecimals(1)
        self.add_noise.setValue(25.0)
        self.add_noise.setKeyboardTracking(False)
        self.add_noise.setEnabled(False)
        h.addWidget(self.add_noise_on)
        h.addWidget(self.add_noise, 1)
        f.addRow("Gaussian noise σ", row)
        return g_noise

    def _reference_group(self, body: QWidget) -> QGroupBox:
        """The clean reference of the current image."""
        g_ref = QGroupBox("Clean reference (current image)", body)
        v = QVBoxLayout(g_ref)
        self.reference_label = QLabel("none — metrics show the remaining noise", g_ref)
        self.reference_label.setWordWrap(True)
        v.addWidget(self.reference_label)
        h = QHBoxLayout()
        b = QPushButton("Choose…", g_ref)
        b.setToolTip("a clean version of the current image: PSNR and SSIM are measured against it")
        b.clicked.connect(self.referenceRequested)
        c = QPushButton("Clear", g_ref)
        c.clicked.connect(self.referenceCleared)
        h.addWidget(b)
        h.addWidget(c)
        h.addStretch(1)
        v.addLayout(h)
        return g_ref

    def _connect_fields(self) -> None:
        """Every edit re-validates and tells the window (which shows cached ranks)."""
        self.method.currentIndexChanged.connect(self._on_method)
        self.profile.currentIndexChanged.connect(self._emit)
        self.sequence.currentIndexChanged.connect(self._emit)
        self.ranks.editingFinished.connect(self._emit)
        for s in (self.patch_size, self.stride):
            s.notice.connect(self.notice)
        for s in (self.patch_size, self.stride, self.n_train, self.n_landmarks, self.iterations, self.seed,
                  self.strength):
            s.valueChanged.connect(self._emit)
        self.landmarks_on.toggled.connect(self._on_method)
        self.gamma.changed.connect(self._emit)
        self.noise_sigma.changed.connect(self._emit)
        self.noise_model.currentIndexChanged.connect(self._on_method)
        self.poisson_gain.changed.connect(self._emit)
        self.add_noise_on.toggled.connect(self.add_noise.setEnabled)
        self.add_noise_on.toggled.connect(self._emit)
        self.add_noise.valueChanged.connect(self._emit)

    # -- reading and writing ---------------------------------------------------
    def _on_method(self) -> None:
        method = self.method.currentData()
        is_global = method == "global"
        shown = getattr(self, "_method_shown", None)
        if not self._blocked and shown is not None and method != shown:
            # each method keeps the user's rank list: switching back finds it again (the
            # other's suggested ranks mean little here); a method not used yet suggests its own
            self._ranks_of[shown] = self.ranks.text()
            self.ranks.setText(self._ranks_of.get(method, format_ranks(DEFAULT_RANKS[method])))
        self._method_shown = method
        # these only mean something for plain kernel PCA
        self.stride.setEnabled(is_global)
        self.n_train.setEnabled(is_global)
        self.gamma.setEnabled(is_global)
        self.profile.setEnabled(not is_global)  # a preset of the grouped method
        self.sequence.setEnabled(not is_global)
        self.iterations.setEnabled(is_global)  # grouped: 1 per group, not a choice here
        self.landmarks_on.setEnabled(is_global)
        self.n_landmarks.setEnabled(is_global and self.landmarks_on.isChecked())
        self.poisson_gain.setEnabled(self.noise_model.currentData() == "poisson-gaussian")
        self._emit()

    def _emit(self) -> None:
        if self._blocked:
            return
        try:
            self.params()
            self.error.setText("")
        except ValueError as exc:
            self.error.setText(str(exc))
        self.changed.emit()

    def params(self) -> DenoiseParams:
        """The parameters in the form, validated; raises ValueError naming the field."""
        method = self.method.currentData()
        ranks = parse_ranks(self.ranks.text())
        n_landmarks = self.n_landmarks.value() if self.landmarks_on.isChecked() else None
        p = DenoiseParams(
            method=method,
            ranks=ranks,
            patch_size=self.patch_size.value() if self.patch_size.value() >= 2 else None,
            stride=self.stride.value() if self.stride.value() >= 1 else None,
            n_train=self.n_train.value(),
            n_landmarks=n_landmarks if method == "global" else None,
            gamma=self.gamma.value("kernel width γ"),
            noise_sigma=self.noise_sigma.value("noise level σ"),
            preimage_iterations=self.iterations.value(),
            seed=self.seed.value(),
            add_noise=float(self.add_noise.value()) if self.add_noise_on.isChecked() else None,
            noise_model=self.noise_model.currentData(),
            poisson_gain=(self.poisson_gain.value("Poisson gain")
                          if self.noise_model.currentData() == "poisson-gaussian" else None),
            strength=round(float(self.strength.value()), 2),
            # a preset of the grouped method: 'global' keeps the default (one cache entry)
            profile=self.profile.currentData() if method == "grouped" else "default",
            sequence=self.sequence.currentData() if method == "grouped" else "auto",
        )
        if method == "global":
            # 'auto' is the noise-level rank for patch sets and 16 for images
            top = max(16 if r is None else r for r in p.ranks)
            if n_landmarks is not None and n_landmarks < top:
                raise ValueError(f"landmarks: {n_landmarks} is fewer than the largest rank "
                                 f"{top}; use at least {top} landmarks")
        else:
            # stride, training patches, landmarks and γ do not apply: keep them at
            # their defaults so they do not split the result cache or the sidecar
            # (and 'grouped' rejects landmarks)
            p = p.replace(stride=None, n_train=DenoiseParams.n_train, n_landmarks=None, gamma=None,
                          preimage_iterations=None)
        return p.validate()

    def set_params(self, p: DenoiseParams) -> None:
        """Fill the form (without emitting one signal per field)."""
        self._blocked = True
        try:
            i = self.method.findData(p.method)
            self.method.setCurrentIndex(max(i, 0))
            self.profile.setCurrentIndex(max(self.profile.findData(p.profile), 0))
            self.sequence.setCurrentIndex(max(self.sequence.findData(p.sequence), 0))
            self.ranks.setText(format_ranks(p.ranks))
            self.patch_size.setValue(p.patch_size if p.patch_size else 1)
            self.stride.setValue(p.stride if p.stride else 0)
            self.n_train.setValue(int(p.n_train))
            self.landmarks_on.setChecked(p.n_landmarks is not None)
            if p.n_landmarks is not None:
                self.n_landmarks.setValue(int(p.n_landmarks))
            self.gamma.set_value(p.gamma)
            self.noise_sigma.set_value(p.noise_sigma)
            self.noise_model.setCurrentIndex(max(self.noise_model.findData(p.noise_model), 0))
            self.poisson_gain.set_value(p.poisson_gain)
            self.strength.setValue(float(p.strength))
            self.iterations.setValue(int(p.preimage_iterations or 100))
            self.seed.setValue(int(p.seed))
            self.add_noise_on.setChecked(p.add_noise is not None)
            if p.add_noise is not None:
                self.add_noise.setValue(float(p.add_noise))
        finally:
            self._blocked = False
        self._method_shown = self.method.currentData()  # set with its ranks: nothing to swap
        self._on_method()

    def suggest_ranks(self, is_patchset: bool = False) -> None:
        """Put the suggested ranks for the method and this kind of input in the form."""
        self.set_ranks(default_ranks(self.method.currentData(), is_patchset))

    def set_ranks(self, ranks) -> None:
        self.ranks.setText(format_ranks(ranks))
        self._emit()

    def show_resolved(self, gamma: float | None, noise_sigma: float | None,
                      estimated: bool) -> None:
        """Show what 'auto' chose in the last run for the current image (the noise level
        measured, before the strength)."""
        self.gamma.show_chosen(gamma)
        self.noise_sigma.show_chosen(noise_sigma if estimated else None,
                                     prefix="estimated ")

    def set_reference_text(self, text: str | None) -> None:
        self.reference_label.setText(text or "none — metrics show the remaining noise")
