"""How long the window's preview of a region takes, against the full run, and that it is
the full run's pixels there.

A script, not a test.  The image is the cameraman tiled 2 x 2 (1024 x 1024, grey) or
the astronaut (512 x 512, colour) with Gaussian noise of σ 25 added (seed 0); each
profile of the grouped method (``DenoiseParams.grouped``) and the global method are
run in one process: the full run (``denoise_set``, every rank of the GUI's default set),
then the preview of a 256 x 256 region (:func:`kpca_denoise.gui.image_preview.run_preview`:
the whole image's decisions, then one tile), then the same region moved (the decisions
kept), and the largest pixel difference between the preview and the full result there;
then the decisions made alone (``prepare_preview``, what the window does when an image
is selected: "prep") and the first preview after them ("after").  "halo" is the tile's
halo at this noise level, "region px" the pixels of the centre region's tile, "groups"
the groups its preview computes (the driver's ``core``: only what the region depends
on) as a share of the full run's.  Times are wall and CPU seconds; the ratios are of
CPU time to the full run's, the steadier measure on a shared machine.

``--tiled N`` then runs each profile's full run in tiles of ``N`` px twice, with the
tiles' cores limiting the work (as the pipeline does) and without (every group of
each tile's region, as before the driver's ``core``), and the largest pixel difference.

Usage::

    python -m benchmarks.preview [--image camera2x2|astronaut|astronaut2x2] [--profiles default,fast]
                                 [--tiled 512]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import kpca_denoise.tiling as tiling
from benchmarks.common import results_header, sample_image
from kpca_denoise.gui.jobs import MODELS as _MODELS, JobItem
from kpca_denoise.gui.image_preview import DECISIONS as _DECISIONS, MEASURED as _MEASURED
from kpca_denoise.gui.image_preview import prepare_preview, preview_tile, run_preview
from kpca_denoise.gui.model import default_ranks
from kpca_denoise.params import DenoiseParams
from kpca_denoise.pipeline import denoise_set, result_keys


def _image(name: str) -> np.ndarray:
    if name.endswith("2x2"):  # a sample image tiled 2x2: a larger image of the same content
        img = sample_image(f"{name[:-3]}.png")
        return np.tile(img, (2, 2) + (1,) * (img.ndim - 2))
    return sample_image(f"{name}.png")


def _params(profile: str) -> DenoiseParams:
    if profile == "global":
        return DenoiseParams(method="global", ranks=default_ranks("global"), add_noise=25.0)
    grouped = {} if profile == "default" else profile
    return DenoiseParams(ranks=default_ranks("grouped"), add_noise=25.0, grouped=grouped)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="camera2x2")
    ap.add_argument("--profiles", default="default,global",
                    help="grouped presets (default, fast, ...) and/or 'global'")
    ap.add_argument("--tiled", type=int, default=0,
                    help="also time full runs in tiles of this side, with and without the "
                         "cores limiting the work")
    args = ap.parse_args(argv)
    print(results_header(), flush=True)
    a = _image(args.image)
    h, w = a.shape[:2]
    boxes = [(h // 2 - 128, h // 2 + 128, w // 2 - 128, w // 2 + 128),
             (h // 4 - 128, h // 4 + 128, w // 4 - 128, w // 4 + 128)]
    print(f"image {args.image} {w}x{h}, sigma 25 added; preview region 256x256; "
          "seconds wall / CPU (all threads), ratios of CPU to the full run's CPU")
    print(f"{'profile':<10} {'full s':>11} {'prep s':>9} {'preview s':>10} {'after s':>9} "
          f"{'moved s':>9} {'ratio':>6} {'after':>6} {'moved':>6} {'halo':>5} "
          f"{'region px':>10} {'groups':>7} {'max diff':>9}")
    tiled_rows = []
    for profile in args.profiles.split(","):
        try:
            params = _params(profile)
        except (TypeError, ValueError) as exc:
            print(f"{profile:<10} skipped: {exc}")
            continue
        for cache in (_DECISIONS, _MEASURED, _MODELS):
            cache.clear()
        full, t_full = _timed(lambda: denoise_set([a], params).images[0])
        item = JobItem(key="bench", name=args.image, array=a, is_patchset=False, ranks=params.ranks)
        times, diff, share = [], 0, []
        for box in boxes:
            pv, t = _timed(lambda: run_preview(item, params, box, None, None))
            times.append(t)
            if pv.group_spectra:
                share.append(pv.group_spectra[0]["groups"] / full.stats["grouped"][0]["groups"])
            y0, y1, x0, x1 = pv.box
            keys = {r: result_keys(params.replace(ranks=(r,)), False)[0] for r in params.ranks}
            for r, out in pv.outputs.items():
                ref = full.outputs[keys[r]][y0:y1, x0:x1]
                diff = max(diff, int(np.abs(ref.astype(np.int64) - out.astype(np.int64)).max()))
        noisy, sigma, vst, calibrated = _DECISIONS[next(iter(_DECISIONS))][:4]
        tile = preview_tile(noisy, calibrated, boxes[0], sigma, vst)  # the centre: a whole halo
        px = (tile.ry1 - tile.ry0) * (tile.rx1 - tile.rx0)
        # the window makes the decisions when the image is selected: a preview after that
        for cache in (_DECISIONS, _MEASURED):
            cache.clear()
        _, t_prep = _timed(lambda: prepare_preview(item, params))
        _, t_ready = _timed(lambda: run_preview(item, params, boxes[0], None, None))

        def col(t, n):
            return f"{t[0]:.1f}/{t[1]:.1f}".rjust(n)

        print(f"{profile:<10} {col(t_full, 11)} {col(t_prep, 9)} {col(times[0], 10)} "
              f"{col(t_ready, 9)} {col(times[1], 9)} {times[0][1] / t_full[1]:6.2f} "
              f"{t_ready[1] / t_full[1]:6.2f} {times[1][1] / t_full[1]:6.2f} "
              f"{tile.y0 - tile.ry0:5d} {px:10d} "
              f"{f'{share[0]:.2f}' if share else '-':>7} {diff:9d}", flush=True)
        if args.tiled and profile != "global":
            tiled_rows.append((profile, _tiled(a, params.replace(tile_size=args.tiled))))
    if tiled_rows:
        print(f"full runs in tiles of {args.tiled} px: seconds wall / CPU with the tiles' cores "
              "limiting the work and without (every group of each region), CPU ratio, largest "
              "pixel difference")
        print(f"{'profile':<10} {'tiles':>5} {'cores s':>11} {'regions s':>11} {'ratio':>6} "
              f"{'max diff':>9}")
        for profile, (n, t_core, t_all, diff) in tiled_rows:
            print(f"{profile:<10} {n:5d} {t_core[0]:5.1f}/{t_core[1]:5.1f} "
                  f"{t_all[0]:5.1f}/{t_all[1]:5.1f} {t_core[1] / t_all[1]:6.2f} {diff:9d}",
                  flush=True)


def _tiled(a: np.ndarray, params: DenoiseParams):
    """``(tiles, (wall, CPU) with the cores limiting the work, the same without, largest
    pixel difference)`` of a full run in tiles."""
    with_core, t_core = _timed(lambda: denoise_set([a], params).images[0])
    limited = tiling._denoise_region_grouped

    def whole_region(*args, core=None, **kw):  # every group of the tile's region
        return limited(*args, **kw)

    tiling._denoise_region_grouped = whole_region
    try:
        without, t_all = _timed(lambda: denoise_set([a], params).images[0])
    finally:
        tiling._denoise_region_grouped = limited
    diff = max(int(np.abs(with_core.outputs[k].astype(np.int64)
                          - without.outputs[k].astype(np.int64)).max()) for k in with_core.outputs)
    return len(tiling.plan(a.shape, params)), t_core, t_all, diff


def _timed(fn):
    """``(fn(), (wall seconds, CPU seconds of every thread of this process))``: on a
    shared machine the CPU time is the steadier measure of the work."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, (time.perf_counter() - t, time.process_time() - c)

if __name__ == "__main__":
    main()
