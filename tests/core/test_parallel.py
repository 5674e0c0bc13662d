"""core.parallel: run_parts runs every item once, whatever the thread count, and raises
errors; kernels compiled with the SLP vectoriser on request; run_in_order adds each
result on the calling thread in order while the threads compute."""

import platform
import re
import threading

import numba
import numpy as np
import pytest

from kpca_denoise.core.parallel import run_in_order, run_parts


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


@numba.njit(nogil=True)
def _row_sums(g, out, r0, r1):
    for r in range(r0, r1):  # eight side-by-side sums, as cross_pages._row8 has them
        a0 = a1 = a2 = a3 = 0.0
        for i in range(g.shape[1] - 4):
            k = np.uint64(i)
            a0 += g[r, k] * g[r, k]
            a1 += g[r, k + np.uint64(1)] * g[r, k + np.uint64(1)]
            a2 += g[r, k + np.uint64(2)] * g[r, k + np.uint64(2)]
            a3 += g[r, k + np.uint64(3)] * g[r, k + np.uint64(3)]
        out[r, 0], out[r, 1], out[r, 2], out[r, 3] = a0, a1, a2, a3


def test_slp_compiles_once_gives_the_scalar_sums_and_restores_numbas_switch():
    g = np.random.default_rng(0).normal(size=(37, 50))
    want = np.array([[np.sum(g[r, j:j + 46] ** 2) for j in range(4)] for r in range(37)])
    out = np.zeros((37, 4))
    before = numba.core.config.SLP_VECTORIZE
    run_parts(_row_sums, 37, g, out, slp=True)
    run_parts(_row_sums, 37, g, out, slp=True)  # compiled already: nothing to do
    assert numba.core.config.SLP_VECTORIZE == before
    assert len(_row_sums.overloads) == 1
    # each lane adds in the scalar order: the same sums as one at a time
    for r in range(37):
        for j in range(4):
            s = 0.0
            for i in range(46):
                s += g[r, i + j] * g[r, i + j]
            assert out[r, j] == s
    np.testing.assert_allclose(out, want, rtol=1e-12)
    if platform.machine() in ("x86_64", "AMD64"):  # the sums packed into vector lanes
        def packed(kernel):
            asm = kernel.inspect_asm(kernel.signatures[0])
            return bool(re.search(r"\bv?mulpd\b", asm))

        plain = numba.njit(nogil=True)(_row_sums.py_func)
        plain(g, out, 0, 37)
        assert packed(_row_sums) and not packed(plain)


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("n", [0, 1, 2, 9, 40])
def test_in_order_adds_every_result_once_in_order_on_the_calling_thread(threads, n):
    import threading

    caller = threading.get_ident()
    seen, computed_on = [], {}

    def compute(i):
        computed_on[i] = (threading.get_ident(), numba.get_num_threads())
        out = np.zeros(3, np.int64)
        run_parts(_mark, 3, out)  # a kernel inside sees one thread: runs inline
        return i * 10 + out.sum()

    def add(i, r):
        assert threading.get_ident() == caller
        seen.append((i, r))

    keep = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        run_in_order(n, compute, add)
        assert numba.get_num_threads() == min(threads, numba.config.NUMBA_NUM_THREADS)
    finally:
        numba.set_num_threads(keep)
    assert seen == [(i, i * 10 + 6) for i in range(n)]
    assert sorted(computed_on) == list(range(n))
    if n > 1 and numba.get_num_threads() > 1 and threads > 1:
        assert all(t == 1 for _, t in computed_on.values())


def test_in_order_runs_at_most_most_calls_at_once():
    # the noise fits' bound (nlf.FITS_AT_ONCE): however many threads, no more than
    # ``most`` computes overlap, and every result is still added once, in order
    import threading

    lock, now, peak, seen = threading.Lock(), [0], [0], []
    at_once = min(2, numba.config.NUMBA_NUM_THREADS)
    started = threading.Barrier(at_once, timeout=5)
    release = threading.Event()

    def compute(i):
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        if i < at_once:
            started.wait()  # the first two overlap for certain (on two threads or more)
            # ... and hold until a third starts: one only can if more than two run
            release.wait(0.5)
        else:
            release.set()
        with lock:
            now[0] -= 1
        return i

    keep = numba.get_num_threads()
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    try:
        run_in_order(8, compute, lambda i, r: seen.append(r), most=2)
    finally:
        numba.set_num_threads(keep)
    assert seen == list(range(8))
    assert peak[0] == at_once


@pytest.mark.parametrize("bad", [0, 5, 11])
def test_in_order_raises_a_computes_error_and_stops(bad):
    added = []

    def compute(i):
        if i == bad:
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match=f"item {bad}"):
        run_in_order(12, compute, lambda i, r: added.append(i))
    assert added == list(range(len(added))) and bad not in added


needs_threads = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                                   reason="a pool's helper needs two threads")


@needs_threads
def test_parts_do_not_wait_for_a_helper_that_never_started():
    """A helper queued behind the pool's other work (another tile's, say) finds nothing
    left once the caller has done every part: run_parts returns without waiting."""
    from kpca_denoise.core.parallel import shared_pool

    release, busy = threading.Event(), threading.Event()

    def block():
        busy.set()
        assert release.wait(60)

    keep = numba.get_num_threads()
    numba.set_num_threads(2)
    blocker = shared_pool(1).submit(block)
    try:
        assert busy.wait(60)
        out = np.zeros(40, np.int64)
        run_parts(_mark, 40, out)  # the caller does all 8 parts alone
        assert np.array_equal(out, np.arange(1, 41)) and not blocker.done()
        added = []
        run_in_order(5, lambda i: i * i, lambda i, r: added.append(r))
        assert added == [0, 1, 4, 9, 16] and not blocker.done()
    finally:
        release.set()
        numba.set_num_threads(keep)
    blocker.result()


@needs_threads
def test_in_order_tells_the_other_threads_to_stop_before_it_waits():
    """``stop`` runs on the calling thread when it fails, before it waits for the item
    another thread computes (which can then end early); the caller's error is raised."""
    stopping = threading.Event()
    caller = threading.get_ident()

    def compute(i):
        if threading.get_ident() == caller:
            raise KeyboardInterrupt
        assert stopping.wait(60)  # ends only once told to
        raise ValueError("the other thread's, after the stop")

    keep = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_in_order(4, compute, lambda i, r: None, stop=stopping.set)
    finally:
        numba.set_num_threads(keep)
    assert stopping.is_set()
