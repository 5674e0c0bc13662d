"""The steps a pass takes a part of a chunk of groups through once their members are
gathered, one implementation for the single image (:mod:`.driver`) and the stack
(:mod:`.sequence`): each group's kernel PCA, the shrinkage of every rank and the
pre-image, with their counters and times (:func:`estimate_groups`).  The method and
its equations: ``docs/method.md``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from kpca_denoise.core.preimage import preimage_groups

from .group_pca import NoiseFloors, fit_groups
from .run import PassSettings, Run
from .shrinkage import correct_means, eigen_floor, shrink_own, shrink_pilot
from .stats import SPECTRUM_EVERY, ChannelStats

__all__ = ["estimate_groups", "part_bounds", "shrink_by_rank", "preimage_by_rank",
           "own_components"]


def part_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """Cut ``n`` groups into parts of ``size``: ``[(start, end), ...]``, the last shorter."""
    return [(a, min(n, a + size)) for a in range(0, n, size)]


def estimate_groups(X: np.ndarray, G: np.ndarray, ch: int, ranks: np.ndarray, run: Run,
                    ps: PassSettings, st: ChannelStats) -> tuple[np.ndarray, np.ndarray]:
    """Fit, shrink and pre-image a part of a chunk's groups: ``(estimates, weights)``.

    ``X`` (m, n, d) are the members of ``m`` groups of ``n`` on the noisy channel
    ``ch`` (``d``: a 2-D patch's ``p^2``, a stack's 3-D patch ``depth p^2``) and ``G``
    those the kernel PCA is fitted on (stage 2: the pilot's; stage 1: ``X``).  Only the
    components the shrinkage keeps are computed: above the stage-1 threshold, or above
    the stage-2 cut (an explicit rank in stage 1 may keep components below the
    threshold: all), and every ``ps.spectrum_every``-th group whole on the final pass,
    for its spectrum.  Returns the estimates ``(m, nr, n, d)`` and their aggregation
    weights ``(m, nr, n)`` per rank; the step times (``"eigensolver"``,
    ``"projection"``, ``"preimage"``), the pre-image counters, the final pass's
    spectrum and kept components go into ``st`` (the part's own, on this thread).
    """
    rbf = run.rbf
    fl = ps.floors
    sec = st.seconds
    t1 = time.perf_counter()
    fl_ch = fl if ch == 0 else ps.floors_rest
    every = ps.spectrum_every
    fit = fit_groups(G, rbf, fl.gamma, eigen_floor(ps.stage, ranks, fl_ch, ps.n), gram=rbf,
                     every=every if ps.final else 0)
    lam, V, rowmean = fit[:3]
    K = fit[3] if rbf else None  # the RBF Gram saves the pre-image's first distances
    t2 = time.perf_counter()
    sec["eigensolver"] += t2 - t1
    if ps.final:  # the spectrum of the groups decomposed whole
        sampled = lam[::every]
        st.spectrum = sampled.sum(axis=0) + (st.spectrum if st.spectrum is not None else 0.0)
        st.spectrum_groups += len(sampled)
        st.add_samples("spectrum", sampled)
        st.final_groups += len(G)
    auto, parts = shrink_by_rank(ps, lam, V, rowmean, G, X, K, fl_ch, ranks, rbf, st)
    t3 = time.perf_counter()
    sec["projection"] += t3 - t2
    Est, aggw, fb, its = preimage_by_rank(auto, parts, rbf, int(run.options.max_iter), ps.tol2)
    # the mean step on channel 0 only (the luminance of colour): the chrominances lose
    # with it (docs/options.md); its time counts as the pre-image's
    mk = run.options.mean_kappa1
    if ps.stage == 1 and ch == 0 and mk is not None:
        correct_means(Est, X, float(mk) * run.sigma * run.sigma / X.shape[-1])
    st.fallbacks += int(fb)
    st.iterations += int(its)
    sec["preimage"] += time.perf_counter() - t3
    return Est, aggw


def shrink_by_rank(ps: PassSettings, lam, V, rowmean, P, X, K, fl_ch: NoiseFloors,
                   ranks: np.ndarray, rbf: bool, st: ChannelStats) -> tuple[np.ndarray, list]:
    """Shrink the groups' kernel components for every rank: ``(auto, parts)``.

    ``auto`` marks the ranks of the first part.  Each part is (expansion weights, aggregation
    weights, kept, members, kernel width, Gram): in stage 2 the auto rank is the pilot's
    shrinkage, and explicit ranks keep that many of the noisy group's own components
    whole (docs/method.md#ranks).  The kept counts go into ``st`` on the final pass."""
    auto = ranks < 0 if ps.stage == 2 else np.ones(len(ranks), bool)
    parts = []
    if ps.stage == 1:
        parts.append((*shrink_own(lam, V, ps.floors.tau1, ranks), P, ps.floors.gamma, K))
    elif auto.any():
        parts.append((*shrink_pilot(lam, V, rowmean, P, X, fl_ch, rbf, ranks[auto]), P,
                      ps.floors.gamma, K))
    if not auto.all():
        parts.append(own_components(X, ranks[~auto], rbf, ps.own_gamma, st,
                                    ps.spectrum_every))
    if ps.final:
        st.kept = _by_rank(auto, [pt[2] for pt in parts]).sum(axis=0) + st.kept
    return auto, parts


def preimage_by_rank(auto: np.ndarray, parts: list, rbf: bool, max_iter: int,
                     tol2: float) -> tuple:
    """Pre-image :func:`shrink_by_rank`'s parts, back in the order of the ranks.

    Returns ``(Est (m, nr, n, d), aggregation weights (m, nr, n), fallbacks, iterations)``."""
    ests, fb, its = [], 0, 0
    for Gam, _, _, members, gamma, gram in parts:
        e, f, i = preimage_groups(Gam, members, rbf, gamma, max_iter, tol2, gram)
        ests.append(e)
        fb, its = fb + int(f.sum()), its + int(i.sum())
    return _by_rank(auto, ests), _by_rank(auto, [pt[1] for pt in parts]), fb, its


def own_components(X: np.ndarray, ranks: np.ndarray, rbf: bool, gamma: float,
                   st: ChannelStats, every: int = SPECTRUM_EVERY) -> tuple:
    """Keep the ``ranks`` leading components of each noisy group's own kernel PCA whole.

    Stage 2's explicit ranks.  Returns what :func:`preimage_by_rank` needs for the
    pre-image (as its other rank kind does); the groups' summed spectrum (what the
    ranks cut) is added to ``st.rank_spectrum``."""
    fit = fit_groups(X, rbf, gamma, 0.0, gram=rbf)
    lam, V = fit[0], fit[1]
    st.rank_spectrum = lam.sum(axis=0) + (st.rank_spectrum if st.rank_spectrum is not None
                                          else 0.0)
    st.add_samples("rank_spectrum", lam[::every])
    Gam, aggw, kept = shrink_own(lam, V, math.inf, ranks)
    return Gam, aggw, kept, X, gamma, (fit[3] if rbf else None)


def _by_rank(auto: np.ndarray, parts: list) -> np.ndarray:
    """The arrays of the auto ranks and of the explicit ranks (in that order in
    ``parts``, each with its ranks on axis 1) put back in the order of ``auto``."""
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[1] = len(auto)
    out = np.empty(shape, dtype=np.result_type(*parts))
    out[:, np.flatnonzero(auto)] = parts[0]
    out[:, np.flatnonzero(~auto)] = parts[1]
    return out
