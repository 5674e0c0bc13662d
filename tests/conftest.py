import os

import numpy as np
import pytest

# Qt tests run without a display; set before anything imports Qt.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _qt_garbage_is_collected_on_the_main_thread(request):
    """Qt objects must be finalised on the main thread.  Python's cyclic collector runs
    on whichever thread allocates when a threshold is crossed, in this process also
    the event-loop threads that ``dask.distributed`` leaves behind after
    ``tests/pipeline/test_executor.py``.  A PySide6 object finalised there holds Qt's
    connection lock while it waits for the GIL, and the main thread holds the GIL
    while it waits for that lock in ``QObject::connect``: the suite hung so in a CI
    run (in the ``window`` fixture of the window's tests; py-spy showed both
    stacks).  So the automatic collector is off during a Qt test, and the garbage
    is collected here, on the main thread, after its widgets are closed."""
    if "qtbot" not in request.fixturenames and "qapp" not in request.fixturenames:
        yield
        return
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        if enabled:
            gc.enable()


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
