"""Peak memory and time of ``kpca-denoise denoise`` against image size.

A script, not a test.  For each size (megapixels) it makes a noisy test
image (scikit-image's camera, or astronaut with ``--colour``, upscaled to a
4:3 frame, Gaussian noise of std 20, saved as PNG in a temporary folder
outside the repository), then runs the command line on it in a fresh
subprocess under ``/usr/bin/time -v`` and reads the peak resident memory
("Maximum resident set size") and the wall time.  Tiles bound the working
set, so the peak should grow only by the image and its output held in the
image's own dtype (a few bytes per pixel), not with the per-pixel float64
working arrays of the whole image.

With ``--ranks``, each size is run twice, each in its own process: ``--ranks auto``
and ``--ranks 1,2,4,8,auto``, and the two peaks and times are compared: several
ranks share one run's groups and eigendecompositions, so they should cost about
what one costs (issue 62: at most 1.3 times the peak plus 0.2 GB, 1.6 times the
time).

Usage::

    python -m benchmarks.memory                      # 0.25, 1, 4, 12 Mpx, grey
    python -m benchmarks.memory --sizes 0.25 1 --colour --method global
    python -m benchmarks.memory --sizes 3 12 --colour --ranks
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT, add_noise, results_header


def make_image(mpx: float, colour: bool, path: Path) -> tuple[int, int]:
    from PIL import Image
    from skimage import data, transform

    H = int(round(np.sqrt(mpx * 1e6 * 3 / 4)))
    W = int(round(H * 4 / 3))
    src = data.astronaut() if colour else data.camera()
    big = transform.resize(src, (H, W) + src.shape[2:], order=1, preserve_range=True)
    noisy = add_noise(big, 20.0, 0)
    Image.fromarray(np.clip(np.rint(noisy), 0, 255).astype(np.uint8)).save(path)
    return H, W


def run(image: Path, outdir: Path, method: str, timeout: float,
        ranks: str | None = None) -> tuple[float | None, float, str]:
    """(peak MB, seconds, status) of one fresh ``python -m kpca_denoise denoise``
    (``ranks``: its ``--ranks``); status is '' (completed), 'timeout' or the command's
    last error line."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "kpca_denoise", "denoise", str(image),
           "-o", str(outdir), "-q", "--overwrite", "--method", method]
    if ranks is not None:
        cmd += ["--ranks", ranks]
    elif method == "global":
        cmd += ["--ranks", "16"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        _, err = proc.communicate(timeout=timeout)
        status = "" if proc.returncode == 0 else (
            [ln for ln in err.splitlines() if ln.startswith("error")] or ["failed"])[-1]
    except subprocess.TimeoutExpired:
        # stop the python child; /usr/bin/time then reports its peak so far
        subprocess.run(["pkill", "-INT", "-P", str(proc.pid)], check=False)
        _, err = proc.communicate()
        status = "timeout"
    seconds = time.perf_counter() - t
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    return (int(m.group(1)) / 1024 if m else None), seconds, status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[0.25, 1, 4, 12], metavar="MPX")
    ap.add_argument("--colour", action="store_true", help="RGB images (default: grey)")
    ap.add_argument("--method", default="grouped", choices=("grouped", "global"))
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds per size")
    ap.add_argument("--ranks", action="store_true",
                    help="per size, --ranks auto against --ranks 1,2,4,8,auto")
    args = ap.parse_args()
    print(results_header(), flush=True)
    if args.ranks:
        compare_ranks(args)
        return
    print(f"method {args.method}, {'RGB' if args.colour else 'grey'} PNG, noise std 20 "
          f"(estimated), one fresh process per size")
    print(f"{'Mpx':>6} {'size':>11} {'peak MB':>8} {'MB/Mpx':>7} {'time s':>7} {'s/Mpx':>6}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kpca-memory-") as tmp:
        for mpx in args.sizes:
            img = Path(tmp) / f"img_{mpx:g}.png"
            H, W = make_image(mpx, args.colour, img)
            peak, sec, status = run(img, Path(tmp) / "out", args.method, args.timeout)
            real = H * W / 1e6
            if not status:
                rows.append((real, peak))
            note = ("" if not status else f"  (stopped after {args.timeout:.0f} s: peak so far)"
                    if status == "timeout" else f"  FAILED: {status}")
            print(f"{real:6.2f} {f'{W}x{H}':>11} {peak or float('nan'):8.0f} "
                  f"{(peak or float('nan')) / real:7.0f} {sec:7.0f} {sec / real:6.0f}{note}",
                  flush=True)
            img.unlink()
    if len(rows) > 1 and all(p for _, p in rows):
        (m0, p0), (m1, p1) = rows[0], rows[-1]
        print(f"\npeak grows {p1 / p0:.2f}x for {m1 / m0:.0f}x the pixels "
              f"({(p1 - p0) / (m1 - m0):.0f} MB per extra Mpx)")


def compare_ranks(args) -> None:
    """Per size, the peak and time of ``--ranks auto`` and of ``--ranks 1,2,4,8,auto``,
    each in a fresh process, and their ratios against issue 62's bounds."""
    many = "1,2,4,8,auto"
    print(f"method {args.method}, {'RGB' if args.colour else 'grey'} PNG, noise std 20 "
          f"(estimated), one fresh process per run; bound: peak <= 1.3 x auto + 0.2 GB, "
          f"time <= 1.6 x auto")
    print(f"{'Mpx':>6} {'size':>11} {'ranks':>13} {'peak MB':>8} {'time s':>7} "
          f"{'peak x':>7} {'time x':>7} {'bound MB':>9}")
    with tempfile.TemporaryDirectory(prefix="kpca-memory-") as tmp:
        for mpx in args.sizes:
            img = Path(tmp) / f"img_{mpx:g}.png"
            H, W = make_image(mpx, args.colour, img)
            base = None
            for ranks in ("auto", many):
                peak, sec, status = run(img, Path(tmp) / "out", args.method, args.timeout, ranks)
                if base is None:
                    base = (peak, sec)
                ratio = (f"{peak / base[0]:7.2f} {sec / base[1]:7.2f} "
                         f"{1.3 * base[0] + 0.2 * 1024:9.0f}" if peak and base[0] else "")
                print(f"{H * W / 1e6:6.2f} {f'{W}x{H}':>11} {ranks:>13} "
                      f"{peak or float('nan'):8.0f} {sec:7.0f} {ratio}"
                      f"{'  ' + status if status else ''}", flush=True)
            img.unlink()


if __name__ == "__main__":
    main()
