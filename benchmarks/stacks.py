"""Stacks, time-lapses and bursts: each page alone, the sequence path, BM3D page by
page and BM4D on the volume, PSNR and time in one process, and the auto decision.

Every stack is built here from images the project develops on (the shipped sample
images, scikit-image's grey photographs) or is synthetic: 16 pages of 256x256 on
0..255 by default.

    python -m benchmarks.stacks [--kinds pan,blobs] [--noise 25,pg] [--pages 16]
        [--size 256] [--no-baselines] [--repeat N] [--grouped KNOB=VALUE,...]
        [--data-range 255] [--group1-sizes 40,64] [--colour]
        | tee -a benchmarks/results/stacks.txt
    python -m benchmarks.stacks --memory 4,8,16 [--size 2048] [--cheap] [--tile-size PX]
        [--centre-tile] [--eager]

``--memory``: the peak resident memory (MiB, ``ru_maxrss``), wall and CPU seconds of a
uint16 pan stack (sigma 25) of each page count, built page by page as a Dask array (the input is never whole) and denoised by
``lazy_denoise`` (``denoise_dask``'s pass) into a file, in a fresh process each (the synchronous scheduler: one
tile at a time; the numba kernels still use every core).  ``--cheap`` searches 8 px
(not 32) on a page and groups 16 patches, which changes the time, not the working set
(the tile side comes from the memory budget, ``tiling.STACK_TILE_BYTES``).
``--centre-tile`` computes only the tile whose core holds the page centre (an interior
tile, the largest region): the synchronous scheduler runs the tiles one after another,
so the whole run's peak is this task's plus the shared decisions, which it includes.
``--eager`` builds the stack in memory and denoises it with ``denoise_stack`` instead (as
the command line does a stack that fits in memory: no task holds every page's region).

Kinds: ``pan`` (a view panning 1 px per frame over the astronaut), ``rotate`` (the
cameraman turning 0.4 degrees and drifting 0.7 / 0.3 px per frame), ``zoom`` (the
astronaut, 1.2 % larger per frame), ``burst`` (the cameraman under hand shake:
sub-pixel shifts of std 1.5 px and turns of std 0.3 degrees), ``pan2`` (the astronaut
moving 1.5 / 2.5 px per frame), ``drift`` (the cameraman drifting 0.5 / -0.5 px per
frame: half a pixel, rounded either way), ``blobs`` (a z-stack
of 3-D Gaussian-smoothed points, isotropic), ``filaments`` (a z-stack of smoothed
3-D curves), ``unrelated`` (16 different grey photographs).  Noise: a Gaussian std
(15, 25, 50), told to every method, or ``pg``: Poisson-Gaussian of gain 3 and std 5
(ours estimates it once per stack; BM3D and BM4D run on the generalised Anscombe
transform with the true parameters, sigma 1, and its exact unbiased inverse).
``--colour``: the pan, rotation, zoom and burst over the colour astronaut, (P, H, W, 3),
Gaussian noise only; BM3D is CBM3D page by page (``bm3d.bm3d_rgb``) and BM4D runs on
the orthonormal opponent channels (``bm4d.bm4d_multichannel``: its block matching on
the luminance, as CBM3D's).
``--grouped kappa1=3.5,group_size1=64``: grouped options for ours (pages alone and
default), to measure a variant against the default on the same stacks.  The stacks
are float (the noise is not clipped); ours takes their range as 0..255 from their values,
as it does any float stack's (``kpca_denoise.tiling.nominal_range``) and as an 8-bit
stack's type says it (it decides its high-noise settings from sigma against the range,
``docs/stacks.md``); ``--data-range`` gives another.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from scipy import ndimage as ndi

from .common import GREY, psnr, results_header, sample_image

KINDS = ("pan", "rotate", "zoom", "burst", "blobs", "filaments", "unrelated", "pan2", "drift")
#: the Poisson-Gaussian noise of ``pg``: gain (pixel units per photon) and std
PG_GAIN, PG_SIGMA = 3.0, 5.0


# -- the stacks ------------------------------------------------------------------------


def _grey(name: str) -> np.ndarray:
    a = sample_image(name).astype(np.float64)
    return a[..., :3] @ GREY if a.ndim == 3 else a


def _warp(image: np.ndarray, angle: float, scale: float, shift: tuple, size: int) -> np.ndarray:
    """The central ``size`` x ``size`` of ``image`` turned by ``angle`` degrees, scaled by
    ``scale`` about its centre and moved by ``shift`` (cubic spline)."""
    c = (np.asarray(image.shape, dtype=np.float64) - 1) / 2
    t = np.deg2rad(angle)
    rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) / scale
    out_c = (np.array([size, size], dtype=np.float64) - 1) / 2
    offset = c - rot @ (out_c + np.asarray(shift, dtype=np.float64))
    return ndi.affine_transform(image, rot, offset=offset, output_shape=(size, size), order=3,
                                mode="reflect")


def _volume_points(shape, n, rng, sigma) -> np.ndarray:
    v = np.zeros(shape)
    pts = [rng.integers(0, s, n) for s in shape]
    np.add.at(v, tuple(pts), rng.uniform(0.5, 1.0, n))
    return ndi.gaussian_filter(v, sigma, mode="constant")


def _filaments(shape, n, rng) -> np.ndarray:
    v = np.zeros(shape)
    P, H, W = shape
    for _ in range(n):
        pos = rng.uniform([0, 0, 0], [P, H, W])
        d = rng.normal(size=3)
        d[0] *= 0.15
        bright = rng.uniform(0.5, 1.0)
        for _ in range(1500):
            d += rng.normal(0, 0.08, 3)
            d[0] *= 0.9
            d /= max(np.linalg.norm(d), 1e-9)
            pos = pos + 0.5 * d
            iz, iy, ix = np.round(pos).astype(int)
            if not (0 <= iz < P and 0 <= iy < H and 0 <= ix < W):
                break
            v[iz, iy, ix] = max(v[iz, iy, ix], bright)
    return ndi.gaussian_filter(v, 1.0, mode="constant")


def _scaled(v: np.ndarray, lo: float = 20.0, hi: float = 230.0) -> np.ndarray:
    v = (v - v.min()) / max(float(np.ptp(v)), 1e-12)
    return lo + (hi - lo) * v


#: the kinds ``--colour`` builds in colour (from the colour astronaut)
COLOUR_KINDS = ("pan", "rotate", "zoom", "burst")


def _colour_warp(image: np.ndarray, *args) -> np.ndarray:
    return np.stack([_warp(image[..., c], *args) for c in range(3)], axis=-1)


def build_colour(kind: str, pages: int = 16, size: int = 256) -> np.ndarray:
    """The clean colour stack ``(pages, size, size, 3)`` float64 on 0..255 of ``kind``
    (one of :data:`COLOUR_KINDS`), the motion of its grey version over the colour
    astronaut."""
    rng = np.random.default_rng(7)
    im = sample_image("astronaut.png")[..., :3].astype(np.float64)
    if kind == "pan":
        y0, x0 = (im.shape[0] - size) // 2, max(0, (im.shape[1] - size - pages) // 2)
        return np.stack([im[y0:y0 + size, x0 + k:x0 + k + size] for k in range(pages)])
    if kind == "rotate":
        return np.stack([_colour_warp(im, 0.4 * k, 1.0, (0.7 * k, 0.3 * k), size)
                         for k in range(pages)])
    if kind == "zoom":
        return np.stack([_colour_warp(im, 0.0, 1.012 ** k, (0, 0), size) for k in range(pages)])
    if kind == "burst":
        return np.stack([_colour_warp(im, rng.normal(0, 0.3), 1.0, tuple(rng.normal(0, 1.5, 2)),
                                      size) for _ in range(pages)])
    raise ValueError(f"no colour stack of kind {kind!r}; known are {', '.join(COLOUR_KINDS)}")


def build(kind: str, pages: int = 16, size: int = 256) -> np.ndarray:
    """The clean stack ``(pages, size, size)`` float64 on 0..255 of ``kind``."""
    rng = np.random.default_rng(7)
    if kind == "pan":
        im = _grey("astronaut.png")
        y0, x0 = (im.shape[0] - size) // 2, max(0, (im.shape[1] - size - pages) // 2)
        return np.stack([im[y0:y0 + size, x0 + k:x0 + k + size] for k in range(pages)])
    if kind == "rotate":
        im = _grey("camera.png")
        return np.stack([_warp(im, 0.4 * k, 1.0, (0.7 * k, 0.3 * k), size) for k in range(pages)])
    if kind == "pan2":
        im = _grey("astronaut.png")
        return np.stack([_warp(im, 0.0, 1.0, (1.5 * k, 2.5 * k), size) for k in range(pages)])
    if kind == "drift":
        im = _grey("camera.png")
        return np.stack([_warp(im, 0.0, 1.0, (0.5 * k, -0.5 * k), size) for k in range(pages)])
    if kind == "zoom":
        im = _grey("astronaut.png")
        return np.stack([_warp(im, 0.0, 1.012 ** k, (0, 0), size) for k in range(pages)])
    if kind == "burst":
        im = _grey("camera.png")
        return np.stack([_warp(im, rng.normal(0, 0.3), 1.0, tuple(rng.normal(0, 1.5, 2)), size)
                         for _ in range(pages)])
    if kind == "blobs":
        return _scaled(_volume_points((pages, size, size), 60 * pages, rng, 3.0))
    if kind == "filaments":
        return _scaled(_filaments((pages, size, size), 6 * pages, rng), 10.0, 240.0)
    if kind == "unrelated":
        from skimage import data
        from skimage.color import rgb2gray

        ims = [_grey("camera.png"), _grey("astronaut.png")] + [
            getattr(data, n)().astype(np.float64) for n in ("moon", "brick", "grass", "gravel",
                                                            "coins")]
        ims.append(rgb2gray(data.hubble_deep_field()) * 255.0)
        crops = []
        for im in ims:
            crops.append(im[:size, :size])
            crops.append(im[-size:, -size:])
        return np.stack(crops[:pages])
    raise ValueError(f"unknown kind {kind!r}; known are {', '.join(KINDS)}")


def add_stack_noise(clean: np.ndarray, noise: str, seed: int = 0) -> np.ndarray:
    """``clean`` with noise ``noise``: a Gaussian std ('25') or 'pg' (Poisson-Gaussian of
    gain :data:`PG_GAIN` and std :data:`PG_SIGMA`); float64, not clipped."""
    rng = np.random.default_rng(seed)
    if noise == "pg":
        return PG_GAIN * rng.poisson(np.maximum(clean, 0) / PG_GAIN) + rng.normal(
            0, PG_SIGMA, clean.shape)
    return clean + rng.normal(0, float(noise), clean.shape)


# -- the methods -----------------------------------------------------------------------


def ours(noisy: np.ndarray, noise: str, sequence: str, grouped: dict | None = None):
    """Our stack denoiser (``kpca_denoise.denoise_stack``, with the grouped options
    ``grouped``): the result and its stats."""
    from kpca_denoise import denoise_stack

    kw = (dict(noise_model="poisson-gaussian") if noise == "pg"
          else dict(noise_sigma=float(noise)))
    if grouped:
        kw["grouped"] = grouped
    return denoise_stack(noisy, sequence=sequence, return_stats=True, **kw)


def with_range(knobs: dict, data_range: float | None, noise: str) -> dict:
    """``knobs`` with the stacks' ``data_range`` for Gaussian noise (a Poisson-Gaussian
    stack is denoised after its variance-stabilising transform, in other units)."""
    return knobs if data_range is None or noise == "pg" else {**knobs, "data_range": data_range}


def _knobs(text: str | None) -> dict:
    """``"kappa1=3.5,group_size1=64"`` as ``{"kappa1": 3.5, "group_size1": 64}``."""
    out: dict = {}
    for item in filter(None, (text or "").split(",")):
        key, _, value = item.partition("=")
        num = float(value)
        out[key.strip()] = int(num) if num.is_integer() and "." not in value else num
    return out


def _with_vst(fn, noisy: np.ndarray, noise: str) -> np.ndarray:
    if noise != "pg":
        return fn(noisy, float(noise))
    from kpca_denoise.core.vst import GeneralizedAnscombe

    vst = GeneralizedAnscombe(np.array([PG_GAIN]), np.array([PG_SIGMA]))
    f = vst.forward(noisy[..., None])[..., 0]
    return vst.inverse(fn(f, 1.0)[..., None])[..., 0]


def bm3d_pages(noisy: np.ndarray, noise: str) -> np.ndarray:
    import bm3d

    if noisy.ndim == 4:  # colour: CBM3D (opponent colour space) page by page
        return np.stack([bm3d.bm3d_rgb(pg, float(noise)) for pg in noisy])
    return _with_vst(lambda v, s: np.stack([bm3d.bm3d(pg, s) for pg in v]), noisy, noise)


#: an orthonormal opponent colour transform (luminance, red-blue, green-magenta): white
#: noise of std sigma stays white of std sigma in each channel
OPPONENT = np.array([[1, 1, 1], [1, 0, -1], [1, -2, 1]]) / np.sqrt([[3], [2], [6]])


def bm4d_volume(noisy: np.ndarray, noise: str) -> np.ndarray:
    import bm4d

    if noisy.ndim == 4:  # colour: BM4D on the opponent channels, matched on the luminance
        opp = np.moveaxis(noisy @ OPPONENT.T, -1, 0)
        out = np.asarray(bm4d.bm4d_multichannel(opp, float(noise))).reshape(opp.shape)
        return np.moveaxis(out, 0, -1) @ OPPONENT
    return _with_vst(lambda v, s: np.asarray(bm4d.bm4d(v, s)).reshape(v.shape), noisy, noise)


def _timed(fn, repeat: int = 1):
    """``fn()``'s result and its shortest time over ``repeat`` runs (the least disturbed
    by other jobs on a shared machine)."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def _memory_child(pages: int, size: int, cheap: bool, target: str, tile: int | None,
                  centre: bool = False, eager: bool = False) -> None:
    """One ``--memory`` run (in its own process): prints peak memory, time, tiles, PSNR;
    ``centre``: only the tile whose core holds the page centre is computed; ``eager``:
    the stack held in memory and denoised by :func:`kpca_denoise.denoise_stack` (as
    the command line does a stack that fits), not read page by page by Dask."""

    import dask
    import dask.array as da

    from kpca_denoise import DenoiseParams
    from kpca_denoise.core.grouped import GroupedOptions
    from kpca_denoise.dask_array import lazy_denoise

    scene = np.tile(_grey("astronaut.png"), (int(np.ceil((size + 64) / 512)),
                                             int(np.ceil((size + pages + 64) / 512))))

    def clean(k: int) -> np.ndarray:
        return scene[32:32 + size, 32 + k:32 + k + size]

    def page(k: int) -> np.ndarray:
        rng = np.random.default_rng(k)
        return np.clip(np.rint((clean(k) + rng.normal(0, 25, (size, size))) * 200), 0,
                       65535).astype(np.uint16)[None]

    lazy = da.concatenate([da.from_delayed(dask.delayed(page)(k), (1, size, size), np.uint16)
                           for k in range(pages)])
    grouped = GroupedOptions(search_radius=8, search_radius1=8, group_size=16,
                             group_size1=16) if cheap else GroupedOptions()
    params = DenoiseParams(noise_sigma=25.0 * 200, grouped=grouped, tile_size=tile)
    out = np.lib.format.open_memmap(target, mode="w+", dtype=np.uint16,
                                    shape=(pages, size, size))
    if eager:
        from kpca_denoise import denoise_stack

        stack = np.concatenate([page(k) for k in range(pages)])
        t = time.perf_counter()
        res, stats = denoise_stack(stack, params=params, return_stats=True)
        out[:] = res
        seconds = time.perf_counter() - t
        tiles = stats["pages"][0]["grouped"][0].get("tiles", 1)
        _memory_line(pages, size, seconds, tiles, clean, page, out, None)
        return
    t = time.perf_counter()
    with dask.config.set(scheduler="synchronous"):
        run = lazy_denoise(lazy, params)
        res = run.outputs[run.keys[-1]]
        c = size // 2
        crop = (slice(c - 128, c + 128), slice(c - 128, c + 128))
        if centre:  # the tile whose core holds the centre: one task, every page
            bounds = [np.cumsum((0,) + res.chunks[ax]) for ax in (1, 2)]
            y0, x0 = (int(b[np.searchsorted(b, c, side="right") - 1]) for b in bounds)
            crop = (slice(y0, y0 + res.chunks[1][0]), slice(x0, x0 + res.chunks[2][0]))
            da.store(res[(slice(None),) + crop], out[(slice(None),) + crop], lock=False)
        else:
            da.store(res, out, lock=False)  # tile by tile: no page waits for the others
        run.close()
    seconds = time.perf_counter() - t
    _memory_line(pages, size, seconds, run.tiles if not centre else f"1/{run.tiles}", clean,
                 page, out, crop)


def _memory_line(pages, size, seconds, tiles, clean, page, out, crop) -> None:
    """The ``--memory`` table's line of a run: this process's peak memory and CPU time,
    the PSNR before and after of the middle page's ``crop`` (None: its central 256^2)."""
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = use.ru_maxrss / 1024, use.ru_utime + use.ru_stime
    k = pages // 2
    c = size // 2
    crop = crop or (slice(c - 128, c + 128), slice(c - 128, c + 128))
    print(f"{pages:>5} {size:>5} {pages * size * size * 2 / 2**30:8.2f} {peak:9.0f} "
          f"{seconds:8.1f} {cpu:8.1f} {tiles:>6} "
          f"{psnr(clean(k)[crop] * 200, page(k)[0][crop], 65535):7.2f} "
          f"{psnr(clean(k)[crop] * 200, out[k][crop], 65535):7.2f}", flush=True)


def memory(counts: list, size: int, cheap: bool, tile: int | None = None,
           centre: bool = False, eager: bool = False) -> None:
    """``--memory``: each page count in a fresh process (see the module docstring)."""
    import os
    import subprocess
    import tempfile

    print(f"# peak resident memory (MB) of {'denoise_stack' if eager else 'denoise_dask'} on a"
          f" uint16 pan stack, sigma 25 x 200,"
          f" {'cheap search' if cheap else 'default settings'}"
          f"{', in memory' if eager else ', synchronous scheduler'}")
    print(f"{'pages':>5} {'side':>5} {'input GB':>8} {'peak MB':>9} {'seconds':>8} "
          f"{'cpu s':>8} {'tiles':>6} {'noisy':>7} {'ours':>7}  (PSNR of a middle page's "
          f"central 256^2; seconds: decisions and denoising; cpu s: the process's)",
          flush=True)
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="kpca-stack-memory-") as tmp:
            cmd = [sys.executable, "-m", "benchmarks.stacks", "--memory-child", str(n),
                   "--size", str(size), "--target", os.path.join(tmp, "out.npy")]
            cmd += ["--tile-size", str(tile)] if tile else []
            cmd += ["--centre-tile"] if centre else []
            cmd += ["--eager"] if eager else []
            subprocess.run(cmd + (["--cheap"] if cheap else []), check=True,
                           env=dict(os.environ, MALLOC_ARENA_MAX="2"))


def group1_sizes(args, knobs: dict) -> None:
    """Ours on each stack with ``sequence.HIGH_NOISE_GROUP1`` at each size, in one
    process: PSNR dB (CPU s)."""
    from kpca_denoise.core.grouped import sequence

    sizes = [int(v) for v in args.group1_sizes.split(",")]
    print("# PSNR dB (CPU s) with the high-noise pilot group size of each column")
    print(f"{'stack':<10} {'noise':>5} " + " ".join(f"{n:>15}" for n in sizes))
    if args.colour and "pg" in args.noise.split(","):
        raise SystemExit("--colour takes Gaussian noise levels only, not pg")
    for kind in args.kinds.split(","):
        clean = (build_colour if args.colour else build)(kind, args.pages, args.size)
        kind = kind + ("-rgb" if args.colour else "")
        for noise in args.noise.split(","):
            noisy = add_stack_noise(clean, noise)
            kn = with_range(knobs, args.data_range, noise)
            cells = []
            for n in sizes:
                sequence.HIGH_NOISE_GROUP1 = n
                c0 = time.process_time()
                out, _ = ours(noisy, noise, "auto", kn)
                cells.append(f"{psnr(clean, out):6.2f} ({time.process_time() - c0:5.1f})")
            print(f"{kind:<10} {noise:>5} " + " ".join(f"{c:>15}" for c in cells), flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--noise", default="25")
    ap.add_argument("--pages", type=int, default=16)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--no-baselines", action="store_true", help="ours only")
    ap.add_argument("--repeat", type=int, default=1,
                    help="each method's time: the shortest of this many runs")
    ap.add_argument("--memory", help="page counts: the peak memory mode")
    ap.add_argument("--cheap", action="store_true", help="--memory: a cheaper search")
    ap.add_argument("--tile-size", type=int, help="--memory: the tiles' core side")
    ap.add_argument("--eager", action="store_true",
                    help="--memory: the stack in memory through denoise_stack, not Dask")
    ap.add_argument("--centre-tile", action="store_true",
                    help="--memory: compute only the tile holding the page centre")
    ap.add_argument("--grouped", help="grouped options for ours: KNOB=VALUE,...")
    ap.add_argument("--group1-sizes",
                    help="ours only, the stack path's high-noise pilot group size at each "
                         "of these (sequence.HIGH_NOISE_GROUP1): PSNR and CPU seconds")
    ap.add_argument("--data-range", type=float,
                    help="tell ours the stacks' range (default: decided from their values)")
    ap.add_argument("--colour", action="store_true",
                    help=f"colour stacks of the kinds {', '.join(COLOUR_KINDS)} (Gaussian "
                         "noise only; CBM3D per page, BM4D on opponent channels)")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        return _memory_child(args.memory_child, args.size, args.cheap, args.target,
                             args.tile_size, args.centre_tile, args.eager)
    if args.memory:
        print(results_header())
        return memory([int(n) for n in args.memory.split(",")], args.size, args.cheap,
                      args.tile_size, args.centre_tile, args.eager)
    knobs = _knobs(args.grouped)
    print(results_header())
    if args.group1_sizes:
        return group1_sizes(args, knobs)
    print("# PSNR dB (s); 'default' is sequence 'auto': its decision (linked page pairs / "
          "all) in the last column" + (f"; times: the shortest of {args.repeat} runs"
                                        if args.repeat > 1 else ""))
    print(f"{'stack':<10} {'noise':>5} {'noisy':>7} {'pages alone':>15} {'default':>15} "
          f"{'BM3D pages':>15} {'BM4D':>15} {'t/BM4D':>6}  auto")
    if args.colour and "pg" in args.noise.split(","):
        ap.error("--colour takes Gaussian noise levels only, not pg")
    for kind in args.kinds.split(","):
        clean = (build_colour if args.colour else build)(kind, args.pages, args.size)
        kind = kind + ("-rgb" if args.colour else "")
        for noise in args.noise.split(","):
            noisy = add_stack_noise(clean, noise)
            kn = with_range(knobs, args.data_range, noise)
            (alone, _), t_alone = _timed(lambda: ours(noisy, noise, "no", kn), args.repeat)
            (auto, st), t_auto = _timed(lambda: ours(noisy, noise, "auto", kn), args.repeat)
            cells = [f"{psnr(clean, alone):6.2f} ({t_alone:5.1f})",
                     f"{psnr(clean, auto):6.2f} ({t_auto:5.1f})"]
            t = None
            for fn in (() if args.no_baselines else (bm3d_pages, bm4d_volume)):
                out, t = _timed(lambda: fn(noisy, noise), args.repeat)
                cells.append(f"{psnr(clean, out):6.2f} ({t:5.1f})")
            cells += ["-"] * (4 - len(cells))
            ratio = f"{t_auto / t:6.2f}" if t else f"{'-':>6}"
            dec = st["sequence"]
            auto_txt = f"{dec['decision']} ({sum(dec['linked'])}/{len(dec['linked'])})"
            print(f"{kind:<10} {noise:>5} {psnr(clean, noisy):7.2f} "
                  + " ".join(f"{c:>15}" for c in cells) + f" {ratio}  {auto_txt}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
