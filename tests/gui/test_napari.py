"""The napari plugin (kpca_denoise/napari, docs/napari.md): manifest, dock widget,
function and sample data.  The napari tests are skipped when napari is not installed
(``pip install '.[napari]'``); the layer helpers are tested either way."""

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from kpca_denoise import CancelToken, Cancelled, DenoiseParams, denoise_image
from kpca_denoise.napari import _layers
from kpca_denoise.napari._layers import denoise_steps, noise_text, rank_outputs, \
    result_name, split_pages

# napari on the application's binding (PySide6-Essentials), never a PyQt it might find
os.environ.setdefault("QT_API", "pyside6")

MANIFEST = Path(__file__).resolve().parents[2] / "kpca_denoise" / "napari" / "napari.yaml"


def _noisy(shape=(64, 64), sigma=20.0, seed=0):
    rng = np.random.default_rng(seed)
    clean = np.tile(np.linspace(40, 215, shape[1]), (shape[0], 1))
    if len(shape) == 3:
        clean = np.repeat(clean[..., None], shape[2], axis=2)
    return np.clip(clean + rng.normal(0, sigma, clean.shape), 0, 255).astype(np.uint8)


# -- without napari -------------------------------------------------------------------

def test_importing_the_plugin_package_loads_neither_napari_nor_qt():
    import subprocess
    import sys

    code = ("import sys, kpca_denoise.napari, kpca_denoise.napari._layers, "
            "kpca_denoise.napari._sample_data; "
            "print(any(m.split('.')[0] in ('napari', 'qtpy', 'PySide6', 'magicgui') "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_split_pages_reads_images_colour_and_stacks():
    grey, colour = np.zeros((8, 9)), np.zeros((8, 9, 3))
    one = split_pages(grey, rgb=False)
    assert not one.stack and len(one.images) == 1 and one.images[0] is grey
    assert len(split_pages(colour, rgb=True).images) == 1
    stack = split_pages(np.zeros((4, 8, 9)), rgb=False)
    assert stack.stack and len(stack.images) == 4 and stack.images[0].shape == (8, 9)
    assert len(split_pages(np.zeros((2, 8, 9, 3)), rgb=True).images) == 2
    with pytest.raises(ValueError, match=r"shape \(2, 3, 8, 9\)"):
        split_pages(np.zeros((2, 3, 8, 9)), rgb=False)


def test_result_names_carry_the_rank_tag():
    assert result_name("cells", None) == "cells [kpca]"
    assert result_name("cells", 8) == "cells [kpca_r8]"


def test_denoise_steps_yields_progress_returns_the_result_and_cancels(monkeypatch):
    monkeypatch.setattr(_layers, "REPORT_INTERVAL_S", 0.0)
    img = _noisy()
    pages = split_pages(img, rgb=False)
    params = DenoiseParams(method="grouped", noise_sigma=20.0)
    gen = denoise_steps(pages, params, CancelToken())
    events = []
    with pytest.raises(StopIteration) as stop:
        while True:
            events.append(next(gen))
    res = stop.value.value
    assert events and all(e.total >= 0 for e in events)
    out = rank_outputs(pages, res)[None]
    np.testing.assert_array_equal(out, denoise_image(img, noise_sigma=20.0))
    assert noise_text(res) == "noise σ = 20 (given)"
    # closing it early (a worker's quit) cancels the pipeline and joins its thread
    before = threading.active_count()
    token = CancelToken()
    gen = denoise_steps(pages, params, token)
    next(gen)
    gen.close()
    assert token.is_set() and threading.active_count() == before
    # a token set from outside stops the run with Cancelled
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        list(denoise_steps(pages, params, token))


def test_the_function_is_denoise_image_and_takes_stacks():
    from kpca_denoise.napari import denoise_layer

    img = _noisy()
    np.testing.assert_array_equal(denoise_layer(img, noise_sigma=20.0),
                                  denoise_image(img, noise_sigma=20.0))
    np.testing.assert_array_equal(denoise_layer(img, 20.0, method="global", rank=8),
                                  denoise_image(img, noise_sigma=20.0, method="global",
                                                ranks=8))
    stack = np.stack([img, _noisy(seed=1)])
    out = denoise_layer(stack, noise_sigma=20.0)
    assert out.shape == stack.shape and out.dtype == stack.dtype
    np.testing.assert_array_equal(out[1], denoise_image(stack[1], noise_sigma=20.0))

    # None estimates as 0 does; a bad level is refused, not estimated instead
    np.testing.assert_array_equal(denoise_layer(img, None), denoise_layer(img, 0.0))
    from kpca_denoise.params import ParamError

    for bad in (-5.0, float("nan")):
        with pytest.raises(ParamError, match="noise_sigma"):
            denoise_layer(img, bad)


def test_poisson_gaussian_noise_is_told_by_its_gain_and_sigma():
    # the label said "noise σ = 1 (estimated, Gaussian part)": the stabilised domain's 1
    pages = split_pages(_noisy(), rgb=False)
    res = _layers.denoise_pages(pages, DenoiseParams(noise_model="poisson-gaussian"))
    model = res.images[0].stats["noise_model"]
    text = noise_text(res)
    assert text.startswith("Poisson-Gaussian noise: gain ")
    assert f"σ {float(model['sigma'][0]):.3g}" in text and "σ 1 " not in text + " "


def test_sample_data_is_the_shipped_images_with_noise_25():
    from kpca_denoise.napari._sample_data import astronaut, camera

    (data, meta, kind), = camera()
    assert kind == "image" and data.shape == (512, 512) and data.dtype == np.uint8
    assert "σ=25" in meta["name"]
    from PIL import Image

    clean = np.asarray(Image.open(MANIFEST.parents[2] / "sample_images" / "camera.png"))
    assert 20 < np.std(data.astype(float) - clean) < 26  # clipping at 0 and 255 shrinks it
    (data, _, _), = astronaut()
    assert data.shape == (512, 512, 3)


# -- with napari ------------------------------------------------------------------------

@pytest.fixture
def napari():
    return pytest.importorskip("napari")


@pytest.fixture
def viewer(napari, qtbot):
    """napari's window, hidden.  Offscreen Qt has no OpenGL: layers cannot be drawn, so
    this viewer gets none (vispy fails to make their visuals)."""
    v = napari.Viewer(show=False)
    yield v
    v.close()


@pytest.fixture
def model(napari, qtbot):
    """napari's viewer model (layers, selection; no canvas): what the widget talks to,
    and it holds layers without OpenGL."""
    from napari.components import ViewerModel

    return ViewerModel()


def test_the_manifest_is_valid(napari):
    from npe2 import PluginManifest

    pm = PluginManifest.from_file(MANIFEST)
    pm.validate_imports()  # every python_name imports
    assert pm.name == "kpca-denoise"
    assert [w.display_name for w in pm.contributions.widgets] == ["Denoise (kernel PCA)"]


def test_the_manifest_is_found_through_the_entry_point(napari):
    from npe2 import PluginManager

    pm = PluginManager.instance()
    pm.discover()
    assert "kpca-denoise" in pm._manifests


def _widget(viewer, qtbot):
    from kpca_denoise.napari._widget import DenoiseWidget

    w = DenoiseWidget(viewer)
    qtbot.addWidget(w)
    return w


def test_the_dock_widget_opens_in_the_viewer(viewer):
    dock, w = viewer.window.add_plugin_dock_widget("kpca-denoise", "Denoise (kernel PCA)")
    assert type(w).__name__ == "DenoiseWidget"  # the viewer it got is a public-only proxy
    assert not w.run_button.isEnabled()  # no image layer selected
    assert w.layer_label.text() == "(select an image layer)"


def test_the_widget_follows_the_selected_layer(model, qtbot):
    w = _widget(model, qtbot)
    model.add_image(_noisy(), name="cells")
    assert w.layer_label.text() == "cells" and w.run_button.isEnabled()
    model.add_points(np.zeros((1, 2)), name="spots")
    assert not w.run_button.isEnabled()


def test_a_run_adds_the_result_with_the_inputs_scale_translate_and_name(model, qtbot):
    img = _noisy()
    model.add_image(img, name="cells", scale=(0.5, 2.0), translate=(10.0, -3.0))
    w = _widget(model, qtbot)
    w.sigma.setValue(20.0)
    with qtbot.waitSignal(w.run_finished, timeout=120_000) as sig:
        w.run_button.click()
    assert sig.args == ["done"]
    out = model.layers["cells [kpca]"]
    np.testing.assert_array_equal(out.scale, (0.5, 2.0))
    np.testing.assert_array_equal(out.translate, (10.0, -3.0))
    np.testing.assert_array_equal(out.data, denoise_image(img, noise_sigma=20.0))
    assert w.noise_label.text() == "noise σ = 20 (given)"
    assert w.run_button.isEnabled() and not w.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: w.worker is None)
    # the input is selected again: a second Denoise runs on it, not on the result
    assert model.layers.selection.active is model.layers["cells"]
    assert w.layer_label.text() == "cells"


def test_the_result_overlays_a_rotated_sheared_layer_with_units(model, qtbot):
    # rotate, shear, units and axis labels were dropped: the result lay elsewhere
    model.add_image(_noisy(), name="tilted", rotate=30, shear=[0.2], scale=(0.5, 2.0),
                    units=("um", "um"), axis_labels=("row", "col"), opacity=0.7,
                    blending="additive")
    w = _widget(model, qtbot)
    w.sigma.setValue(20.0)
    with qtbot.waitSignal(w.run_finished, timeout=120_000) as sig:
        w.run_button.click()
    assert sig.args == ["done"]
    src, out = model.layers["tilted"], model.layers["tilted [kpca]"]
    np.testing.assert_allclose(out.extent.world, src.extent.world)
    np.testing.assert_allclose(out.rotate, src.rotate)
    np.testing.assert_allclose(out.shear, src.shear)
    assert out.units == src.units and out.axis_labels == ("row", "col")
    assert out.opacity == 0.7 and out.blending == "additive"
    qtbot.waitUntil(lambda: w.worker is None)


def test_ranks_become_layers_and_stacks_and_colour_keep_their_shape(model, qtbot):
    stack = np.stack([_noisy(), _noisy(seed=1)])
    model.add_image(stack, name="stack")
    w = _widget(model, qtbot)
    w.method.setCurrentText("global")
    w.ranks.setText("4, 8")
    with qtbot.waitSignal(w.run_finished, timeout=120_000) as sig:
        w.run()
    assert sig.args == ["done"]
    assert [layer.name for layer in model.layers][1:] == ["stack [kpca_r4]", "stack [kpca_r8]"]
    assert model.layers["stack [kpca_r8]"].data.shape == stack.shape
    assert "estimated" in w.noise_label.text()
    model.add_image(_noisy((64, 64, 3)), name="rgb", rgb=True)
    w.method.setCurrentText("grouped")
    w.ranks.setText("auto")
    with qtbot.waitSignal(w.run_finished, timeout=120_000):
        w.run()
    out = model.layers["rgb [kpca]"]
    assert out.rgb and out.data.shape == (64, 64, 3)


def test_bad_input_and_cancel_are_reported(model, qtbot):
    model.add_image(_noisy(), name="cells")
    w = _widget(model, qtbot)
    w.ranks.setText("0")
    w.run()
    assert w.worker is None and "ranks" in w.status.text()
    w.ranks.setText("auto")
    model.add_image(np.zeros((2, 3, 16, 16)), name="4d")
    w.run()
    assert w.worker is None and "shape (2, 3, 16, 16)" in w.status.text()
    model.layers.selection.active = model.layers["cells"]
    with qtbot.waitSignal(w.run_finished, timeout=120_000) as sig:
        w.run()
        w.cancel_button.click()
    assert sig.args == ["cancelled"] and w.status.text() == "cancelled"
    assert "cells [kpca]" not in model.layers


def test_sample_data_opens_in_the_viewer(model):
    model.open_sample("kpca-denoise", "camera")
    assert model.layers[-1].name == "camera (noise σ=25)"
    assert model.layers[-1].data.shape == (512, 512)
