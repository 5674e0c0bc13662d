"""Photographs from outside scikit-image against BM3D: a check of how the tuning carries over.

A script, not a test.  Nothing here was tuned on: the defaults were chosen on the
development set of ``benchmarks/quality.py`` (and camera / astronaut) only; these
images only report.  Always: PyWavelets' ``aero`` (an aerial photograph) and
``ascent`` (both 512x512 grey; PyWavelets comes with ``bm3d``).  ``--dir DIR`` adds
every PNG / JPEG / TIFF in ``DIR`` (8-bit; colour is made grey unless ``--colour``).
The figures in ``benchmarks/results/outside.txt`` also used scipy 1.9's ``face``
(raccoon, 1024x768 RGB) and matplotlib's ``grace_hopper.jpg`` (512x600 RGB), taken
from their wheels (``pip download --no-deps scipy==1.9.3 matplotlib``; face.dat is a
bz2-compressed 768x1024x3 uint8 array).  The runs recorded from 25 Nov 2026 on also
used twelve photographs of Debian 12's ``mate-backgrounds`` 1.26 (``apt-get download
mate-backgrounds``; the JPEGs of ``usr/share/backgrounds/mate/nature``, scaled with
Pillow's Lanczos filter to 512 px on the short side and saved as PNG).  From 26 Nov
2026 on, eleven photographs of Debian 12's ``plasma-workspace-wallpapers`` 4:5.27
(the largest image of each of BytheWater, ColdRipple, ColorfulCups, DarkestHour,
EveningGlow, FallenLeaf, Grey, Kite, OneStandsOut, Path and summer_1am in
``usr/share/wallpapers/*/contents/images``, the photographs among its 30 wallpapers,
picked from thumbnails before any denoising) were added, scaled the same way.  From
commit dd0eb9d (26 Nov 2026) on they also used textures, renders and two more
photographs, also picked from thumbnails before any denoising: fifteen 512x512 wall,
floor and ground textures of Debian 12's ``openarena-081-textures`` 0.8.5split-14
(in ``pak4-textures.pk3``, a zip: ``textures/`` acc_dm3/grind, ind_wall1, comp_up;
acc_dm5/stntiles_dirty, tiles_moss, stnsqr_dirty, mud02b, wood01;
base_support/surface2; gothic_block/blocks17_ow, blocks18b_ow;
gothic_floor/largerblock3b3dim; base_floor/metaltechfloor01final;
czest3ctf/grass_lush; cosmo_block/rock05; .tga / .jpg saved as PNG as they are,
files named ``oa_<name>.png``), mostly regular (tiles, blocks, a grid) and built
from photographs; four regular 3-D renders of ``gnome-backgrounds`` 43.1 (grid-l,
licorice-l, truchet-l, wood-l; 4096 px WebP scaled to 512, ``r_<name>.png``); and
the two photographs of ``lomiri-wallpapers-20.04`` 20.04.0
(Kleiber_by_Lukas_Baubkus, Infinite-Sea_by_Aury88, scaled to 512 px on the short
side, ``p_<name>.png``).

256x256 centre crops (``--full``: whole images), white Gaussian noise of sigma 15 / 25
/ 50 (seed 1, not clipped), noise level given.  Prints PSNR of ``bm3d.bm3d`` (or
``bm3d.bm3d_rgb`` with ``--colour``) and of the default (:func:`denoise_grouped` /
``common.denoise_grouped_opponent`` with ``data_range=255``) under each JSON dictionary
of keywords given, with the gap to BM3D and the mean per sigma.

Usage::

    python -m benchmarks.outside
    python -m benchmarks.outside --dir ~/outside --colour '{}' '{"kappa2": 1.0}'
"""

from __future__ import annotations

import json
import sys

import numpy as np

from benchmarks.common import (GREY, add_noise, bm3d_denoise, centre_crop, denoise_grouped_opponent,
                               exit_on_help, image_files,
                               psnr, results_header)
from kpca_denoise.core.grouped import denoise_grouped

SIGMAS = (15, 25, 50)


def images(directory: str | None, colour: bool) -> dict[str, np.ndarray]:
    out = {}
    if not colour:
        import pywt

        out["aero"] = np.asarray(pywt.data.aero(), dtype=np.float64)
        out["ascent"] = np.asarray(pywt.data.ascent(), dtype=np.float64)
    if directory:
        from PIL import Image

        for f in image_files(directory):
            with Image.open(f) as src:
                grey = src.mode in ("1", "L", "I", "I;16", "F")
                a = np.asarray(src.convert("RGB"), dtype=np.float64)
            if colour:
                if not grey:  # colour mode: colour files only
                    out[f.stem] = a
            elif f.stem not in out:
                out[f.stem] = a @ GREY
    return out


def main(argv: list[str]) -> None:
    exit_on_help(argv, __doc__)
    print(results_header(), flush=True)
    full = "--full" in argv
    colour = "--colour" in argv
    directory = None
    if "--dir" in argv:
        directory = argv[argv.index("--dir") + 1]
        argv = [a for i, a in enumerate(argv) if a != "--dir" and argv[i - 1] != "--dir"]
    cfgs = [json.loads(a) for a in argv if not a.startswith("--")] or [{}]
    print(f"{'image':14s} sigma   bm3d  | " + " | ".join(json.dumps(c) for c in cfgs))
    means: dict = {}
    for name, im in images(directory, colour).items():
        im = im if full else centre_crop(im, 256)
        for s in SIGMAS:
            noisy = add_noise(im, s, 1)
            row = [psnr(im, bm3d_denoise(noisy, s))]
            for c in cfgs:
                kw = dict({"data_range": 255.0}, **c)
                f = denoise_grouped_opponent if colour else denoise_grouped
                row.append(psnr(im, f(noisy, float(s), **kw)[0][None]))
            for i, v in enumerate(row):
                means.setdefault((s, i), []).append(v)
            print(f"{name:14s} {s:5d} {row[0]:7.2f} | "
                  + " | ".join(f"{v:6.2f} ({v - row[0]:+.2f})" for v in row[1:]), flush=True)
    for s in SIGMAS:
        m = [float(np.mean(means[s, i])) for i in range(len(cfgs) + 1)]
        print(f"{'MEAN':14s} {s:5d} {m[0]:7.2f} | "
              + " | ".join(f"{v:6.2f} ({v - m[0]:+.2f})" for v in m[1:]))


if __name__ == "__main__":
    main(sys.argv[1:])
