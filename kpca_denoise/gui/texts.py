"""The words the window shows, built with no Qt: lines under the views, log lines, messages.

Every function here takes plain values (records of the model, numbers,
parameters) and returns a string, so each text can be tested without a
widget.  The window decides where a text goes (a view's caption, the log,
the status bar, the banner).
"""

from __future__ import annotations

import math

import numpy as np

from ..params import DenoiseParams
from ..params import parse_ranks as params_parse_ranks
from ..pipeline import noise_model_text
from .jobs import ItemOutcome, rank_label, rank_sort_key
from .model import FitRecord, ImageEntry, converged_with, param_differences

__all__ = [
    "format_metrics",
    "format_value",
    "region_stats",
    "parse_ranks",
    "format_ranks",
    "rank_metrics_text",
    "shared_model_text",
    "rank_title",
    "input_title",
    "info_html",
    "noise_text",
    "empty_spectrum_text",
    "waiting_spectrum_text",
    "status_text",
    "QUEUE_TEXTS",
    "mismatch_html",
    "hover_text",
    "split_hover_text",
    "outcome_error_text",
    "outcome_log_lines",
    "preview_sequence_text",
    "separate_images_alone_text",
    "run_started_text",
    "run_end_texts",
    "load_errors_text",
    "skipped_log_text",
    "nothing_loaded_text",
    "loaded_status_text",
]


# -- numbers and ranks ---------------------------------------------------------------


def format_metrics(m: dict | None) -> str:
    """One line under a view: PSNR/SSIM, or the remaining-noise estimate."""
    if not m:
        return ""
    if "error" in m:
        return f"⚠ {m['error']}"
    if "psnr" in m:
        p = m["psnr"]
        ptxt = "∞" if not np.isfinite(p) else f"{p:.2f}"
        return f"PSNR {ptxt} dB · SSIM {m['ssim']:.3f}"
    if "remaining_noise" in m:
        return f"remaining noise σ ≈ {m['remaining_noise']:.2f}"
    if "noise_sigma" in m:
        return f"noise σ ≈ {m['noise_sigma']:.2f}"
    if "noise_model" in m:
        return noise_model_text(m["noise_model"])
    return ""


def format_value(v) -> str:
    """A pixel value in the source's units: integers as integers (16-bit stays 16-bit)."""
    v = np.asarray(v)
    if v.ndim:
        return "(" + ", ".join(format_value(x) for x in v) + ")"
    if np.issubdtype(v.dtype, np.integer):
        return str(int(v))
    f = float(v)
    return str(int(f)) if f.is_integer() else f"{f:.4g}"


def region_stats(a: np.ndarray | None, x0: int, y0: int, x1: int, y1: int) -> str:
    """``mean ± std`` of ``a`` (row, column) inside columns x0..x1 and rows y0..y1."""
    if a is None:
        return ""
    h, w = a.shape[:2]
    x0, x1 = max(0, min(x0, w)), max(0, min(x1, w))
    y0, y1 = max(0, min(y0, h)), max(0, min(y1, h))
    if x1 <= x0 or y1 <= y0:
        return "ROI outside the image"
    r = np.asarray(a[y0:y1, x0:x1], dtype=np.float64)
    return f"ROI mean {r.mean():.4g} ± {r.std():.3g}"


def parse_ranks(text: str) -> tuple:
    """'4, 8 16' -> (4, 8, 16), read by :func:`kpca_denoise.params.parse_ranks` (as
    the command line and parameter files read ranks) and put in ascending order, 'auto'
    (no cap, None) last.  Raises ``ValueError`` naming the fix."""
    return tuple(sorted(params_parse_ranks(text), key=lambda r: math.inf if r is None else r))


def format_ranks(ranks) -> str:
    """The ranks as the form shows them: '4, 8, auto'."""
    return ", ".join("auto" if r is None else str(r) for r in ranks)


# -- the views -------------------------------------------------------------------------


def rank_metrics_text(rec: FitRecord, rank, prev, sigma) -> str:
    """The line under a rank: PSNR/SSIM or remaining noise, the effective rank (grouped:
    mean kept components per group) and whether it converged with the rank before it."""
    rr = rec.ranks[rank]
    parts = [format_metrics(rr.metrics)]
    eff = rec.effective_rank(rank)
    if eff is not None:
        # a rank above a group's n - 1 components keeps them all, noise too (the log's note);
        # a remark the view drops where it has no room (views.fit_lines)
        n = ((rec.resolved.get("grouped") or {}).get("params") or {}).get("group_size")
        whole = rank is not None and n and rank > n - 1
        parts.append(f"eff. rank {eff:.1f}" + (" (all\u00a0kept)" if whole else ""))
    conv = converged_with(prev, rr, sigma)
    if conv:
        parts.append(f"≈ previous rank {conv}")
    return " · ".join(p for p in parts if p)


def shared_model_text(resolved: dict, n_set: int) -> str:
    """Which images of a set fitted together share this image's model.

    The pipeline fits one model per kind of item (grey, colour, patch sets of
    one size), as the command line does for a folder.
    """
    n = len(resolved.get("items") or ())
    if n > 1:
        return f"one model for {n} of the {n_set} images" if n < n_set else f"one model for {n} images"
    return f"own model (only one of its kind in the set of {n_set})"


def rank_title(e: ImageEntry, rec: FitRecord | None, r) -> str:
    """A rank's title in the views and on the sheet; 'auto' is marked with what it
    stood for, or that the grouped method's shrinkage chose."""
    if r is not None:
        return f"rank {rank_label(r)}"
    auto = rec.resolved.get("auto_rank") if rec is not None else None
    return (f"auto = {auto}" if auto is not None else
            "auto (shrinkage)" if rec is not None and rec.params.method == "grouped"
            and not e.is_patchset else "rank auto")


def input_title(rec: FitRecord | None) -> str:
    """The input view's title: the input, or the noisy image a run denoised."""
    if rec is not None and rec.params.add_noise:
        return f"noisy (σ {rec.params.add_noise:g} added)"
    if rec is not None:
        return "input (noisy)"
    return "input"


def noise_text(sigma: float, estimated: bool, strength: float = 1.0,
               measured: dict | None = None) -> str:
    """The noise of a result in words: the level the denoiser was given (``sigma``,
    strength included), whether it was estimated, the measured noise's model (white or
    correlated: ``stats['noise']`` of the pipeline) and the strength applied."""
    level = sigma / strength if strength else sigma
    text = f"σ {'estimated ' if estimated else ''}{level:.3g}"
    if measured and measured.get("kind") == "correlated":
        text += (f" (correlated noise: {measured.get('correlation', 1):.2g}× the finest scale, "
                 f"neighbours {measured.get('neighbour', 0):.2f}{_nlf_text(measured)})")
    elif measured and estimated:
        text += f" (white{_nlf_text(measured)})"
    if strength != 1.0:
        text += f" × strength {strength:g} = {sigma:.3g} removed"
    return text


def _nlf_text(measured: dict) -> str:
    """The noise level against brightness (the noise-level function of ``stats['noise']``)
    in a few words: from the darkest level to the brightest, and whether it grows."""
    sig = [float(v) for v in measured.get("level_sigmas") or ()]
    lev = [float(v) for v in measured.get("levels") or ()]
    if len(sig) < 2 or len(lev) != len(sig):
        return ""
    grows = "; grows with the signal" if measured.get("signal_dependent") else ""
    span = max(abs(lev[0]), abs(lev[-1]), 1e-300)

    def num(v: float) -> str:  # a float's round-off near 0 (4.89e-15 for black) reads 0
        return f"{0.0 if abs(v) < 1e-9 * span else v:.3g}"

    return f"; brightness {num(lev[0])}→{num(lev[-1])}: σ {sig[0]:.3g}→{sig[-1]:.3g}{grows}"


def info_html(e: ImageEntry, rec: FitRecord | None) -> str:
    """The line over the views: the image, its noise, what 'auto' chose, the run's time."""
    parts = [f"<b>{e.name}</b>", e.describe()]
    poisson = rec.resolved.get("noise_model") if rec is not None else None
    if poisson:
        parts.append(f"Poisson-Gaussian {noise_model_text(poisson)}")
    elif rec is not None:
        parts.append(noise_text(rec.noise_sigma, rec.noise_estimated, rec.params.strength,
                                rec.resolved.get("noise")))
    if rec is not None:
        if rec.resolved.get("gamma"):
            parts.append(f"γ {rec.resolved['gamma']:.3g}")
        if rec.resolved.get("n_landmarks"):
            parts.append(f"Nyström, {rec.resolved['n_landmarks']} landmarks")
        if rec.resolved.get("page_sequence"):
            parts.append(sequence_text(rec.resolved["page_sequence"], e.stack is not None))
        elif rec.fit_set:
            parts.append(shared_model_text(rec.resolved, len(rec.fit_set)))
        parts.append(f"{rec.timings.get('total', 0):.1f} s")
    return " · ".join(parts)


def sequence_text(seq: dict, page: bool = True) -> str:
    """A stack page's (``page``) or a separate image's part of a sequence run
    (``stats['sequence']`` of the pipeline): the neighbouring pages (images, in load
    order) its groups took patches from, with their shares, or why they were denoised
    alone."""
    unit = "page" if page else "image"
    where = f"{unit} {seq.get('page', 0) + 1} of {seq.get('pages', 1)}" + (
        "" if page else " in load order")
    if seq.get("decision") != "sequence":
        return f"{where} denoised alone (sequence {seq.get('choice')}: {seq.get('reason')})"
    return f"{where} with its neighbours (patches from {unit}s {_shares(seq)})"


def _shares(seq: dict) -> str:
    """The share of a page's group members from each relative page, nearest first:
    "-1 25%, this 50%, +1 25%" (``neighbours_used``)."""
    used = sorted(((int(d), float(s)) for d, s in (seq.get("neighbours_used") or {}).items()),
                  key=lambda ds: ds[0])
    return ", ".join(f"{'this' if d == 0 else f'{d:+d}'} {100 * s:.0f}%" for d, s in used)


def preview_sequence_text(seq: dict, page: bool = True) -> str:
    """The log's word on the preview of a stack's page (``page``) or of a separate image
    that the run denoises in a sequence (``PreviewOutcome.sequence``): the pages (images)
    the preview denoised it with, as the run does, or why it shows it alone as the run
    denoises it."""
    unit = "page" if page else "image"
    where = f"{unit} {seq.get('page', 0) + 1} of {seq.get('pages', 1)}"
    if seq.get("decision") != "sequence" or "first" not in seq:
        return (f"the preview shows {where} alone, as the run denoises it (sequence "
                f"{seq.get('choice')}: {seq.get('reason')})")
    return (f"the preview denoised {where} with {unit}s {seq['first'] + 1}–{seq['last'] + 1}"
            f"{'' if page else ' in load order'} (the region on each), as the run does; "
            f"patches there from {unit}s {_shares(seq)}")


def separate_images_alone_text(n: int) -> str:
    """The log's word on a run under sequence 'auto' whose images have ``n`` loaded
    separate images of their size: each is denoised alone, as on the command line."""
    return (f"{n} separate images of one size are denoised each alone (set as sequence "
            "'auto', as the command line's --sequence auto); choose 'yes' to denoise them as "
            "one sequence in load order (a burst, time-lapse frames)")


def empty_spectrum_text(rec: FitRecord | None, is_patchset: bool) -> str:
    """What the spectrum plot says when the result shown has no eigenvalues."""
    if rec is not None and rec.params.method == "grouped" and not is_patchset:
        return "no group spectrum for this result\n(see the log)"
    if rec is not None:  # nothing fitted: no noise found, a flat image
        return "no spectrum: no model was fitted\nfor this result (see the log)"
    return "run to see the eigen-spectrum"


def waiting_spectrum_text(method: str) -> str:
    """What the spectrum plot says while a run of ``method`` starts."""
    if method == "global":
        return "waiting for the eigensolver…"
    return ("the grouped method fits one small kernel PCA per group;\nthe groups' mean spectrum "
            "appears as its final pass gathers it")


#: an image's line in the set while a run goes through it (the run's queue)
QUEUE_TEXTS = {"queued": "⏳ queued", "running": "▶ running…", "failed": "⚠ failed",
               "not run": "not run (cancelled)"}


def status_text(n_ranks: int, matches: bool) -> str:
    """A thumbnail's line: how many ranks the image has, marked when they are for other
    parameters than the panel's."""
    text = f"✓ {n_ranks} rank{'s' if n_ranks != 1 else ''}"
    return text if matches else f"{text} · other parameters"


def mismatch_html(shown: FitRecord, panel: DenoiseParams) -> str:
    """The marker over the views when the result shown was computed with other parameters,
    with the link that puts them in the panel."""
    diff = param_differences(shown.params, panel)
    what = "; ".join(diff[:3]) + (" …" if len(diff) > 3 else "") if diff else \
        ("the set fit is not shown" if shown.fit_set else "fitted in a set")
    return (f"⚠ Shown: results computed with other parameters than the panel's ({what}). "
            f"<a href='use'>Use these parameters</a>")


def hover_text(col: int, row: int, title: str, value, input_title: str | None = None,
               input_value=None) -> str:
    """The cursor readout of a grid view: position, the value there, and the input's value
    at the same pixel (when given)."""
    text = f"x {col}, y {row} · {title}: {format_value(value)}"
    if input_title is not None:
        text += f" · {input_title}: {format_value(input_value)}"
    return text


def split_hover_text(col: int, row: int, values) -> str:
    """The cursor readout of the split view: ``(label, value)`` of both sides."""
    return f"x {col}, y {row} · " + " · ".join(f"{lab}: {format_value(v)}" for lab, v in values)


# -- the log and the messages ------------------------------------------------------------


def outcome_error_text(out: ItemOutcome) -> str:
    """The message for an image whose run failed (the pipeline's message names it already)."""
    msg = out.error.removeprefix(f"{out.name}: ")
    return f"Denoising failed for {out.name}: {msg}"


def outcome_log_lines(out: ItemOutcome, is_patchset: bool, page: bool = True) -> list[str]:
    """The log lines for one image's results: ranks, method, timings, then the noise."""
    ranks = ", ".join(rank_label(r) for r in out.outputs)
    if is_patchset:
        # the pipeline fits one global kernel PCA for a patch set whatever the method says
        used = "global kernel PCA" + (" (patch sets always use it; 'grouped' applies to images)"
                                      if out.params.method != "global" else "")
        auto = out.resolved.get("auto_rank")
        ranks += f"; method {used}" + (f"; auto = {auto} components" if auto is not None else "")
    else:
        ranks += f"; method {out.params.method}"
    timing = ", ".join(f"{k} {v:.1f}s" for k, v in out.timings.items() if k not in ("total", "image"))
    if out.fit_set and out.params.method == "grouped" and not is_patchset and page:
        lines = [f"{out.name}: ranks {ranks}; {len(out.fit_set)} pages of its stack together, "
                 f"{out.seconds:.1f} s for the stack ({timing})"]
    elif out.fit_set and out.params.method == "grouped" and not is_patchset:
        lines = [f"{out.name}: ranks {ranks}; {len(out.fit_set)} images of one size together "
                 f"as a sequence in load order, {out.seconds:.1f} s for the sequence ({timing})"]
    elif out.fit_set:
        lines = [f"{out.name}: ranks {ranks}; {shared_model_text(out.resolved, len(out.fit_set))}, "
                 f"{out.seconds:.1f} s for the set ({timing})"]
    else:
        lines = [f"{out.name}: ranks {ranks} in {out.seconds:.1f} s ({timing})"]
    if out.resolved.get("noise_model"):
        lines.append(f"{out.name}: Poisson-Gaussian noise, {noise_model_text(out.resolved['noise_model'])} "
                     "(denoised at σ 1 after the variance-stabilising transform)")
    elif out.noise_estimated or out.params.strength != 1.0:
        lines.append(f"{out.name}: noise " + noise_text(out.noise_sigma, out.noise_estimated,
                                                        out.params.strength, out.resolved.get("noise")))
    if out.resolved.get("hint"):  # e.g. the noise grows with the signal
        lines.append(f"{out.name}: {out.resolved['hint']}")
    if out.resolved.get("page_sequence"):
        lines.append(f"{out.name}: {sequence_text(out.resolved['page_sequence'], page)}")
    if out.note:  # a clean image or a flat one: every rank is the input, and the user is told
        lines.append(out.note)
    lines.extend(out.resolved.get("rank_notes", ()))  # a rank above a group's components
    return lines


def run_started_text(n_items: int, method: str, ranks, set_sizes) -> str:
    """The log line of a run that starts: images, method, ranks, the sets fitted together."""
    ranks = sorted(ranks, key=rank_sort_key)
    what = "denoised as one sequence" if method == "grouped" else "fitted together"
    together = "".join(f", the set of {n} images {what}" for n in set_sizes)
    return (f"run started: {n_items} image{'s' if n_items != 1 else ''}, method {method}, "
            f"ranks {', '.join(rank_label(r) for r in ranks)}{together}")


def run_end_texts(status: str, seconds: float, done: int = 0, failed: int = 0,
                  message: str = "", kept: bool = True) -> tuple[str, str]:
    """``(progress line, message)`` for a run that ended ('done', 'cancelled' or 'failed');
    ``kept``: there are results from before it (a cancel keeps them)."""
    if status == "cancelled" and not kept:
        return (f"cancelled after {seconds:.1f} s",
                f"Run cancelled after {seconds:.1f} s; nothing had been computed yet.")
    if status == "cancelled":
        return (f"cancelled after {seconds:.1f} s — earlier results kept",
                f"Run cancelled after {seconds:.1f} s; earlier results are kept.")
    if status == "failed":
        return "failed", f"The run failed: {message}"
    msg = f"done: {done} image{'s' if done != 1 else ''} in {seconds:.1f} s"
    if failed:
        msg += f", {failed} failed"
    return msg, msg


def load_errors_text(errors: list[str], n_loaded: int) -> str:
    """The banner for inputs that could not be read: the only one, or how many and the first."""
    n = len(errors)
    if n == 1:
        return errors[0]
    if n_loaded:
        rest = f"the other {n_loaded} are" if n_loaded > 1 else "the other is"
        return f"{n} inputs could not be read; {rest} loaded. First: {errors[0]}"
    return f"None of the {n} inputs could be read. First: {errors[0]}"


def skipped_log_text(skipped, suffixes) -> str:
    """The log line for files of a type that is not read."""
    return (f"skipped {len(skipped)} file{'s' if len(skipped) != 1 else ''} of an unsupported "
            f"type ({', '.join(sorted(suffixes))} are read): "
            + ", ".join(str(f) for f in skipped))


def nothing_loaded_text(skipped) -> str:
    """The banner when every file given was of an unsupported type."""
    return (f"Nothing loaded: {len(skipped)} file(s) of an unsupported type were "
            f"skipped ({', '.join(f.name for f in skipped[:5])}); the log lists them.")


def loaded_status_text(n_new: int, n_skipped: int) -> str:
    """The status bar after loading: how many images, how many files skipped."""
    extra = f"; skipped {n_skipped} unsupported (see the log)" if n_skipped else ""
    return f"loaded {n_new} image{'s' if n_new != 1 else ''}{extra}"
