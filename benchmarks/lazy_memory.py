"""A TIFF larger than the memory the process may use, denoised by the command line.

A script, not a test.  It writes a noisy RGBA float64 TIFF (astronaut repeated over the
frame, Gaussian noise of std 20 on the colour channels, alpha constant; tiled 256 x 256,
zlib), written band by band so that making it holds no whole image, then runs
``python -m kpca_denoise denoise`` on it under ``prlimit --data`` (the process's heap
and anonymous memory, ``ulimit -d``) set below the file's decoded size, inside
``/usr/bin/time -v``.  The command line sees the limit (``io.lazy_tiff.memory_budget``),
reads the TIFF lazily and writes a tiled TIFF band by band.  Reported: the exit code,
the peak resident memory, the wall time, the command's "read lazily" line, and the
PSNR of the central 512 x 512 of the output against the clean image.

The default grouped method takes about 20 s per megapixel on two idle cores; the run
uses faster grouped settings (``--fast``: one stage, a 7 x 7 search, groups of 8,
stride 5), which change the time, not the memory bound.

Usage::

    python -m benchmarks.lazy_memory --side 5800 --limit-mb 900 --fast
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT, psnr, results_header

FAST = {"grouped": {"two_stage": False, "search_radius": 3, "stride": 5, "group_size": 8}}
TILE = 256


def _clean_rows(y0: int, y1: int, side: int) -> np.ndarray:
    from skimage import data

    src = data.astronaut().astype(np.float64)
    ys, xs = np.arange(y0, y1) % src.shape[0], np.arange(side) % src.shape[1]
    return src[ys[:, None], xs[None, :]]


def make_tiff(path: Path, side: int) -> int:
    """The noisy RGBA float64 TIFF, written tile row by tile row; returns its bytes."""
    import tifffile

    def tiles():
        for y0 in range(0, side, TILE):
            y1 = min(y0 + TILE, side)
            rng = np.random.default_rng(y0)
            rgb = _clean_rows(y0, y1, side) + rng.normal(0, 20, (y1 - y0, side, 3))
            band = np.concatenate([rgb, np.full((y1 - y0, side, 1), 255.0)], axis=-1)
            for x0 in range(0, side, TILE):
                yield np.ascontiguousarray(band[:, x0:x0 + TILE])

    tifffile.imwrite(path, tiles(), shape=(side, side, 4), dtype=np.float64,
                     tile=(TILE, TILE), photometric="rgb", extrasamples=("unassalpha",),
                     planarconfig="contig", compression="zlib", bigtiff=True)
    return side * side * 4 * 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", type=int, default=5800, help="image side in pixels")
    ap.add_argument("--limit-mb", type=int, default=900, help="prlimit --data, in MB")
    ap.add_argument("--tile-size", type=int, default=256, help="the engine's tiles")
    ap.add_argument("--fast", action="store_true", help="the faster grouped settings")
    args = ap.parse_args()
    print(results_header(), flush=True)
    with tempfile.TemporaryDirectory(prefix="kpca-lazy-memory-") as tmp:
        tmp = Path(tmp)
        src = tmp / "big.tif"
        nbytes = make_tiff(src, args.side)
        print(f"input: {args.side} x {args.side} RGBA float64, {nbytes / 2**30:.2f} GB decoded, "
              f"{src.stat().st_size / 2**30:.2f} GB on disk; limit: prlimit --data="
              f"{args.limit_mb} MB", flush=True)
        cmd = ["prlimit", f"--data={args.limit_mb * 2**20}", "/usr/bin/time", "-v",
               sys.executable, "-m", "kpca_denoise", "denoise", str(src), "-o", str(tmp / "out"),
               "--tile-size", str(args.tile_size)]
        if args.fast:
            (tmp / "fast.json").write_text(json.dumps(FAST))
            cmd += ["--params", str(tmp / "fast.json")]
        print("command: MALLOC_ARENA_MAX=2 " + " ".join(cmd[:4]) + " python -m kpca_denoise "
              + " ".join(cmd[7:]).replace(str(tmp), "$TMP"), flush=True)
        env = dict(os.environ, PYTHONPATH=str(ROOT), MALLOC_ARENA_MAX="2")
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - t
        peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines() if "lazily" in ln or "error" in ln]
        print(f"exit code {proc.returncode}, {seconds / 60:.1f} min, peak resident memory "
              f"{int(peak.group(1)) / 1024:.0f} MB" if peak else "no peak reported")
        for ln in lines:
            print("  " + ln.replace(str(tmp), "$TMP"))
        print("\n".join("  " + ln for ln in proc.stdout.splitlines()[:3]))
        out = tmp / "out" / "big_kpca.tif"
        if proc.returncode == 0 and out.exists():
            import tifffile
            import zarr

            z = zarr.open(tifffile.imread(out, aszarr=True), mode="r")
            c = args.side // 2
            got = np.asarray(z[c - 256:c + 256, c - 256:c + 256, :3])
            clean = _clean_rows(c - 256, c + 256, args.side)[:, c - 256:c + 256]
            zin = zarr.open(tifffile.imread(src, aszarr=True), mode="r")
            noisy = np.asarray(zin[c - 256:c + 256, c - 256:c + 256, :3])
            print(f"output {z.shape} {z.dtype}; central 512 x 512: noisy "
                  f"{psnr(clean, noisy):.2f} dB, denoised {psnr(clean, got):.2f} dB")


if __name__ == "__main__":
    main()
