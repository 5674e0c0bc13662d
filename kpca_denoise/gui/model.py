"""The window's state, with no Qt: images, results keyed by their parameters, selection.

Following the model/view split of ``../shared/STYLE.md`` (napari's layers
list and viewer model), everything the window *knows* lives here and the
widgets only draw it:

* :class:`ImageEntry` -- one loaded file plus its clean reference;
* :class:`ResultCache` -- per (image, parameters) a :class:`FitRecord` holding
  any number of ranks; a result of a *set fit* (one model fitted on several
  images of one kind) is keyed by parameters that name the set, so it lives
  beside the image's own result, never instead of it;
* :class:`Session` -- the list of entries, the cache, which image and rank are
  selected, whether the set fit or the image's own fit is shown, and the
  questions the window asks it: what is shown for an image, what an export
  would write, what a run has to compute.

Nothing here computes a result or touches a file.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io import LoadedItem, display_oriented
from ..mosaic import mosaic_of
from ..params import DenoiseParams
from ..pipeline import sample_mosaic
from .jobs import ItemOutcome, JobItem, params_key, rank_label, rank_sort_key

__all__ = [
    "ImageEntry",
    "display_array",
    "raw_view",
    "residual_map",
    "residual_view",
    "ResidualMap",
    "SplitComposite",
    "LARGE_VIEW_PIXELS",
    "sampled",
    "patch_mosaic",
    "pasted",
    "group_spectrum",
    "entries_for",
    "RankRecord",
    "FitRecord",
    "ResultCache",
    "Shown",
    "Session",
    "fit_kind",
    "sequence_kind",
    "param_differences",
    "describe_params",
    "DEFAULT_RANKS",
    "default_ranks",
    "auto_neighbours",
    "converged_with",
]

_ids = itertools.count(1)


#: patch sets show at most this many samples (a 12 x 12 grid stays readable)
MOSAIC_MAX_SAMPLES = 144


def patch_mosaic(a: np.ndarray, max_samples: int = MOSAIC_MAX_SAMPLES, gap: int = 1,
                 fill: float | None = None) -> np.ndarray:
    """(N, h, w) samples -> one (H, W) float image of the first ``max_samples``.

    Samples are laid out row by row on a near-square grid separated by ``gap``
    pixels of ``fill`` (default: the array's minimum, so gaps read as dark).
    """
    a = np.asarray(a)
    fill = float(np.min(a[:max_samples])) if fill is None else fill
    return sample_mosaic(a, gap, fill, max_samples)


def display_array(a: np.ndarray, is_patchset: bool) -> np.ndarray:
    """What to draw for an array: images as they are, patch sets as a mosaic.

    Colour images keep 3 channels; an alpha channel is dropped (the views
    compare pixel values, not compositing).
    """
    a = np.asarray(a)
    if is_patchset:
        return patch_mosaic(a)
    if a.ndim == 3 and a.shape[2] in (2, 4):
        a = a[..., :-1]
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[..., 0]
    return a


def residual_map(e: "ImageEntry", noisy: np.ndarray, out: np.ndarray) -> np.ndarray:
    """What a residual view draws: noisy - output as one float32 map (colour: the mean over
    R, G, B; alpha untouched), built channel by channel so a 12 Mpx photo needs no float64
    copies of its planes."""
    noisy, out = np.asarray(noisy), np.asarray(out)
    if noisy.ndim == 3 and not e.is_patchset:
        chans = range(3 if noisy.shape[2] >= 3 else 1)
        r = np.zeros(noisy.shape[:2], np.float32)
        for c in chans:
            r += noisy[..., c].astype(np.float32)
            r -= out[..., c].astype(np.float32)
        r /= len(chans)
    else:
        r = noisy.astype(np.float32) - out.astype(np.float32)
    return e.display(r, develop=False)


def raw_view(mosaic: np.ndarray, raw: dict) -> np.ndarray:
    """A camera mosaic developed for display, quickly and in place: each pixel coloured by
    its 2x2 cell of the colour filter (``raw["pattern"]`` or ``raw["cfa"]``), the cell's
    black levels subtracted, scaled to the white level and the as-shot white balance, an
    sRGB-like gamma; (H, W, 3) uint8 of the mosaic's size, so every view, the preview's
    region and the cursor keep the mosaic's coordinates (no colour matrix, no demosaicing:
    LibRaw develops the exports)."""
    m = np.asarray(mosaic, dtype=np.float32)
    h, w = m.shape[:2]
    he, we = h - h % 2, w - w % 2
    if he < 2 or we < 2:
        return np.zeros((h, w, 3), np.uint8)
    colours = raw.get("cfa") or "RGGB"
    black = list(raw.get("black") or [0.0] * 4) + [0.0] * 4
    white = float(raw.get("white") or m.max() or 1.0)
    wb = list(raw.get("wb") or [1.0, 1.0, 1.0, 1.0]) + [1.0] * 4
    gain = {"R": wb[0] / (wb[1] or 1.0), "G": 1.0, "B": wb[2] / (wb[1] or 1.0)}
    sums = {c: np.zeros((he // 2, we // 2), np.float32) for c in "RGB"}
    counts = {c: 0 for c in "RGB"}
    for k, (dy, dx) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        c = colours[k] if k < len(colours) and colours[k] in "RGB" else "G"
        plane = (m[dy:he:2, dx:we:2] - black[k]) / max(white - black[k], 1.0)
        sums[c] += plane * gain[c]
        counts[c] += 1
    rgb = np.stack([sums[c] / max(counts[c], 1) for c in "RGB"], axis=-1)
    rgb = np.clip(rgb, 0.0, 1.0) ** (1 / 2.2)
    cells = (rgb * 255 + 0.5).astype(np.uint8)
    out = np.zeros((h, w, 3), np.uint8)
    out[:he, :we] = np.repeat(np.repeat(cells, 2, axis=0), 2, axis=1)
    out[he:, :we] = out[he - 1:he, :we]  # an odd last row or column: its neighbour's cell
    out[:, we:] = out[:, we - 1:we]
    return out


class ResidualMap:
    """:func:`residual_map` computed only for the part a view asks for (``rmap[rows,
    cols]``, ``np.asarray(rmap)`` for all of it): a 12 Mpx photo's residual views draw a
    screen-sized sample of it, not five full float32 maps made when a result arrives."""

    def __init__(self, e: "ImageEntry", noisy: np.ndarray, out: np.ndarray) -> None:
        self._noisy, self._out = e.display(noisy, develop=False), e.display(out, develop=False)
        self._colour = self._noisy.ndim == 3
        self.shape = self._noisy.shape[:2]
        self.ndim, self.dtype = 2, np.dtype(np.float32)

    def __getitem__(self, key) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        n, o = np.asarray(self._noisy[key]), np.asarray(self._out[key])
        if not self._colour:
            return n.astype(np.float32) - o.astype(np.float32)
        k = 3 if n.shape[-1] >= 3 else 1
        r = np.zeros(n.shape[:-1], np.float32)
        for c in range(k):
            r += n[..., c].astype(np.float32)
            r -= o[..., c].astype(np.float32)
        return r / np.float32(k)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = self[:, :]
        return a if dtype is None else a.astype(dtype)


class SplitComposite:
    """``before`` left of column ``x``, ``after`` from it on, made only for the part a
    view asks for (``comp[rows, cols]``; ``np.asarray(comp)`` for all of it): moving the
    split over a 12 Mpx photo copies no whole image."""

    def __init__(self, before: np.ndarray, after: np.ndarray, x: int) -> None:
        self.before, self.after, self.x = before, after, int(x)
        self.shape, self.ndim, self.dtype = after.shape, after.ndim, after.dtype

    def __getitem__(self, key) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        cols = key[1] if len(key) > 1 else slice(None)
        if isinstance(cols, (int, np.integer)):
            return (self.before if cols < self.x else self.after)[key]
        out = np.array(self.after[key], copy=True)
        left = np.arange(self.shape[1])[cols] < self.x
        if left.any():
            out[:, left] = np.asarray(self.before[key])[:, left]
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = self[:, :]
        return a if dtype is None else a.astype(dtype)


def residual_view(e: "ImageEntry", noisy: np.ndarray, out: np.ndarray):
    """What a residual view is given: a :class:`ResidualMap` of a large image (computed for
    the part drawn), else the whole :func:`residual_map`."""
    if e.is_patchset or np.asarray(noisy).shape[0] * np.asarray(noisy).shape[1] < LARGE_VIEW_PIXELS:
        return residual_map(e, noisy, out)
    return ResidualMap(e, noisy, out)


#: an image of at least this many pixels is drawn from a screen-sized sample of its view
#: (:class:`ResidualMap`, ``views.ImagePanel``), not whole, and compared on a sample
LARGE_VIEW_PIXELS = 2 ** 21


def sampled(a: np.ndarray, most: int = 2 ** 20) -> np.ndarray:
    """Every s-th row and column of ``a`` (H, W[, C]), ``s`` the least that leaves at most
    ``most`` pixels: what a statistic of a large image's pixels is taken on."""
    h, w = a.shape[:2]
    s = max(1, int(np.ceil(np.sqrt(h * w / most))))
    return a[::s, ::s]


def pasted(base: np.ndarray, box: tuple, part: np.ndarray) -> np.ndarray:
    """A copy of ``base`` with ``part`` in ``box`` (y0, y1, x0, x1): a preview in place."""
    out = np.array(base, copy=True)
    y0, y1, x0, x1 = box
    out[y0:y1, x0:x1] = part
    return out


def group_spectrum(rec: "FitRecord | None", preview=None
                   ) -> tuple[np.ndarray | None, str, np.ndarray | None]:
    """The grouped method's spectrum to show for a result (or a preview): the mean
    spectrum of its noisy groups' own kernel PCA, whose leading components an explicit
    rank keeps whole (``stats['grouped'][..]['rank_spectrum']``), else the final stage's
    groups' (only 'auto' was asked), with its spread over the groups (the 10/50/90 %
    quantiles, (3, n), or None); ``(None, '', None)`` for another method."""
    if rec is not None:
        if rec.params.method != "grouped":
            return None, "", None
        stats = rec.resolved.get("grouped") or {}
        final = rec.eigenvalues if rec.eigenvalues is not None else np.zeros(0)
    elif preview is not None and preview.group_spectra:
        stats = preview.group_spectra[0]
        final = np.asarray(stats.get("spectrum", ()), dtype=np.float64)
    else:
        return None, "", None
    own = np.asarray(stats.get("rank_spectrum", ()), dtype=np.float64)

    def band(key: str, n: int) -> np.ndarray | None:
        q = np.asarray(stats.get(key, np.zeros((3, 0))), dtype=np.float64)
        return q if q.ndim == 2 and q.shape[0] == 3 and q.shape[1] == n and n else None

    if own.size:
        return (own, "groups' own kernel PCA",
                band("rank_spectrum_quantiles", own.size))
    if np.size(final):
        final = np.asarray(final, dtype=np.float64)
        return (final, "final groups (auto: the shrinkage)",
                band("spectrum_quantiles", final.size))
    return None, "", None


@dataclass(eq=False)
class ImageEntry:
    """One loaded file and the GUI state attached to it."""

    item: LoadedItem
    reference: np.ndarray | None = None
    reference_path: Path | None = None
    key: str = field(default="")
    #: a page of a multi-page file: the file as read and the page's index
    stack: LoadedItem | None = None
    page: int | None = None

    def __post_init__(self) -> None:
        # the key names the image in the result cache; a counter keeps two
        # loads of the same path (after it changed on disk) apart
        if not self.key:
            page = f"#{self.page}" if self.page is not None else ""
            self.key = f"{next(_ids)}:{self.item.path.resolve()}{page}"

    @property
    def name(self) -> str:
        if self.stack is not None and self.page is not None:
            return self.stack.page_names()[self.page]
        return self.item.name

    @property
    def path(self) -> Path:
        return self.item.path

    @property
    def array(self) -> np.ndarray:
        return self.item.array

    @property
    def is_patchset(self) -> bool:
        return self.item.is_patchset

    @property
    def pipeline_input(self):
        """What a run denoises: the array, or a camera RAW file's mosaic with its pattern
        and levels (:func:`kpca_denoise.mosaic.mosaic_of`, as the command line reads it)."""
        return mosaic_of(self.item, self.array) if self.raw is not None else self.array

    @property
    def raw(self) -> dict | None:
        """A camera RAW file's metadata (its mosaic is the array), else None."""
        return self.item.meta.get("raw")

    def display(self, a: np.ndarray, develop: bool = True) -> np.ndarray:
        """What the views draw for an array of this image: a patch set as a mosaic, a photo
        upright under its EXIF orientation (exports keep the raw array; the tag is carried),
        a camera mosaic developed (:func:`raw_view`; ``develop`` False: as it is, for the
        residuals)."""
        if develop and self.raw is not None and np.ndim(a) == 2:
            a = raw_view(a, self.raw)
        d = display_array(a, self.is_patchset)
        return d if self.is_patchset else display_oriented(d, self.item.meta.get("orientation"))

    def describe(self) -> str:
        a = self.array
        if self.is_patchset:
            return f"{a.shape[0]} samples of {a.shape[1]}×{a.shape[2]}, {a.dtype}, {self.item.format}"
        chans = "" if a.ndim == 2 else f"×{a.shape[2]}"
        return f"{a.shape[1]}×{a.shape[0]}{chans}, {a.dtype}, {self.item.format}"


def entries_for(item: LoadedItem) -> list[ImageEntry]:
    """The set's images from one file: the item itself, or one per page of a stack."""
    if not item.is_stack:
        return [ImageEntry(item)]
    out = []
    for k, page in enumerate(item.pages):
        one = LoadedItem(path=item.path, array=page, kind="image", format=item.format,
                         meta=item.meta, rel=item.rel)
        out.append(ImageEntry(one, stack=item, page=k))
    return out


@dataclass
class RankRecord:
    output: np.ndarray
    metrics: dict
    residual_std: float
    fit_ranks: tuple = ()  # the ranks of a run that reproduces ``output`` (the sidecar's)


@dataclass
class FitRecord:
    """Everything cached for one (image, parameters) pair, any number of ranks."""

    noisy: np.ndarray
    noise_sigma: float
    noise_estimated: bool
    noisy_metrics: dict
    eigenvalues: np.ndarray | None
    total_variance: float | None
    resolved: dict
    timings: dict
    params: DenoiseParams
    ranks: dict = field(default_factory=dict)  # rank -> RankRecord
    fit_set: tuple = ()  # keys of the images fitted together with this one; () = alone

    def effective_rank(self, rank) -> float | None:
        """Mean kept components per group for a grouped result (``stats["effective_rank"]``)."""
        eff = (self.resolved.get("grouped") or {}).get("effective_rank")
        if isinstance(eff, dict):
            v = eff.get(rank, eff.get(rank_label(rank), eff.get(str(rank))))
            return float(v) if v is not None else None
        return None


class ResultCache:
    """Results per (image key, parameters key), each holding results per rank."""

    def __init__(self) -> None:
        self._fits: dict[tuple[str, str], FitRecord] = {}

    def get(self, key: str, pkey: str) -> FitRecord | None:
        return self._fits.get((key, pkey))

    def missing(self, key: str, pkey: str, ranks) -> tuple:
        rec = self.get(key, pkey)
        have = rec.ranks if rec is not None else {}
        return tuple(r for r in ranks if r not in have)

    def add(self, out: ItemOutcome) -> FitRecord:
        rec = self.get(out.key, out.params_key)
        if rec is None:
            rec = FitRecord(noisy=out.noisy, noise_sigma=out.noise_sigma,
                            noise_estimated=out.noise_estimated, noisy_metrics=out.noisy_metrics,
                            eigenvalues=out.eigenvalues, total_variance=out.total_variance,
                            resolved=out.resolved, timings=out.timings, params=out.params,
                            fit_set=out.fit_set)
            self._fits[(out.key, out.params_key)] = rec
        elif out.eigenvalues is not None and (
                rec.eigenvalues is None or out.eigenvalues.size > rec.eigenvalues.size):
            # a later run for a larger rank knows more of the spectrum
            rec.eigenvalues = out.eigenvalues
            rec.total_variance = out.total_variance
            # ... but 'auto' was resolved by the run that computed it
            keep = {k: rec.resolved[k] for k in ("auto_rank",) if k in rec.resolved}
            rec.resolved = {**out.resolved, **keep}
        if "auto_rank" in out.resolved:  # the run that computed 'auto' knows what it chose
            rec.resolved["auto_rank"] = out.resolved["auto_rank"]
        for r, arr in out.outputs.items():
            rec.ranks[r] = RankRecord(arr, out.metrics.get(r, {}), out.residual_std.get(r, float("nan")),
                                      out.fit_ranks.get(r, ()))
        return rec

    def records_for(self, key: str) -> list[FitRecord]:
        return [rec for (k, _), rec in self._fits.items() if k == key]

    def drop_image(self, key: str) -> None:
        for k in [k for k in self._fits if k[0] == key]:
            del self._fits[k]

    def __len__(self) -> int:
        return len(self._fits)


def fit_kind(e: ImageEntry) -> tuple:
    """What may share one model in a set fit: patch sets of one sample size, images of one
    channel count (the pipeline fits one model per such kind)."""
    a = e.array
    if e.is_patchset:
        return ("patch set", a.shape[1], a.shape[2])
    return ("image", 1 if a.ndim == 2 else a.shape[2])


def sequence_kind(e: ImageEntry) -> tuple:
    """What separate images need in common to be denoised as one sequence: one size,
    channel count and type (the pipeline's runs of one sequence, ``sequence.py``)."""
    return tuple(e.array.shape), e.array.dtype.str


_IGNORED = ("ranks",)


def param_differences(shown: DenoiseParams, panel: DenoiseParams) -> list[str]:
    """``name: shown → panel`` for every parameter (ranks aside) that differs."""
    a, b = shown.to_dict(), panel.to_dict()
    out = []
    for k in a:
        if k in _IGNORED or a.get(k) == b.get(k):
            continue
        out.append(f"{k.replace('_', ' ')}: {_fmt(a.get(k))} → {_fmt(b.get(k))}")
    return out


def _fmt(v) -> str:
    return "auto" if v is None else str(v)


@dataclass
class Shown:
    """What the views show for an image: a record, its cache key, and whether it was
    computed with the panel's parameters (``matches``) or is the image's latest result
    under other ones."""

    record: FitRecord | None
    pkey: str | None
    matches: bool = True

    @property
    def ranks(self) -> tuple:
        return tuple(sorted(self.record.ranks, key=rank_sort_key)) if self.record else ()


class Session:
    """Images, results and selection of one window (no widgets; see the module doc)."""

    def __init__(self) -> None:
        self.entries: list[ImageEntry] = []
        self.cache = ResultCache()
        self.selected_rank = None
        #: show (and export) the set fit's results where an image has one
        self.show_set_fit = False
        # (image key, own params key) -> keys of the images it was fitted with in a set fit
        self._set_fits: dict[tuple[str, str], tuple] = {}
        # image key -> params key of its latest result (shown when the panel has no result)
        self._latest: dict[str, str] = {}
        # image key -> its latest preview (a region at every rank, compute.PreviewOutcome)
        self.previews: dict = {}

    # -- images ------------------------------------------------------------------
    def add(self, e: ImageEntry) -> None:
        self.entries.append(e)

    def remove(self, row: int) -> ImageEntry:
        e = self.entries.pop(row)
        self.cache.drop_image(e.key)
        for k in [k for k in self._set_fits if k[0] == e.key]:
            del self._set_fits[k]
        self._latest.pop(e.key, None)
        self.previews.pop(e.key, None)
        return e

    def add_preview(self, pv) -> None:
        self.previews[pv.key] = pv

    def preview(self, e: ImageEntry | None, params: DenoiseParams | None):
        """The image's preview made with ``params`` (any ranks), or None."""
        pv = self.previews.get(e.key) if e is not None else None
        if pv is None or params is None or pv.params_key != params_key(params):
            return None
        return pv

    def row_of(self, key: str) -> int:
        """The row of the image with this key, -1 when it is not in the set (any more)."""
        return next((i for i, e in enumerate(self.entries) if e.key == key), -1)

    def has_results(self, e: ImageEntry) -> bool:
        return any(rec.ranks for rec in self.cache.records_for(e.key))

    # -- results -----------------------------------------------------------------
    def set_group(self, e: ImageEntry, params: DenoiseParams) -> tuple:
        """The images ``e`` was set-fitted with under ``params``; () if none."""
        return self._set_fits.get((e.key, params_key(params)), ())

    def sequence_group(self, e: ImageEntry, params: DenoiseParams) -> tuple:
        """The images denoised with ``e`` as one sequence, whose groups may take patches
        from neighbouring pages (the grouped method, ``params.sequence``), in load order:
        a stack's page, under 'auto' or 'yes', with every loaded page of its stack; a
        separate image, under 'yes' only, with every loaded separate image of its
        :func:`sequence_kind` (the command line's rule: separate files are one sequence
        only with ``--sequence yes``, docs/stacks.md); () for an image denoised alone."""
        if params.method != "grouped" or params.sequence == "no" or e.is_patchset:
            return ()
        if e.stack is not None:
            group = tuple(x.key for x in self.entries if x.stack is e.stack)
        elif params.sequence == "yes":
            kind = sequence_kind(e)
            group = tuple(x.key for x in self.entries if x.stack is None and not x.is_patchset
                          and sequence_kind(x) == kind)
        else:
            return ()
        return group if len(group) > 1 else ()

    def result_key(self, e: ImageEntry, params: DenoiseParams, set_fit: bool | None = None) -> str:
        """Cache key of the result shown for ``e``: its sequence's (:meth:`sequence_group`:
        the set of images is part of the key, so changing it computes again), its set fit's
        (when shown and present) or its own."""
        set_fit = self.show_set_fit if set_fit is None else set_fit
        group = self.sequence_group(e, params) or (self.set_group(e, params) if set_fit else ())
        return params_key(params, group)

    def record(self, e: ImageEntry, params: DenoiseParams, set_fit: bool | None = None) -> FitRecord | None:
        return self.cache.get(e.key, self.result_key(e, params, set_fit))

    def shown(self, e: ImageEntry | None, params: DenoiseParams | None) -> Shown:
        """The result the views draw for ``e``: for the panel's parameters if there is one,
        else the image's latest result (``matches=False``: the window marks it)."""
        if e is None:
            return Shown(None, None)
        if params is not None:
            pkey = self.result_key(e, params)
            rec = self.cache.get(e.key, pkey)
            if rec is not None:
                return Shown(rec, pkey, True)
        pkey = self._latest.get(e.key)
        rec = self.cache.get(e.key, pkey) if pkey else None
        if rec is not None:
            return Shown(rec, pkey, False)
        return Shown(None, None)

    def add_outcome(self, out: ItemOutcome) -> FitRecord:
        rec = self.cache.add(out)
        if len(out.fit_set) > 1 and out.params.method == "global":  # a stack's pages: its sequence
            self._set_fits[(out.key, params_key(out.params))] = out.fit_set
        self._latest[out.key] = out.params_key
        return rec

    def export_plan(self, entries: list[ImageEntry], params: DenoiseParams, rank) -> tuple[list, list]:
        """``(ready, missing)``: ``(entry, record)`` pairs whose shown result has ``rank``,
        and the entries that would need a run first."""
        ready, missing = [], []
        for e in self.with_pages(entries):
            rec = self.record(e, params)
            if rec is not None and rank in rec.ranks:
                ready.append((e, rec))
            else:
                missing.append(e)
        return ready, missing

    def with_pages(self, entries: list[ImageEntry]) -> list[ImageEntry]:
        """``entries`` plus every other page of the stacks among them (a stack is written as
        one file, all of its pages), in set order."""
        stacks = {id(e.stack) for e in entries if e.stack is not None}
        wanted = {e.key for e in entries}
        return [e for e in self.entries if e.key in wanted or (e.stack is not None and id(e.stack) in stacks)]

    # -- runs --------------------------------------------------------------------
    def kind_groups(self, entries: list[ImageEntry]) -> list[list[ImageEntry]]:
        """``entries`` split by :func:`fit_kind`, in order of first appearance."""
        groups: dict[tuple, list[ImageEntry]] = {}
        for e in entries:
            groups.setdefault(fit_kind(e), []).append(e)
        return list(groups.values())

    def plan(self, entries: list[ImageEntry], params: DenoiseParams, ranks=None,
             set_fit: bool = False) -> tuple[list[JobItem], list[tuple]]:
        """Job items for the ranks not cached yet, and the groups of them fitted together.

        ``set_fit`` (method 'global'): one kernel PCA per kind of image among
        ``entries`` (:func:`fit_kind`), as ``kpca-denoise denoise FOLDER`` fits
        one; an image alone of its kind is fitted alone.  The pages of a stack, and the
        separate images of one size under sequence 'yes', are denoised together as a
        sequence (:meth:`sequence_group`).  Otherwise each image
        is fitted on its own.  A rank added later to a shown set fit comes from
        the same set again (its model is reused by the compute process).
        """
        ranks = tuple(params.ranks) if ranks is None else tuple(ranks)
        loaded = {x.key: x for x in self.entries}
        if set_fit and params.method == "global":
            groups = [g for g in self.kind_groups(entries)]
        else:
            groups = []
            for e in entries:
                g = self.sequence_group(e, params) or (
                    self.set_group(e, params) if self.show_set_fit else ())
                if len(g) > 1 and all(k in loaded for k in g):
                    groups.append([loaded[k] for k in g])
                else:
                    groups.append([e])
        items: list[JobItem] = []
        sets: list[tuple] = []
        planned: set[str] = set()
        for members in groups:
            members = [m for m in members if m.key not in planned]
            if not members:
                continue
            planned.update(m.key for m in members)
            together = tuple(m.key for m in members) if len(members) > 1 else ()
            pkey = params_key(params, together)
            # a member the set's earlier run left without a result failed there:
            # it trains the model again, but does not make every rank run again
            done = [m for m in members if self.cache.get(m.key, pkey) is not None] or members
            missing = {r for m in done for r in self.cache.missing(m.key, pkey, ranks)}
            if not missing:
                continue
            todo = tuple(r for r in ranks if r in missing)
            first = len(items)
            for m in members:  # a set's members all train the model, computed or not
                items.append(JobItem(key=m.key, name=m.name, array=m.pipeline_input, is_patchset=m.is_patchset,
                                     ranks=todo, reference=m.reference))
            if together:
                sets.append(tuple(range(first, len(items))))
        return items, sets


def describe_params(p: DenoiseParams) -> str:
    """The parameters a run would use, one ``name = value`` per line (for questions and tooltips)."""
    d = p.to_dict()
    d["ranks"] = ", ".join(rank_label(r) for r in p.ranks)
    return "\n".join(f"{k.replace('_', ' ')} = {_fmt(v)}" for k, v in d.items() if k != "grouped" or v)


#: rank sets worth comparing: grouped -- a rank keeps that many of each group's kernel
#: components whole, so 1, 2, 4, 8 go from smooth to noisy, beside 'auto', the
#: shrinkage, the best of them (docs/method.md#ranks);
#: global -- 4, 8, 'auto' (16 for images), 32 change it by >= 0.3 dB
#: (``benchmarks/results/ranks.txt``)
DEFAULT_RANKS = {
    "grouped": (1, 2, 4, 8, None),
    "global": (4, 8, None, 32),
}
#: patch sets: the automatic rank (from the noise level), then its neighbours once it is known
PATCH_SET_RANKS = (None,)


def default_ranks(method: str, is_patchset: bool = False) -> tuple:
    """The ranks the panel proposes for ``method`` and this kind of input."""
    return PATCH_SET_RANKS if is_patchset else DEFAULT_RANKS.get(method, DEFAULT_RANKS["grouped"])


def auto_neighbours(auto_rank: int, n_samples: int) -> tuple:
    """Ranks to compare around a patch set's automatic rank: half and double it (within
    the n_samples - 1 components a set of n samples has), and 'auto' itself."""
    lo = max(1, auto_rank // 2)
    hi = min(max(2 * auto_rank, auto_rank + 1), max(n_samples - 1, 1))
    return tuple(sorted({lo, hi} - {auto_rank})) + (None,)


def converged_with(prev: RankRecord | None, cur: RankRecord, sigma: float | None,
                   threshold_db: float = 0.3) -> str:
    """"≈ previous rank" text when ``cur`` hardly differs from the rank before it: PSNR within
    ``threshold_db`` (with a reference), else an RMS difference under a tenth of the noise."""
    if prev is None:
        return ""
    a, b = prev.metrics.get("psnr"), cur.metrics.get("psnr")
    if a is not None and b is not None and np.isfinite(a) and np.isfinite(b):
        return f"(Δ {b - a:+.2f} dB)" if abs(b - a) < threshold_db else ""
    if sigma and np.isfinite(sigma) and prev.output.shape == cur.output.shape:
        # on a sample of at most a quarter megapixel: the same verdict, not a second per rank of a
        # 12 Mpx photo on the window's thread
        d = (sampled(np.asarray(cur.output), 2 ** 18).astype(np.float32)
             - sampled(np.asarray(prev.output), 2 ** 18))
        rms = float(np.sqrt(np.mean(np.square(d, dtype=np.float64))))
        return f"(RMS Δ {rms:.2g})" if rms < 0.1 * sigma else ""
    return ""
