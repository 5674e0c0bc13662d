"""Sets as one: a stack's pages denoised with their neighbours (docs/stacks.md)."""

import json

import numpy as np
import pytest
import tifffile

from kpca_denoise import DenoiseParams, denoise_set, denoise_stack
from kpca_denoise.cli import main
from kpca_denoise.core.metrics import psnr
from kpca_denoise.params import ParamError
from kpca_denoise.sequence import decide


def _scene(seed=0, size=160):
    """A smooth random scene with edges (synthetic, 0..255)."""
    from scipy import ndimage as ndi

    rng = np.random.default_rng(seed)
    a = ndi.gaussian_filter(rng.normal(size=(size, size)), 3.0)
    a = ndi.zoom((a > 0).astype(float), 1.0) * 120 + ndi.gaussian_filter(
        rng.normal(size=(size, size)), 1.5) * 400
    return 30 + 190 * (a - a.min()) / np.ptp(a)


def _pan(pages=5, size=64, seed=0):
    """A view panning 1 px per page over a scene."""
    s = _scene(seed)
    return np.stack([s[40:40 + size, 30 + k:30 + k + size] for k in range(pages)])


def _noisy(clean, sigma=25.0, seed=1):
    return clean + np.random.default_rng(seed).normal(0, sigma, clean.shape)


def test_sequence_no_equals_page_by_page():
    noisy = np.clip(_noisy(_pan(3, 48)), 0, 255).astype(np.uint8)
    out = denoise_stack(noisy, noise_sigma=25, sequence="no")
    assert out.shape == noisy.shape and out.dtype == np.uint8
    for k in range(3):
        res = denoise_set([noisy[k]], DenoiseParams(noise_sigma=25))
        np.testing.assert_array_equal(out[k], res.images[0].outputs[None])


def test_neighbours_beat_pages_alone_and_are_reported():
    clean = _pan(5, 64)
    noisy = _noisy(clean)
    alone = denoise_stack(noisy, noise_sigma=25.0, sequence="no")
    seq, stats = denoise_stack(noisy, noise_sigma=25.0, return_stats=True)
    assert stats["sequence"]["decision"] == "sequence"
    assert stats["sequence"]["linked"] == [True] * 4
    # the pan is found: content moves 1 px left per page
    assert stats["sequence"]["shifts"] == [[0, -1]] * 4
    assert psnr(clean, seq, 255) > psnr(clean, alone, 255) + 1.0
    used = stats["pages"][2]["sequence"]["neighbours_used"]
    assert set(used) <= {str(d) for d in range(-4, 5)} and used.get("-1", 0) > 0.05
    assert abs(sum(used.values()) - 1) < 1e-3


def test_high_noise_stacks_take_larger_pilot_groups():
    """Above HIGH_NOISE of the data range the stack's pilot groups take 64 patches (the
    search along the pages still stops as for 40) with a stage-1 window of the patch + 6
    and an own-page search of 16; below it, or when set, as asked."""
    from kpca_denoise.core.grouped.geometry import HIGH_NOISE
    from kpca_denoise.core.grouped.sequence import (HIGH_NOISE_GROUP1,
                                                    HIGH_NOISE_MATCH_EXTRA1, HIGH_NOISE_RADIUS1)

    clean = _pan(5, 64)
    got = {}
    set_ = {"group_size1": 50, "match_size1": 9, "search_radius1": 20}
    for sigma, grouped in ((20.0, None), (60.0, None), (60.0, set_)):
        noisy = np.clip(_noisy(clean, sigma), 0, 255).astype(np.uint8)
        kw = {"grouped": grouped} if grouped else {}
        _, stats = denoise_stack(noisy, noise_sigma=sigma, sequence="yes", return_stats=True,
                                 **kw)
        q = stats["pages"][1]["grouped"][0]["params"]
        got[sigma, bool(grouped)] = (q["group_size1"], q["match_size1"] - q["patch_size"],
                                     q["search_radius1"])
    assert 20.0 / 255 < HIGH_NOISE < 60.0 / 255
    assert got == {(20.0, False): (40, 2, 32),
                   (60.0, False): (HIGH_NOISE_GROUP1, HIGH_NOISE_MATCH_EXTRA1, HIGH_NOISE_RADIUS1),
                   (60.0, True): (50, 4, 20)}
    # pages of 11x11 offer a corner reference 7 x 7 = 49 candidates: 40 stays
    tiny = np.clip(_noisy(clean[:, :11, :11], 60.0), 0, 255).astype(np.uint8)
    out, stats = denoise_stack(tiny, noise_sigma=60.0, sequence="yes", return_stats=True)
    assert out.shape == tiny.shape
    assert stats["pages"][1]["grouped"][0]["params"]["group_size1"] == 40


def test_the_final_pass_searches_a_stacks_own_page_less():
    """A stack's final pass searches RADIUS2 px on a page's own patches (its neighbour
    pages offer the rest), a single image 32; a set search_radius is kept, and so is
    the wider search where the narrow one would leave a corner reference too few
    candidates (pages 5 px wide)."""
    from kpca_denoise.core.grouped.sequence import RADIUS2

    clean = _pan(5, 64)
    noisy = np.clip(_noisy(clean, 25.0), 0, 255).astype(np.uint8)
    got = {}
    for grouped in (None, {"search_radius": 24}):
        kw = {"grouped": grouped} if grouped else {}
        _, stats = denoise_stack(noisy, noise_sigma=25.0, sequence="yes", return_stats=True,
                                 **kw)
        q = stats["pages"][1]["grouped"][0]["params"]
        got[bool(grouped)] = (q["search_radius1"], q["search_radius"])
    alone = denoise_set([noisy[1]], DenoiseParams(noise_sigma=25.0))
    assert RADIUS2 < 32
    assert got == {False: (32, RADIUS2), True: (24, 24)}
    assert alone.images[0].stats["grouped"][0]["params"]["search_radius"] == 32
    thin = np.ascontiguousarray(noisy[:, :, :5])
    out, stats = denoise_stack(thin, noise_sigma=25.0, sequence="yes", return_stats=True)
    assert out.shape == thin.shape
    assert stats["pages"][1]["grouped"][0]["params"]["search_radius"] == 32


def test_unrelated_set_is_detected_and_runs_page_by_page():
    pages = [_scene(seed, 96) for seed in (3, 4, 5, 6)]
    noisy = [_noisy(p, 20, seed) for seed, p in enumerate(pages)]
    dec = decide(noisy, 20.0)
    assert dec.decision == "pages" and dec.linked == [False] * 3
    assert max(dec.scores) < 0.55
    res = denoise_set(noisy, DenoiseParams(noise_sigma=20.0))
    assert res.resolved["sequence"][0]["decision"] == "pages"
    alone = denoise_set(noisy[1:2], DenoiseParams(noise_sigma=20.0))
    np.testing.assert_array_equal(res.images[1].outputs[None], alone.images[0].outputs[None])
    related = decide(list(_noisy(_pan(4, 96), 20)), 20.0)
    assert related.decision == "sequence" and all(related.linked)


def test_poisson_gaussian_stack_has_one_noise_estimate():
    clean = _pan(4, 64)
    rng = np.random.default_rng(2)
    noisy = 2.0 * rng.poisson(clean / 2.0) + rng.normal(0, 3, clean.shape)
    out, stats = denoise_stack(noisy, noise_model="poisson-gaussian", sequence="yes",
                               return_stats=True)
    models = [p["noise_model"] for p in stats["pages"]]
    assert all(m == models[0] for m in models)
    assert 1.0 < models[0]["gain"][0] < 3.0
    assert psnr(clean, out, 255) > psnr(clean, noisy, 255) + 6


def test_bad_inputs_are_named():
    with pytest.raises(ParamError, match="sequence must be one of auto, yes, no, got 'maybe'"):
        DenoiseParams(sequence="maybe").validate()
    with pytest.raises(ValueError, match=r"stack must be \(P, H, W\) or \(P, H, W, C\)"):
        denoise_stack(np.zeros((8, 8)))
    with pytest.raises(ValueError, match="sequence 'yes' needs images of one size"):
        denoise_set([np.zeros((40, 40)) + np.arange(40), np.zeros((48, 40)) + np.arange(40)],
                    DenoiseParams(sequence="yes", noise_sigma=5.0))


def test_a_tiny_stack_against_bm4d(camera):
    bm4d = pytest.importorskip("bm4d")
    # the cameraman panning 1 px per page: 6 pages of 80x80
    clean = np.stack([camera[100:180, 200 + k:280 + k] for k in range(6)]).astype(float)
    noisy = _noisy(clean, 25.0, 5)
    ours = denoise_stack(noisy, noise_sigma=25.0)
    theirs = np.asarray(bm4d.bm4d(noisy, 25.0)).reshape(noisy.shape)
    assert psnr(clean, ours, 255) > psnr(clean, theirs, 255) + 0.3


def test_a_three_page_stack_through_the_command_line(tmp_path, capsys):
    clean = _pan(3, 48)
    noisy = np.clip(_noisy(clean) * 200, 0, 65535).astype(np.uint16)
    src = tmp_path / "stack.tif"
    tifffile.imwrite(src, noisy, imagej=True, resolution=(2.0, 2.0),
                     metadata={"axes": "ZYX", "spacing": 0.5, "unit": "um"})
    out = tmp_path / "out"
    assert main(["denoise", str(src), "-o", str(out), "--sequence", "yes", "-q"]) == 0
    err = capsys.readouterr().err
    assert "stack.tif: denoised with its neighbouring pages (sequence yes" in err
    written = [f for f in out.glob("stack_*.tif")]
    assert len(written) == 1
    with tifffile.TiffFile(written[0]) as tf:
        got = tf.asarray()
        assert tf.imagej_metadata["spacing"] == 0.5 and tf.imagej_metadata["unit"] == "um"
    assert got.shape == noisy.shape and got.dtype == np.uint16
    side = json.loads(next(out.glob("kpca-denoise-*.json")).read_text())
    assert side["params"]["sequence"] == "yes"
    assert side["items"][0]["sequence"]["decision"] == "sequence"
    pages = side["items"][0]["stats"]["pages"]
    assert [p["sequence"]["page"] for p in pages] == [0, 1, 2]
    assert psnr(clean * 200, got, 65535) > psnr(clean * 200, noisy, 65535) + 3


def test_a_stack_in_tiles_keeps_its_neighbours():
    # tiles carry every page (docs/stacks.md#memory): the pipeline's tiled stack is the
    # whole stack's, still a sequence
    noisy = np.clip(_noisy(_pan(2, 128)), 0, 255).astype(np.uint8)
    whole = denoise_stack(noisy, noise_sigma=25.0, sequence="yes")
    out, stats = denoise_stack(noisy, noise_sigma=25.0, sequence="yes", tile_size=64,
                               return_stats=True)
    assert stats["sequence"]["decision"] == "sequence"
    assert stats["pages"][1]["grouped"][0]["tiles"] == 4
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, whole)


def test_progress_and_cancel_per_page():
    from kpca_denoise import Cancelled, CancelToken

    noisy = _noisy(_pan(3, 48))
    token, pages = CancelToken(), []

    def progress(ev):
        if ev.stage == "page":
            pages.append((ev.done, ev.total))
            token.cancel()

    with pytest.raises(Cancelled):
        denoise_stack(noisy, noise_sigma=25.0, sequence="yes", progress=progress, cancel=token)
    assert pages == [(1, 3)]


def test_the_spectrum_is_a_mean_over_groups():
    from kpca_denoise.core.grouped.sequence import denoise_grouped_stack

    noisy = _noisy(_pan(3, 48))[..., None]
    _, stats = denoise_grouped_stack(noisy, 25.0)
    _, alone = denoise_grouped_stack(noisy, 25.0, depth=1)
    # eigenvalues of kernel matrices of values in 0..1: the mean is at most 1 each
    for st in (stats[0], alone[0]):
        assert 0 < st["spectrum"][0] <= 1.0 and np.all(np.diff(st["spectrum"]) <= 1e-12)
        # the spread over the groups, for the window's spectrum panel
        q = np.asarray(st["spectrum_quantiles"])
        assert q.shape == (3, st["spectrum"].size) and np.all(q[0] <= q[1] + 1e-12)
        assert np.all(q[1] <= q[2] + 1e-12) and q[2, 0] > 0


def test_explicit_ranks_keep_that_many_components_on_a_sequence():
    """A stack's groups across pages give ranks the meaning they have on an image
    (docs/method.md#ranks): a rank keeps that many components whole."""
    clean = _pan(4, 48)
    noisy = _noisy(clean)
    res = denoise_set(list(noisy), DenoiseParams(noise_sigma=25.0, ranks=(1, 4, None),
                                                 sequence="yes"))
    page = res.images[1]
    kept = page.stats["grouped"][0]["effective_rank"]
    assert kept[1] == pytest.approx(1.0) and kept[4] == pytest.approx(4.0), kept
    noise = noisy[1] - clean[1]
    share = {r: float(np.vdot(page.outputs[r] - clean[1], noise) / np.vdot(noise, noise))
             for r in (1, 4)}
    assert share[4] > share[1] + 0.05, share


def test_a_missing_page_cuts_the_sequence():
    # page 2 is flat (nothing to remove, returned as it is): pages 1 and 3 are not
    # neighbours, so the set is two sequences of two pages
    noisy = list(_noisy(_pan(5, 48)))
    noisy[2] = np.full((48, 48), 100.0)
    res = denoise_set(noisy, DenoiseParams(noise_sigma=25.0, sequence="yes"))
    assert [s["images"] for s in res.resolved["sequence"]] == [
        [res.images[0].name, res.images[1].name], [res.images[3].name, res.images[4].name]]
    np.testing.assert_array_equal(res.images[2].outputs[None], noisy[2])


def test_a_sequence_gets_the_noise_model_most_of_its_pages_got():
    from kpca_denoise.core.vst import GeneralizedAnscombe
    from kpca_denoise.prepare import CHOSEN_HINT, PreparedItem
    from kpca_denoise.results import ImageResult
    from kpca_denoise.sequence import one_noise_model, runs_of_one_size

    params = DenoiseParams(strength=1.5)
    vst = GeneralizedAnscombe(np.array([2.0]), np.array([3.0]))

    def page(k, chosen):
        res = ImageResult(k, f"p{k}", noise_sigma=1.5 if chosen else 6.0 * 1.5,
                          stats=dict(noise=dict(level=4.0 + k)))
        if chosen:
            res.stats.update(noise_model=dict(model="poisson-gaussian", chosen=True),
                             hint=CHOSEN_HINT)
        return PreparedItem("image", np.zeros((8, 8)), res, vst=vst if chosen else None)

    # one run although the model differs; the majority (chosen) given to page 1
    seq = [page(0, True), page(1, False), page(2, True)]
    assert len(runs_of_one_size(seq)) == 1
    one_noise_model(params, seq)
    assert all(it.vst is not None for it in seq)
    assert seq[1].result.noise_sigma == 1.5
    assert seq[1].result.stats["noise_model"]["model"] == "poisson-gaussian"
    # the majority Gaussian: the chosen page gets back its measured level (x strength)
    seq = [page(0, False), page(1, True), page(2, False)]
    one_noise_model(params, seq)
    assert all(it.vst is None for it in seq)
    assert seq[1].result.noise_sigma == 5.0 * 1.5
    assert "noise_model" not in seq[1].result.stats


def test_a_float_stack_gets_the_range_its_integer_version_has():
    """A float stack holding 0..255 (or 0..1) values gets the data range an 8-bit stack
    gets from its type, decided once on its middle page: at sigma 60 on that range the
    high-noise pilot, as the 8-bit stack; values in no conventional range (far below
    zero) keep no range, and a range given wins."""
    from kpca_denoise.core.grouped.sequence import HIGH_NOISE_GROUP1
    from kpca_denoise.working import nominal_range

    clean = _pan(5, 64)
    noisy = np.clip(_noisy(clean, 60.0), 0, 255).astype(np.uint8)

    def pilot(stack, sigma, **kw):
        _, stats = denoise_stack(stack, noise_sigma=sigma, sequence="yes", return_stats=True,
                                 **kw)
        q = stats["pages"][1]["grouped"][0]["params"]
        return q["group_size1"], q["match_size1"], q["data_range"]

    as_uint8 = pilot(noisy, 60.0)
    assert as_uint8 == (HIGH_NOISE_GROUP1, 11, 255.0)
    assert pilot(noisy.astype(np.float64), 60.0) == as_uint8
    assert pilot(noisy / 255.0, 60.0 / 255) == (HIGH_NOISE_GROUP1, 11, 1.0)
    assert pilot(noisy - 1000.0, 60.0)[::2] == (40, None)
    assert pilot(noisy.astype(np.float32), 60.0, grouped={"data_range": 1000.0})[::2] == (40, 1000.0)
    # the decision itself: the smallest conventional range within 4 sigma of the values
    rng = np.random.default_rng(3)
    assert nominal_range(rng.uniform(0, 1, 4000), 0.01) == 1.0
    assert nominal_range(rng.uniform(0, 200, 4000), 5.0) == 255.0
    assert nominal_range(rng.uniform(0, 3000, 4000), 20.0) == 4095.0
    assert nominal_range(rng.uniform(-50, 200, 4000), 5.0) is None
    assert nominal_range(rng.uniform(0, 200, 4000), 60.0) == 255.0  # not [0, 1]: sigma 60


def _sparse_zstack(pages=8, size=128, seed=0):
    """Thin bright curves drifting a pixel a slice on a dark background, under
    Poisson-Gaussian noise (gain 3, std 5): a sparse z-stack."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size].astype(float)
    clean = np.full((pages, size, size), 20.0)
    for _ in range(12):
        a, b, c = rng.uniform(0, size, 3)
        f = rng.uniform(0.03, 0.08)
        for k in range(pages):
            d = np.abs(yy - (a + 8 * np.sin(f * xx + b) + 0.7 * k))
            clean[k] += 180 * np.exp(-d ** 2 / 2.0) * (np.abs(xx - c) < size / 3)
    return 3.0 * rng.poisson(clean / 3.0) + rng.normal(0, 5.0, clean.shape)


def test_a_stabilised_stack_is_decided_through_one_stabiliser():
    """The link decision reads a Poisson-Gaussian stack through one stabiliser measured as
    the sequence's, not each page's own estimate (on a sparse z-stack those moved by a
    factor of two between slices, and slices of one scene scored as unrelated)."""
    from kpca_denoise.core.vst import GeneralizedAnscombe
    from kpca_denoise.sequence import decide_stack, decision_stabilisers, shared_noise

    stack = _sparse_zstack()
    params = DenoiseParams(noise_model="poisson-gaussian")
    # as estimated page by page: gain and read noise traded against each other
    own = [GeneralizedAnscombe(np.array([g]), np.array([s]))
           for g, s in [(3.0, 5.0), (1.45, 6.3)] * 4]
    pages = list(stack)
    picked, measured = decision_stabilisers(params, pages, own, [1.0] * len(pages))
    _, shared = shared_noise(params, pages, [1.0] * len(pages), own[0])
    assert all(np.allclose(v.gain, shared.gain) and np.allclose(v.sigma, shared.sigma)
               for v in picked)
    assert 2.0 < float(np.ravel(shared.gain)[0]) < 4.5  # the stack's gain, 3
    assert measured is not None and measured[1] is picked[0]  # measured once: the run's too
    dec = decide_stack(pages, picked, [1.0] * len(pages), params)
    assert dec.decision == "sequence" and all(dec.linked), dec.scores
    # through the pages' own estimates, so unlike, the same slices look unrelated
    assert not any(decide_stack(pages, own, [1.0] * len(pages), params).linked)
    # two sensors (gains 16 and 64) are not one: each page keeps its own
    rng = np.random.default_rng(8)
    y = np.linspace(2000.0, 50000.0, 64)[None, :] * np.ones((64, 1))
    two = [g * rng.poisson(y / g) + rng.normal(0, 200.0, y.shape) for g in (16.0, 64.0)]
    theirs = [GeneralizedAnscombe(np.array([g]), np.array([200.0])) for g in (16.0, 64.0)]
    assert decision_stabilisers(params, two, theirs, [1.0, 1.0])[0] == theirs
    # Gaussian or mixed pages keep their own (None: decided on the pixels)
    assert decision_stabilisers(params, pages, [None] * len(pages), [5.0] * 8)[0] == [None] * 8


def test_a_subpixel_drift_gets_one_shift_for_every_pair():
    """Content drifting a fraction of a pixel per page: the phase correlation's integer
    shifts jitter between two values, which cut neighbouring pages' 3-D patches
    differently; the decision takes one shift for the run (steady_shifts), and that
    is worth more than half a dB against the jittering shifts."""
    from scipy import ndimage as ndi

    from kpca_denoise.core.grouped.motion import steady_shifts
    from kpca_denoise.core.grouped.sequence import denoise_grouped_stack

    assert steady_shifts([[1, 1], [1, 0], [1, 1], [2, -3]], [True, True, True, True]).tolist() \
        == [[1, 1], [1, 0], [1, 1], [1, -3]]  # y's 1, 2 steadied; x's 1, 0, -3 are motion
    # an unlinked pair cuts the runs; a tie goes to the smaller shift
    assert steady_shifts([[0, 1], [0, 2], [5, 5], [0, -1], [0, 0]],
                         [True, True, False, True, True]).tolist() \
        == [[0, 1], [0, 1], [5, 5], [0, 0], [0, 0]]
    s = _scene(0, 200)
    clean = np.stack([ndi.shift(s, (0.3 * k, 0.55 * k), order=3)[40:112, 40:112]
                      for k in range(8)])
    noisy = _noisy(clean, 15.0, 3)
    out, stats = denoise_stack(noisy, noise_sigma=15.0, return_stats=True)
    assert stats["sequence"]["shifts"] == [[0, 1]] * 7
    jitter = np.array([[0, 1], [0, 0]] * 3 + [[0, 1]])
    est, _ = denoise_grouped_stack(noisy[..., None], 15.0, shifts=jitter,
                                   options=dict(data_range=255))
    assert psnr(clean, out, 255) > psnr(clean, est[None][..., 0], 255) + 0.4


def test_each_page_starts_from_half_its_references_and_every_pixel_gets_an_estimate():
    """docs/stacks.md#half-the-references: a checkerboard of each page's reference grid,
    alternating from page to page, plus the references a pixel would otherwise miss
    (a jump of the motion, a cut, the stack's ends, a page alone in its scene)."""
    from kpca_denoise.core.grouped.sequence import denoise_grouped_stack

    s = _scene(3, 200)
    # a pan with a 3 px jump, then a cut to another scene of two pages, then a page
    # alone (cut on both sides)
    origins = [(40, 30), (40, 31), (43, 32), (43, 33), (10, 90), (10, 91), (100, 20)]
    clean = np.stack([s[y:y + 56, x:x + 56] for y, x in origins])
    noisy = _noisy(clean)[..., None]
    linked = np.array([True, True, True, False, True, False])
    shifts = np.array([[0, -1], [-3, -1], [0, -1], [0, 0], [0, -1], [0, 0]])
    out, stats = {}, {}
    for thin in (False, True):
        res, st = denoise_grouped_stack(noisy, 25.0, linked=linked, shifts=shifts, thin=thin)
        out[thin], stats[thin] = res[None][..., 0], st[0]
    # no pixel is left without an estimate (the noisy value would come back there)
    assert np.all(out[True] != noisy[..., 0])
    # the pilot's 4 px grid keeps about 0.6 of its references here; stage 2's 5 px grid
    # (sequence.STAGE2_GRID) fewer than 0.95: its 5x5 patches do not overlap, so a
    # dropped reference's pixels are covered by the neighbours' slices alone, which
    # the 1-3 px motion moves partly off them, and more references come back
    pilot = [denoise_grouped_stack(noisy, 25.0, linked=linked, shifts=shifts, thin=thin,
                                   two_stage=False)[1][0]["groups"] for thin in (False, True)]
    assert pilot[1] < 0.65 * pilot[0]
    final = [stats[thin]["groups"] - pilot[thin] for thin in (False, True)]
    assert final[0] < 0.8 * pilot[0]  # stage 2's own grid, sparser than the pilot's
    assert final[1] < 0.95 * final[0]
    for k in range(len(origins)):
        full, thin = psnr(clean[k], out[False][k], 255), psnr(clean[k], out[True][k], 255)
        assert thin > full - 0.3, (k, full, thin)
    # the page alone in its scene has no neighbour's slices: all its references
    alone = denoise_grouped_stack(noisy[6:], 25.0, thin=True)[0][None][0, ..., 0]
    np.testing.assert_allclose(out[True][6], alone, atol=1e-9)
    np.testing.assert_allclose(out[False][6], alone, atol=1e-9)


def test_a_pages_chunks_only_reorder_its_sums(monkeypatch):
    """sequence.STACK_CHUNKS sets how many rows of references a chunk of a page takes
    through the steps together: the pixels are the same whatever the chunks, to the
    floating-point noise of adding the parts' sums in another order."""
    import kpca_denoise.core.grouped.sequence as seq

    noisy = _noisy(_pan(4, 96))[..., None]
    shifts = np.array([[0, -1]] * 3)
    monkeypatch.setattr(seq, "CHUNK_GROUPS", 64)  # a row of references a chunk, or more
    stage = seq.SweepPass.__init__
    out, chunks = {}, {}
    for k in (1, 4):
        monkeypatch.setattr(seq, "STACK_CHUNKS", k)
        chunks[k] = []

        def spy(self, *a, **kw):
            stage(self, *a, **kw)
            chunks[k].append(self.nchunks)

        monkeypatch.setattr(seq.SweepPass, "__init__", spy)
        out[k] = seq.denoise_grouped_stack(noisy, 25.0, shifts=shifts)[0][None][..., 0]
    assert len(chunks[1]) == 2 and all(a > b > 1 for a, b in zip(chunks[1], chunks[4])), chunks
    np.testing.assert_allclose(out[4], out[1], rtol=0, atol=1e-9)


def test_the_checkerboard_follows_the_pages_index_in_the_whole_stack():
    """A part of a stack given with the index of its first page (a preview's) picks the
    whole stack's references: a page far enough from the part's start gets the whole
    stack's result, and without the index another one."""
    from kpca_denoise.core.grouped.sequence import denoise_grouped_stack, page_reach

    clean = _pan(13, 48)
    noisy = _noisy(clean)[..., None]
    shifts = np.array([[0, -1]] * 12)
    whole = denoise_grouped_stack(noisy, 25.0, shifts=shifts, window=1)[0][None][..., 0]
    # page 12 depends on the pages up to four page reaches before it (8): 4..12
    assert 4 * page_reach(1) == 8
    part = denoise_grouped_stack(noisy[3:], 25.0, shifts=shifts[3:], window=1, first_page=3)
    np.testing.assert_allclose(part[0][None][9, ..., 0], whole[12], atol=1e-9)
    other = denoise_grouped_stack(noisy[3:], 25.0, shifts=shifts[3:], window=1)
    assert np.abs(other[0][None][9, ..., 0] - whole[12]).max() > 1e-3
