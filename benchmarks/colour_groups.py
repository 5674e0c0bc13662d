"""Colour: groups found on the luminance and shared by the opponent channels, against
one grouping per opponent channel, and CBM3D.

A script, not a test.  The development set's colour photographs (scikit-image's
``astronaut`` and ``hubble_deep_field``), 256x256 crops (centre and one more each),
0..255, white Gaussian noise of sigma 15 / 25 / 50 on R, G and B (not clipped,
seed 1).  Methods, all told sigma:

* ``per-chan``  - :func:`denoise_grouped` on each opponent channel on its own (the
  colour path before issue 12);
* ``shared``    - ``common.denoise_grouped_opponent``: one block matching on the summed
  SSD of the three opponent channels (the SSD in RGB: the transform is
  orthonormal), the groups shared by the three channels (the colour path);
* ``cbm3d``     - ``bm3d.bm3d_rgb(noisy, sigma)`` (its own opponent space).

Extra arguments: a JSON dictionary of keywords for both of ours (e.g. the settings
before issue 12).

Usage::

    python -m benchmarks.colour_groups
    python -m benchmarks.colour_groups '{"match_size1": 5, "match_size": 5, "kappa2": 1.2, "stride": 5}'
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from skimage import data

from benchmarks.common import (add_noise, bm3d_denoise, centre_crop, denoise_grouped_opponent,
                               exit_on_help, psnr,
                               results_header)
from kpca_denoise.core.color import opponent_to_rgb, rgb_to_opponent
from kpca_denoise.core.grouped import denoise_grouped

SIGMAS = (15, 25, 50)


def crops() -> dict:
    out = {}
    for name, im in (("astronaut", data.astronaut()), ("hubble", data.hubble_deep_field())):
        im = im.astype(np.float64)
        out[f"{name}-centre"] = centre_crop(im, 256)
        out[f"{name}-top-left"] = im[:256, :256]
    return out


def per_channel(noisy, s, **kw):
    opp = rgb_to_opponent(noisy)
    return opponent_to_rgb(np.stack([denoise_grouped(opp[..., c], s, **kw)[0][None]
                                     for c in range(3)], axis=-1))


def shared(noisy, s, **kw):
    return denoise_grouped_opponent(noisy, s, **kw)[0][None]


def cbm3d(noisy, s, **kw):
    return bm3d_denoise(noisy, s)  # bm3d.bm3d_rgb for colour


def main(argv) -> None:
    exit_on_help(argv, __doc__)
    print(results_header(), flush=True)
    kw = json.loads(argv[0]) if argv else {}
    methods = (("per-chan", per_channel), ("shared", shared), ("cbm3d", cbm3d))
    w = np.random.default_rng(0).normal(128, 20, (40, 40, 3))
    shared(w, 20.0, **kw), per_channel(w, 20.0, **kw)  # numba compilation
    print(f"settings: {json.dumps(kw)}")
    print(f"{'image':18s} {'sigma':>5s} " + " ".join(f"{m:>9s}" for m, _ in methods)
          + "   | seconds")
    rows = []
    for s in SIGMAS:
        for name, im in crops().items():
            noisy = add_noise(im, s, 1)
            ps, ts = [], []
            for _, f in methods:
                t0 = time.perf_counter()
                out = f(noisy, s, **kw)
                ts.append(time.perf_counter() - t0)
                ps.append(psnr(im, out))
            rows.append((s, ps, ts))
            print(f"{name:18s} {s:5d} " + " ".join(f"{p:9.3f}" for p in ps) + "   | "
                  + " ".join(f"{t:.2f}" for t in ts), flush=True)
    print()
    for s in SIGMAS:
        sel = [r for r in rows if r[0] == s]
        mp = np.mean([r[1] for r in sel], axis=0)
        mt = np.mean([r[2] for r in sel], axis=0)
        print(f"{'MEAN':18s} {s:5d} " + " ".join(f"{p:9.3f}" for p in mp) + "   | "
              + " ".join(f"{t:.2f}" for t in mt))
    for j, other in ((0, "per-chan"), (2, "lum-only")):
        g = [r[1][1] - r[1][j] for r in rows]
        print(f"shared - {other}: mean {np.mean(g):+.3f} dB, min {np.min(g):+.3f}, "
              f"max {np.max(g):+.3f}; time shared / {other} "
              f"{np.sum([r[2][1] for r in rows]) / np.sum([r[2][j] for r in rows]):.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
