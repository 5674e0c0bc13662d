"""The compute process gives back the memory a finished job freed (issue 62)."""

import sys

import numpy as np
import pytest

from kpca_denoise.gui.compute import release_freed_memory


def _rss() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_goes_back_to_the_system():
    # arrays under glibc's mmap threshold live on the heap, which free() keeps: 200 MB of
    # them freed with one kept at the top pins the heap at its peak until it is trimmed
    blocks = [np.ones(8000) for _ in range(3200)]  # 64 kB each, 205 MB
    keep = blocks[-1]
    del blocks
    before = _rss()
    assert release_freed_memory()
    after = _rss()
    assert before - after > 100, (before, after)
    assert keep.sum() == 8000
