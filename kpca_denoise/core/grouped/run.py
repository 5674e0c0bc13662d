"""What a grouped call resolves once, shared by the single image (:mod:`.driver`) and
the stack (:mod:`.sequence`): the checked inputs (:func:`check_inputs`), the run's
settings from calibrated options (:class:`Run`, :func:`resolve_run`), each pass's
(:class:`PassSettings`, :func:`plan_pass`) and the parameters a run reports
(:func:`run_params`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from kpca_denoise.core.checks import is_number

from .calibrate import Calibration, noise_fraction
from .geometry import Geometry, resolve_geometry
from .group_pca import NoiseFloors, noise_floors
from .options import GroupedOptions
from .shrinkage import STAGE2_CUT
from .stats import SPECTRUM_EVERY

__all__ = ["Run", "PassSettings", "check_inputs", "resolve_run", "run_params", "plan_pass",
           "GROUP_SIZE1"]

#: patches per group in stage 1 when ``GroupedOptions.group_size1`` is None (stage 2:
#: ``GroupedOptions.group_size``)
GROUP_SIZE1 = 40


@dataclass(frozen=True)
class Run:
    """Everything a pass needs, resolved once per call (:func:`resolve_run`)."""

    options: GroupedOptions  # calibrated: periodic, lags, contrast, detail decided
    geometry: Geometry
    sigma: float
    n1: int  # patches per group, stage 1 / stage 2
    n2: int
    kappa1: float
    kappa2: float
    kappa2_chroma: float
    window: np.ndarray  # (p, p) weights of the overlap average

    @property
    def rbf(self) -> bool:
        """Whether the kernel is the RBF (else linear)."""
        return self.options.kernel == "rbf"


def check_inputs(chans: list, sigma: Any, ranks: Any) -> tuple[list, float, list]:
    """Check a call's channels, sigma and ranks; raise a ValueError naming what is wrong.

    Returns the channels as contiguous float64, sigma as a float and the ranks as a
    list."""
    imgs = []
    for im in chans:
        im = np.ascontiguousarray(im, dtype=np.float64)
        if not np.all(np.isfinite(im)):
            raise ValueError("image contains NaN or Inf")
        imgs.append(im)
    if any(im.shape != imgs[0].shape or im.ndim != 2 for im in imgs):
        raise ValueError("channels must be 2-D and of the same size")
    if not (is_number(sigma) and math.isfinite(sigma) and sigma > 0.0):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
    sigma = float(sigma)
    if not (sigma * sigma > 0.0 and math.isfinite(1.0 / (sigma * sigma))):
        raise ValueError(f"sigma {sigma} is too small: its square underflows float64 "
                         "(give sigma in the image's units, at least 1e-150)")
    if not math.isfinite(sigma * sigma):
        raise ValueError(f"sigma {sigma} is too large: its square overflows float64 "
                         "(give sigma in the image's units, at most 1e150)")
    if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
        raise ValueError(f"ranks must be a list such as [4, 8] or [None], got {ranks!r}")
    rank_list = list(ranks)
    if not rank_list:
        raise ValueError("ranks must contain at least one entry (None = no cap)")
    for rk in rank_list:
        if rk is not None and (int(rk) != rk or int(rk) < 1):
            raise ValueError(f"ranks must be None or integers >= 1, got {rk!r}")
    return imgs, sigma, rank_list


def resolve_run(imgs: list, sigma: float, cal: Calibration) -> Run:
    """Resolve the :class:`Run` of calibrated options ``cal`` on channels ``imgs``."""
    o = cal.options
    H, W = imgs[0].shape
    g = resolve_geometry(o, noise_fraction(o, sigma, len(imgs)), o.periodic, o.detail)
    p = g.patch_size
    if H < p or W < p:
        raise ValueError(f"image {H}x{W} is smaller than patch_size {p}")

    def fewest(r: int) -> int:  # candidates of a corner reference (clipped window)
        return min(r + 1, H - p + 1) * min(r + 1, W - p + 1)

    if min(fewest(g.search_radius), fewest(g.search_radius1)) < 2:
        raise ValueError(
            f"image {H}x{W} is too small for patch_size {p}: fewer than 2 patches to group")
    rbf = o.kernel == "rbf"
    k2 = float(o.kappa2) if o.kappa2 is not None else (1.0 if o.periodic else 0.7)
    beta = o.window_beta
    win = np.outer(np.kaiser(p, beta), np.kaiser(p, beta)) if beta > 0 else np.ones((p, p))
    n1 = max(2, min(GROUP_SIZE1 if o.group_size1 is None else int(o.group_size1),
                    fewest(g.search_radius1)))
    return Run(
        options=o, geometry=g, sigma=sigma, n1=n1,
        n2=max(2, min(int(o.group_size), fewest(g.search_radius))) if o.regroup else n1,
        kappa1=float(o.kappa1) if o.kappa1 is not None else (4.5 if rbf else 3.0),
        kappa2=k2,
        kappa2_chroma=float(o.kappa2_chroma) if o.kappa2_chroma is not None else 1.5 * k2,
        window=np.ascontiguousarray(win, dtype=np.float64))


def run_params(run: Run, cal: Calibration, floors: dict) -> dict:
    """Return the resolved parameters of a run, as its stats report them."""
    o, g = run.options, run.geometry
    d = {k: v for k, v in asdict(o).items()
         if k not in ("lags", "periodic", "detail", "contrast", "data_range")}
    d.update(asdict(g))
    d.update(group_size=run.n2, group_size1=run.n1, kappa1=run.kappa1, kappa2=run.kappa2,
             kappa2_chroma=run.kappa2_chroma, stage2_cut=STAGE2_CUT,
             data_range=None if o.data_range is None else float(o.data_range),
             gamma_scale=float(o.gamma_scale), gamma_scale2=float(o.gamma_scale2),
             tol=float(o.tol), window_beta=float(o.window_beta),
             mean_kappa1=None if o.mean_kappa1 is None else float(o.mean_kappa1),
             periodic=o.periodic, periodicity=cal.score, lags=[list(v) for v in o.lags],
             periodic_trial=cal.trial, detail=o.detail, contrast=o.contrast,
             sigma=run.sigma, **floors)
    return d


@dataclass(frozen=True)
class PassSettings:
    """One pass's settings: stage, group size, geometry and noise floors (:func:`plan_pass`)."""

    stage: int
    n: int
    stride: int
    match_size: int
    search_radius: int
    floors: NoiseFloors  # channel 0's
    floors_rest: NoiseFloors  # the channels after the first (the chrominances of colour)
    tol2: float
    final: bool
    #: stage 2's kernel width for the noisy groups' own kernel PCA, which explicit
    #: ranks keep whole (the stage-1 width)
    own_gamma: float = 0.0
    #: the final pass decomposes every this many-th group fully (the spectrum)
    spectrum_every: int = SPECTRUM_EVERY


def plan_pass(run: Run, stage: int, final: bool, floors_report: dict) -> PassSettings:
    """Plan the settings of pass ``stage``.

    Its kernel width and noise floor go into ``floors_report``."""
    o, g = run.options, run.geometry
    p = g.patch_size
    n = run.n1 if stage == 1 else run.n2
    c = float(o.gamma_scale if stage == 1 else o.gamma_scale2)
    fl = noise_floors(run.sigma, p * p, n, c, run.rbf, run.kappa1, run.kappa2)
    floors_report[f"stage{stage}_gamma"] = fl.gamma
    floors_report[f"stage{stage}_noise_floor"] = fl.tau1 if stage == 1 else fl.tau2
    return PassSettings(stage=stage, n=n, stride=g.stride1 if stage == 1 else g.stride, final=final,
                 match_size=g.match_size1 if stage == 1 else g.match_size,
                 search_radius=g.search_radius1 if stage == 1 else g.search_radius,
                 floors=fl, floors_rest=fl.with_tau2(run.kappa2_chroma / run.kappa2),
                 tol2=p * p * (float(o.tol) * run.sigma) ** 2,
                 own_gamma=noise_floors(run.sigma, p * p, n, float(o.gamma_scale), run.rbf,
                                        run.kappa1, run.kappa2).gamma)
