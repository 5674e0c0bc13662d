"""What the grouped method's passes count and report, per channel: each stage's time
(:data:`STAGES`), the counters, and the final groups' eigen-spectrum, sampled, with
its spread over the groups, pooled across the tiles of an image
(:func:`pooled_quantiles`); a chunk's parts run at once with their counts merged in
order and their stage times shared out (:func:`run_chunk_parts`).  The stage clock:
``docs/speed.md``; the spectrum the window plots: ``docs/gui.md``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from kpca_denoise.core.parallel import run_in_order

__all__ = ["STAGES", "ChannelStats", "run_chunk_parts", "spectrum_every", "quantiles", "pool",
           "pooled_quantiles", "SPECTRUM_EVERY", "SPECTRUM_EVERY_MAX", "SPECTRUM_SAMPLES",
           "QUANTILES", "POOL_ROWS", "SAMPLE_ROWS"]

#: the stages a pass reports progress and time for, in order
STAGES = ("grouping", "eigensolver", "projection", "preimage", "reassembly")
#: the final pass decomposes every this many-th group fully for the spectrum it reports
#: (the others get only the components the shrinkage uses); a pass of more than
#: ``SPECTRUM_SAMPLES * SPECTRUM_EVERY`` groups samples more sparsely, up to every
#: ``SPECTRUM_EVERY_MAX``-th, keeping at least ``SPECTRUM_SAMPLES``
SPECTRUM_EVERY = 8
SPECTRUM_EVERY_MAX = 32
SPECTRUM_SAMPLES = 512


def spectrum_every(groups: int, row: int = 0) -> int:
    """Return every how many-th group of a final pass is decomposed fully.

    Every how many-th group of a final pass of ``groups`` groups is decomposed
    fully for the reported spectrum: :data:`SPECTRUM_EVERY`, sparser for a large pass
    (up to :data:`SPECTRUM_EVERY_MAX`) as long as :data:`SPECTRUM_SAMPLES` remain, and
    prime to ``row``, the references per grid row, so that the sampled groups do not
    fall on the same columns row after row."""
    every = int(min(max(groups // SPECTRUM_SAMPLES, SPECTRUM_EVERY), SPECTRUM_EVERY_MAX))
    while row > 1 and math.gcd(every, row) != 1:
        every += 1
    return every


@dataclass
class ChannelStats:
    """What one channel's passes count (reported as its stats dict)."""

    seconds: dict = field(default_factory=lambda: {s: 0.0 for s in STAGES})
    fallbacks: int = 0
    iterations: int = 0
    groups: int = 0
    spectrum: np.ndarray | None = None
    spectrum_groups: int = 0  # the final pass's groups decomposed fully
    final_groups: int = 0
    kept: Any = 0
    rank_spectrum: np.ndarray | None = None  # stage 2's noisy groups, for explicit ranks
    # sampled groups' spectra of each kind, for the quantiles over groups (add_samples)
    samples: dict = field(default_factory=lambda: {"spectrum": [], "rank_spectrum": []})
    seen: dict = field(default_factory=lambda: {"spectrum": 0, "rank_spectrum": 0})
    step: dict = field(default_factory=lambda: {"spectrum": 1, "rank_spectrum": 1})

    def merge(self, part: "ChannelStats") -> None:
        """Add what a part of a pass counted, in the same order as counted here.

        Add what ``part`` (the fresh stats of one part of a pass, filled on another
        thread) counted, as if it had been counted here: the same additions in the
        same order.  Its ``seconds`` are left to the caller."""
        self.fallbacks += part.fallbacks
        self.iterations += part.iterations
        self.groups += part.groups
        self.spectrum_groups += part.spectrum_groups
        self.final_groups += part.final_groups
        self.kept = part.kept + self.kept
        for name in ("spectrum", "rank_spectrum"):
            mine, theirs = getattr(self, name), getattr(part, name)
            if theirs is not None:
                setattr(self, name, theirs + (mine if mine is not None else 0.0))
            for rows in part.samples[name]:
                self.add_samples(name, rows)

    def add_samples(self, kind: str, rows: np.ndarray) -> None:
        """Keep a bounded, evenly spread share of sampled spectra.

        Keep sampled spectra ``rows`` of ``kind``: every ``step``-th of all offered,
        the step doubling whenever more than :data:`SAMPLE_ROWS` are held, so that a
        long stack's samples stay bounded and evenly spread over its pages."""
        step, seen = self.step[kind], self.seen[kind]
        self.seen[kind] = seen + len(rows)
        self.samples[kind].append(np.array(rows[(-seen) % step::step]))
        if sum(len(r) for r in self.samples[kind]) > SAMPLE_ROWS:
            n = min(r.shape[1] for r in self.samples[kind])
            self.samples[kind] = [np.concatenate([r[:, :n] for r in self.samples[kind]])[::2]]
            self.step[kind] = 2 * step

    def report(self, total: float, params: dict, rank_list: Sequence) -> dict:
        """Return the channel's stats dict.

        The channel's stats dict: counters, seconds (``total`` its share of the
        call's wall time), the resolved ``params``, the final pass's mean spectrum and
        its quantiles over the groups, a bounded pool of sampled spectra (for
        :func:`pooled_quantiles` across tiles) and the mean kept rank per rank."""
        ng = max(self.final_groups, 1)
        ns = max(self.spectrum_groups, 1)
        return dict(
            preimage_fallbacks=self.fallbacks, preimage_iterations=self.iterations,
            groups=self.groups, seconds={**self.seconds, "total": total}, params=dict(params),
            # mean eigenvalues of the final stage's centred group Gram matrices, descending
            spectrum=self.spectrum / ns if self.spectrum is not None else np.zeros(0),
            # the same for the noisy groups' own kernel PCA, whose leading components an
            # explicit rank keeps (empty when only the auto rank was asked)
            rank_spectrum=(self.rank_spectrum / ng if self.rank_spectrum is not None
                           else np.zeros(0)),
            # their spread over the groups: the 10 %, 50 % and 90 % quantiles, (3, n)
            spectrum_quantiles=quantiles(self.samples["spectrum"]),
            rank_spectrum_quantiles=quantiles(self.samples["rank_spectrum"]),
            # a bounded share of those spectra, to pool with other tiles' (pooled_quantiles)
            spectrum_pool=pool(self.samples["spectrum"], self.seen["spectrum"]),
            rank_spectrum_pool=pool(self.samples["rank_spectrum"], self.seen["rank_spectrum"]),
            # mean number of kernel components kept per group of the final stage, per rank
            effective_rank={rk: float(np.asarray(self.kept)[i]) / ng if self.final_groups
                            else 0.0 for i, rk in enumerate(rank_list)},
        )


#: the quantiles over the groups a run reports (``spectrum_quantiles``)
QUANTILES = (0.1, 0.5, 0.9)
#: sampled spectra a call keeps for pooling with other calls' (the tiles of an image)
POOL_ROWS = 512
#: sampled spectra of each kind a call holds at most (``ChannelStats.add_samples``)
SAMPLE_ROWS = 8192


def quantiles(samples: list) -> np.ndarray:
    """(3, n): the 10 %, 50 % and 90 % quantiles over the sampled groups' spectra."""
    if not samples:
        return np.zeros((3, 0))
    n = min(s.shape[1] for s in samples)
    return np.quantile(np.concatenate([s[:, :n] for s in samples]), QUANTILES, axis=0)


def pool(samples: list, seen: int) -> tuple[np.ndarray, float]:
    """Return a bounded pool of the sampled spectra and the weight of each row.

    ``(rows, weight)``: at most :data:`POOL_ROWS` of the sampled spectra, evenly spread,
    each standing for ``weight`` of the ``seen`` sampled, for :func:`pooled_quantiles`."""
    if not samples:
        return np.zeros((0, 0)), 0.0
    n = min(s.shape[1] for s in samples)
    rows = np.concatenate([s[:, :n] for s in samples])
    if len(rows) > POOL_ROWS:
        rows = rows[np.linspace(0, len(rows) - 1, POOL_ROWS).round().astype(np.int64)]
    return rows, max(seen, len(rows)) / max(len(rows), 1)


def pooled_quantiles(pools: Sequence[tuple]) -> np.ndarray:
    """Return the quantiles over the spectra of several calls' pools.

    (3, n): the quantiles :data:`QUANTILES` over the spectra of several calls' pools
    (``stats['spectrum_pool']``, each row weighted by its pool's weight): the spread over
    every group of an image cut into tiles.  Each quantile is the smallest value whose
    cumulative weight reaches it (no interpolation)."""
    pools = [(np.asarray(r, dtype=np.float64), float(w)) for r, w in pools if np.size(r)]
    if not pools:
        return np.zeros((3, 0))
    n = min(r.shape[1] for r, _ in pools)
    vals = np.concatenate([r[:, :n] for r, _ in pools])
    wts = np.concatenate([np.full(len(r), w) for r, w in pools])
    order = np.argsort(vals, axis=0, kind="stable")
    cum = np.cumsum(wts[order], axis=0)
    total = cum[-1]
    idx = np.stack([np.minimum((cum < q * total).sum(axis=0), len(vals) - 1) for q in QUANTILES])
    return np.take_along_axis(np.sort(vals, axis=0), idx, axis=0)


def run_chunk_parts(st: ChannelStats, n: int, compute: Callable, add: Callable) -> dict:
    """Run a chunk's parts at once on the threads, adding their results in order.

    A chunk's ``n`` parts at once on the threads
    (:func:`~kpca_denoise.core.parallel.run_in_order`): ``compute(j, mine)`` fills the
    part's fresh stats ``mine`` and returns its estimates, ``add(j, estimates)`` adds
    them into the overlap sums on the calling thread in the parts' order (its time
    counts as the reassembly), and each part's counts are merged into ``st`` in the
    same order.  Returns the chunk's wall time shared out between the steps as the
    threads spent it (the stage times, ``st.seconds`` left to the caller)."""
    spent = dict.fromkeys(st.seconds, 0.0)  # the parts' step times, on their threads

    def part(j: int) -> tuple:
        mine = ChannelStats()
        return compute(j, mine), mine

    def merge(j: int, res: tuple) -> None:
        est, mine = res
        t = time.perf_counter()
        add(j, est)
        mine.seconds["reassembly"] += time.perf_counter() - t
        st.merge(mine)
        for k, v in mine.seconds.items():
            spent[k] += v

    t0 = time.perf_counter()
    run_in_order(n, part, merge)
    wall, busy = time.perf_counter() - t0, sum(spent.values())
    return {k: wall * v / busy if busy > 0 else 0.0 for k, v in spent.items()}
