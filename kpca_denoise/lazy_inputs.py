"""The command line's inputs read lazily (OME-Zarr images, TIFFs too large to hold): every
rank from one lazy pass, written band by band, reported as the inputs read whole are
(``docs/dask.md``, ``docs/large-images.md``)."""

from __future__ import annotations

import sys
import time

import numpy as np

from .dask_array import lazy_denoise
from .evaluation import noise_notes, rank_notes
from .io import InputError, write_lazy
from .signals import signals_held

__all__ = ["write_lazy_item"]


def write_lazy_item(it, targets, params, inputs, overwrite, outdir, bar, held):
    """Denoise a lazily read input with every rank and write its outputs by bands.

    Denoise an input read lazily (OME-Zarr, a large TIFF) with every rank from one lazy
    pass (:func:`~kpca_denoise.dask_array.lazy_denoise`) and write the outputs band by
    band (:func:`~kpca_denoise.io.write_lazy`); Ctrl-C stops the tiles and leaves no
    output of this input.  Once every band is written, signals are held in ``held`` (an
    ExitStack the caller closes once it has recorded the outputs), so that the outputs
    are renamed into place and recorded together.  Returns (ok, entry, rows)."""
    t0 = time.monotonic()
    if bar.enabled:
        size = int(np.prod(it.shape)) * it.dtype.itemsize
        size = f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"
        print(f"{it.name}: {size}, read lazily and denoised tile by tile into "
              f"{', '.join(t.name for t in targets.values())}", file=sys.stderr)
    run = None
    try:
        run = lazy_denoise(it.open_lazy(), params, progress=bar)
        write_lazy(it, {targets[k]: run.outputs[k] for k in run.keys}, inputs=inputs,
                   replace=overwrite, written=lambda: held.enter_context(signals_held()))
    except KeyboardInterrupt:
        if run is not None:
            run.cancel()  # the tiles still running here stop at their next check
        raise
    except (InputError, ValueError) as exc:
        msg = str(exc)
        named = msg.startswith((str(it.path), *(str(t) for t in targets.values())))
        print(f"error: {msg if named else f'{it.path}: {msg}'}", file=sys.stderr)
        return False, None, []
    except OSError as exc:
        where = exc.filename or next(iter(targets.values()))
        print(f"error: {where}: cannot write ({exc.strerror or exc})", file=sys.stderr)
        return False, None, []
    except Exception as exc:  # a chunk its codec cannot decode, a file cut short: this input
        print(f"error: {it.path}: cannot read or denoise it ({type(exc).__name__}: {exc}); "
              "a damaged chunk or page is the usual cause", file=sys.stderr)
        return False, None, []
    finally:
        if run is not None:
            run.close()
    seconds = time.monotonic() - t0
    measured = [s for s in run.noise_sigma if s is not None]
    sigma = float(np.median(measured)) if measured else None
    files = [str(t.relative_to(outdir)) if t.is_relative_to(outdir) else str(t)
             for t in targets.values()]
    entry = {"input": str(it.path), "read_lazily": True, "noise_sigma": sigma,
             "noise_estimated": params.noise_sigma is None, "seconds": seconds,
             "outputs": {str(k): {"file": f} for k, f in zip(targets, files)}, "files": files}
    pages = [{"noise_sigma": s, **st} for s, st in zip(run.noise_sigma, run.stats)]
    if it.is_stack:  # each page's own (None: no noise to remove, returned as it was)
        entry["stats"] = {"pages": pages}
    elif run.stats[0]:
        entry["stats"] = run.stats[0]
    if sigma is None:
        print(f"note: {it.name}: no noise to remove; written unchanged", file=sys.stderr)
    if run.sequence is not None:  # as cli's note for a stack read whole
        how = ("with its neighbouring pages" if run.sequence["decision"] == "sequence"
               else "page by page")
        print(f"note: {it.name}: denoised {how} (sequence {run.sequence['choice']}: "
              f"{run.sequence['reason']})", file=sys.stderr)
        entry["sequence"] = {k: v for k, v in run.stats[0]["sequence"].items()
                             if k not in ("page", "neighbours_used")}
    for note in noise_notes(it.name, run.stats) + rank_notes(it.name, run.stats):
        print(f"note: {note}", file=sys.stderr)
    shown = "vst" if params.noise_model == "poisson-gaussian" else ("-" if sigma is None else sigma)
    rows = [(str(it.rel or it.name), "auto" if k is None else str(k), shown, None, None, None,
             seconds, t) for k, t in targets.items()]
    return True, entry, rows
