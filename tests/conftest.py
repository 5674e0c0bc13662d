import os

import numpy as np
import pytest

# Qt tests run without a display; set before anything imports Qt.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


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
