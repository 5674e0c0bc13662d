"""core.parallel.run_parts: every item once, whatever the thread count; errors raised."""

import numba
import numpy as np
import pytest

from kpca_denoise.core.parallel import run_parts


@numba.njit(nogil=True)
def _mark(out, r0, r1):
    for r in range(r0, r1):
        out[r] += r + 1


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_every_item_once(n):
    out = np.zeros(n, np.int64)
    run_parts(_mark, n, out)
    assert np.array_equal(out, np.arange(1, n + 1))


def test_the_result_does_not_depend_on_the_threads():
    outs = []
    for t in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        numba.set_num_threads(t)
        try:
            out = np.zeros(333, np.int64)
            run_parts(_mark, 333, out)
            outs.append(out)
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert all(np.array_equal(o, outs[0]) for o in outs)


def test_an_error_in_a_part_is_raised():
    def kernel(r0, r1):
        if r1 == 50:  # the last part, whatever the parts
            raise ValueError("part")

    with pytest.raises(ValueError, match="part"):
        run_parts(kernel, 50)
