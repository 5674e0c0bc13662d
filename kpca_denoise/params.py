"""The parameter object every front end passes to the pipeline.

One frozen dataclass; ``validate()`` names the bad parameter and the fix;
``to_dict``/``from_dict`` give the JSON sidecar that the GUI writes and the
command line reads back (``kpca-denoise denoise --params sidecar.json``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .core.grouped.geometry import PATCH_SIZE
from .core.grouped.options import GroupedOptions
from .core.checks import is_finite

__all__ = ["DenoiseParams", "METHODS", "PROFILES", "ParamError", "MAX_SIGMA", "parse_ranks", "as_params",
           "call_params", "DEPRECATED_NAMES"]

#: 'grouped': non-local kernel PCA on groups of similar patches, two stages (default).
#: 'global': one kernel PCA on patches sampled from the whole set, as in Mika et al. (1998).
METHODS = ("grouped", "global")
#: what each profile is for (its grouped options: the preset of that name, under the
#: knobs given in ``grouped``; ``docs/speed.md``)
PROFILES = {
    "default": "the best quality (the method as documented)",
    "fast": "previews and large batches: one matching for both stages, small groups and search",
}
EIGEN_SOLVERS = ("auto", "dense", "arpack", "randomized", "lobpcg")
NOISE_MODELS = ("auto", "white", "correlated", "poisson-gaussian")
#: the noise models' old names, read from older sidecars and calls
NOISE_MODEL_ALIASES = {"gaussian": "auto"}
#: whether a set's pages are denoised with their neighbours (``docs/stacks.md``)
SEQUENCE_CHOICES = ("auto", "yes", "no")
#: the largest noise std accepted (pixel units): more than the range of 16-bit images
MAX_SIGMA = 1e6
#: the largest ``strength`` accepted: ten times the measured noise smooths nearly everything
MAX_STRENGTH = 10.0
#: local Dask worker processes per CPU at most (``Executor(workers=)``, ``--workers``):
#: more only divide the same cores, and each is a process of its own
WORKERS_PER_CPU = 4


def too_many_workers(workers: int) -> str | None:
    """What is wrong with asking for ``workers`` local Dask workers (more than
    :data:`WORKERS_PER_CPU` per CPU of this machine), or None."""
    import os

    most = WORKERS_PER_CPU * (os.cpu_count() or 1)
    if workers <= most:
        return None
    return f"must be at most {most} ({WORKERS_PER_CPU} per CPU of this machine), got {workers}"


class ParamError(ValueError):
    """A bad parameter: ``name`` is the parameter (None for the whole object)."""

    def __init__(self, name: str | None, message: str):
        super().__init__(message)
        self.name = name


#: the words for "no cap" in a list of ranks (None: the method's own choice)
NO_CAP_WORDS = ("auto", "all", "none")
#: ranks are below this (a 32-bit count of components)
_MAX_RANK = 2**31
#: the integer parameters (at most 2**31 - 1)
_INT_FIELDS = ("patch_size", "stride", "n_train", "n_landmarks", "preimage_iterations", "seed",
               "tile_size")


def parse_ranks(value: Any, *, check: bool = True) -> tuple:
    """The ranks every front end takes, as a tuple in the order given.

    ``value`` is a string ('4,8,auto'; commas or spaces between), a list or tuple
    (['all', 8], [None, 4]) or one int; 'auto', 'all', 'none' and None mean no cap
    (None in the tuple).  Raises :class:`ParamError` naming ``ranks`` and the fix:
    a value that is not a rank always; with ``check``, also a rank below 1 and one
    given twice (``check=False`` only reads the values)."""
    text = isinstance(value, str)
    if text:
        parts: list = value.replace(",", " ").split()
    elif isinstance(value, (list, tuple, np.ndarray)):
        parts = list(value)
    elif isinstance(value, (dict, set, frozenset)):
        raise ParamError("ranks", f"ranks must be a list such as [4, 8, 16], got {value!r}")
    else:
        parts = [value]
    if not parts:
        raise ParamError("ranks", "ranks must be a non-empty list such as "
                                  f"{'4,8,16' if text else '[4, 8, 16]'} or "
                                  f"{'auto' if text else ['auto']}, got {value!r}")
    ranks = [_rank(part) for part in parts]
    bad = next((part for part, r in zip(parts, ranks) if r is False), None)
    if bad is not None:  # a list written in a string is named whole, anything else alone
        raise ParamError("ranks", "ranks must be integers separated by commas (e.g. 4,8,16) "
                                  f"or 'auto', got {value!r}" if text and len(parts) > 1 else
                         f"ranks must be integers >= 1 or 'auto', got {bad!r}")
    for k, r in enumerate(ranks if check else ()):
        if r is not None and not 1 <= r < _MAX_RANK:
            raise ParamError("ranks", f"ranks must be integers >= 1 or 'auto', got {r!r}"
                             + (f" (at most {_MAX_RANK - 1})" if r >= _MAX_RANK else ""))
        if r in ranks[:k]:
            times = "twice" if ranks.count(r) == 2 else "more than twice"
            raise ParamError("ranks", f"ranks lists {'auto' if r is None else r} {times}; "
                                      "give each rank once")
    return tuple(ranks)


#: the grouped options a parameter object sets through its own fields (for every method)
GROUPED_SET_BY_FIELDS = {"kernel": "kernel", "patch_size": "patch_size",
                         "max_iter": "preimage_iterations"}


def _check_grouped_keys(grouped: dict) -> None:
    """A params file's ``grouped`` object names only the options it may set there."""
    known = sorted({f.name for f in fields(GroupedOptions)} - set(GROUPED_SET_BY_FIELDS))
    for k in grouped:
        if k in GROUPED_SET_BY_FIELDS:
            raise ParamError("grouped", f"grouped sets {k}; set {GROUPED_SET_BY_FIELDS[k]} of "
                                        "the parameters instead (it applies to every method)")
        if k not in known:
            raise ParamError("grouped", f"unknown grouped option {k!r}; known are: "
                                        + ", ".join(known))


def _rank(v: Any) -> int | None | bool:
    """One rank (None: no cap), or False (never equal to a rank >= 1) for a value that
    is not one."""
    if v is None:
        return None
    if isinstance(v, str):
        w = v.strip().lower()
        if w in NO_CAP_WORDS:
            return None
        return int(w) if re.fullmatch(r"[+-]?[0-9]+", w) else False
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return False


@dataclass(frozen=True)
class DenoiseParams:
    """Everything that decides a denoising result: the one options object.

    Every front end (library, command line, window, napari, Dask) builds one and the
    pipeline resolves it once (:func:`as_params`); a sidecar's ``params`` is its
    :meth:`to_dict`.  ``profile`` picks a preset of the grouped method's knobs.

    Parameters
    ----------
    method : 'grouped' (default) or 'global' (plain kernel PCA, Mika et al. 1998).
    ranks : kernel principal components kept; several ranks are compared from
        one eigendecomposition.  For 'grouped' a rank caps the components per
        group on top of the shrinkage; ``None`` in the tuple means no cap.  For
        patch sets, under every method, ``None`` means the rank from the noise level
        (:meth:`~kpca_denoise.core.kpca.KernelPCA.noise_rank`); for images under
        'global' it means rank 16.
    patch_size : patch side in pixels; ``None`` lets the method choose
        (8 for 'global'; 5 for 'grouped').
    stride : step between patches for 'global' (default ``patch_size // 2``).
    n_train : training patches sampled from the set ('global').
    n_landmarks : ``None`` (exact kernel PCA) or m, the Nyström landmarks among the
        training patches ('global'): time O(n_train m^2) and memory O(m^2) instead
        of O(n_train^2), so n_train can be far larger.  Measured quality and error
        are in ``benchmarks/results/nystrom.txt``.
    gamma : RBF kernel parameter; ``None`` chooses it from the data and noise level.
    noise_sigma : noise standard deviation in the units of the pixel values
        (e.g. 25 for uint8 images); ``None`` estimates it per image.
    preimage_iterations : fixed-point iteration cap; ``None`` is the method's default
        (100 for 'global' and patch sets, 1 per group for 'grouped').
    preimage_tol : fixed-point stopping tolerance ('global').
    kernel : 'rbf' (default) or 'linear' (ablation: plain PCA in the same pipeline).
    seed : random seed for training-patch sampling, the eigensolver and added noise.
    add_noise : if set, Gaussian noise of this std (pixel units) is added to each
        input before denoising (to try the method on clean images).
    tile_size : core side in pixels of the overlapping tiles an image is denoised
        in (memory is bounded by the tile); ``None`` = the method's default
        (``kpca_denoise.tiling.DEFAULT_TILE``).  The result does not depend on it.
    noise_model : 'auto' (default), 'white', 'correlated' or 'poisson-gaussian'.
        'auto' measures the noise (``docs/noise.md``): white noise is removed at its
        level; correlated noise (a camera's demosaicing, processing and JPEG) at a level
        read from its coarse scale and covariance; white noise that grows with the
        signal is stabilised as Poisson-Gaussian.  'white' takes the noise as white
        (the finest-scale estimate), 'correlated' as correlated.  ``noise_sigma`` given
        is one white level under all three.  'poisson-gaussian': camera / microscope
        noise of variance ``poisson_gain * signal + noise_sigma^2``, denoised after the
        generalised Anscombe transform and brought back by its exact unbiased inverse
        (``noise_sigma`` is then the Gaussian part).  'gaussian', the old name of
        'auto', is still read.
    poisson_gain : the Poisson gain (pixel units per photon) for 'poisson-gaussian';
        ``None`` estimates it per image and channel (as ``noise_sigma``).
    strength : how much noise to remove, as a factor on the noise level the denoiser is
        given (estimated or ``noise_sigma``; under 'poisson-gaussian' the stabilised
        level 1): below 1 keeps more detail and noise, above 1 smooths more
        (``docs/noise.md``).  Default 1.
    sequence : 'auto' (default), 'yes' or 'no': whether the images of a set of one
        size are the pages of a sequence (a stack, a time-lapse, a burst) whose groups
        also take patches from the neighbouring pages; 'auto' decides from the data
        (unrelated images run alone), 'yes' forces it, 'no' runs every image alone.
        Grouped method only (``docs/stacks.md``).
    grouped : the grouped method's knobs, a
        :class:`~kpca_denoise.core.grouped.GroupedOptions` (or a preset name or a
        mapping of knob names); ``kernel``, ``patch_size`` and the pre-image
        iterations are set by the fields above, not here (``docs/options.md``).
    profile : 'default' or 'fast' (:data:`PROFILES`): the grouped method's preset of
        that name, with the knobs of ``grouped`` on top (``docs/speed.md``).

    Examples
    --------
    >>> from kpca_denoise import DenoiseParams
    >>> p = DenoiseParams(profile="fast", strength=0.8, ranks=(4, 8, None)).validate()
    >>> p.to_dict()["ranks"]
    [4, 8, None]
    >>> DenoiseParams.from_dict(p.to_dict()) == p
    True
    """

    method: str = "grouped"
    ranks: tuple = (None,)
    patch_size: int | None = None
    stride: int | None = None
    n_train: int = 2000
    n_landmarks: int | None = None
    gamma: float | None = None
    noise_sigma: float | None = None
    preimage_iterations: int | None = None
    preimage_tol: float = 1e-4
    kernel: str = "rbf"
    eigen_solver: str = "auto"
    seed: int = 0
    add_noise: float | None = None
    tile_size: int | None = None
    grouped: GroupedOptions = field(default_factory=GroupedOptions)
    noise_model: str = "auto"
    poisson_gain: float | None = None
    strength: float = 1.0
    profile: str = "default"
    sequence: str = "auto"

    def __post_init__(self) -> None:
        # numpy scalars (np.int64(8), np.float32(25)) are what array code passes around
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.generic) and not isinstance(v, np.bool_):
                object.__setattr__(self, f.name, v.item())
        if isinstance(self.noise_model, str) and self.noise_model in NOISE_MODEL_ALIASES:
            object.__setattr__(self, "noise_model", NOISE_MODEL_ALIASES[self.noise_model])
        if not isinstance(self.grouped, GroupedOptions):
            try:
                object.__setattr__(self, "grouped", GroupedOptions.coerce(self.grouped))
            except (TypeError, ValueError) as e:
                raise ParamError("grouped", f"grouped {e}") from None
        if isinstance(self.profile, str) and self.profile != "default" and self.profile in PROFILES:
            # the profile's preset under the knobs given (again: the same result)
            preset = GroupedOptions.preset(self.profile).changed()
            object.__setattr__(self, "grouped", GroupedOptions.from_dict(
                {**preset, **self.grouped.changed()}))
        try:
            object.__setattr__(self, "ranks", parse_ranks(self.ranks, check=False))
        except ParamError:
            pass  # validate() names what is wrong

    def validate(self) -> "DenoiseParams":
        """Return self, or raise :class:`ParamError` naming the parameter and the fix."""
        def bad(name: str, msg: str):
            v = getattr(self, name, None)
            if name in _INT_FIELDS and isinstance(v, int) and abs(v) >= 2**31:
                msg += f" (at most {2**31 - 1})"
            raise ParamError(name, f"{name} {msg}")

        def is_int(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**31

        def is_num(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        if not isinstance(self.profile, str) or self.profile not in PROFILES:
            bad("profile", f"must be one of {', '.join(PROFILES)}, got {self.profile!r}")
        if self.method not in METHODS:
            bad("method", f"must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.kernel not in ("rbf", "linear"):
            bad("kernel", f"must be 'rbf' or 'linear' for denoising (the pre-image needs them), "
                          f"got {self.kernel!r}")
        if self.eigen_solver not in EIGEN_SOLVERS:
            bad("eigen_solver", f"must be one of {', '.join(EIGEN_SOLVERS)}, got {self.eigen_solver!r}")
        parse_ranks(self.ranks)
        if self.patch_size is not None and (not is_int(self.patch_size) or self.patch_size < 2):
            bad("patch_size", f"must be an integer >= 2 (pixels), got {self.patch_size!r}")
        if self.stride is not None and (not is_int(self.stride) or self.stride < 1):
            bad("stride", f"must be a positive integer, got {self.stride!r}")
        if not is_int(self.n_train) or self.n_train < 2:
            bad("n_train", f"(training patches) must be an integer >= 2, got {self.n_train!r}")
        if self.n_landmarks is not None and (not is_int(self.n_landmarks) or self.n_landmarks < 1):
            bad("n_landmarks", "must be an integer >= 1 (or omitted for exact kernel PCA), "
                               f"got {self.n_landmarks!r}")
        if self.n_landmarks is not None and self.method != "global":
            bad("n_landmarks", "applies to method 'global' only; omit it for 'grouped'")
        for name in ("gamma", "noise_sigma", "add_noise"):
            v = getattr(self, name)
            if v is None:
                continue
            if not is_num(v) or not is_finite(v):
                bad(name, f"must be a finite number, got {v!r}")
            if name == "add_noise" and not (0 <= v <= MAX_SIGMA):
                bad(name, f"must be between 0 and {MAX_SIGMA:g} (pixel units), got {v!r}")
            if name == "noise_sigma" and self.noise_model == "poisson-gaussian":
                # the Gaussian part of signal-dependent noise: 0 is pure Poisson noise
                if not (0 <= v <= MAX_SIGMA):
                    bad(name, f"must be >= 0 and at most {MAX_SIGMA:g} (the Gaussian part in "
                              f"pixel units, 0 for pure Poisson noise; omit it to estimate), "
                              f"got {v!r}")
            elif name == "noise_sigma" and not (0 < v <= MAX_SIGMA):
                bad(name, f"must be > 0 and at most {MAX_SIGMA:g} (pixel units, e.g. 25 for "
                          f"8-bit images; omit it to estimate), got {v!r}")
            if name == "gamma" and not (0 < v):
                bad(name, f"must be > 0 (or omitted for automatic), got {v!r}")
            if name == "gamma" and self.kernel == "linear":
                bad(name, "is the RBF kernel's width; the linear kernel has none: omit it")
        if self.preimage_iterations is not None and (
                not is_int(self.preimage_iterations)
                or not 1 <= self.preimage_iterations <= 10_000):
            bad("preimage_iterations", "must be an integer from 1 to 10000 (or omitted for the "
                                       f"method's default), got {self.preimage_iterations!r}")
        if not is_num(self.preimage_tol) or not (0 < self.preimage_tol < 1):
            bad("preimage_tol", f"must be a number in (0, 1), got {self.preimage_tol!r}")
        if not is_int(self.seed) or self.seed < 0:
            bad("seed", f"must be a non-negative integer, got {self.seed!r}")
        if self.noise_model not in NOISE_MODELS:
            bad("noise_model", f"must be one of {', '.join(NOISE_MODELS)}, got {self.noise_model!r}")
        if self.poisson_gain is not None and (
                not is_num(self.poisson_gain) or not 0 < self.poisson_gain <= MAX_SIGMA):
            bad("poisson_gain", f"must be a number > 0 and at most {MAX_SIGMA:g} (pixel units "
                                f"per photon; omit it to estimate), got {self.poisson_gain!r}")
        if not is_num(self.strength) or not (0 < self.strength <= MAX_STRENGTH):
            bad("strength", f"must be a number > 0 and at most {MAX_STRENGTH:g} (a factor on the "
                            f"noise level; 1 removes the noise measured), got {self.strength!r}")
        if self.poisson_gain is not None and self.noise_model != "poisson-gaussian":
            bad("poisson_gain", "applies to noise_model 'poisson-gaussian' only")
        if self.method == "grouped" and self.patch_size is not None and self.patch_size > 64:
            bad("patch_size", f"must be at most 64 for method 'grouped', got {self.patch_size!r}")
        for name, field_name in (("kernel", "kernel"), ("patch_size", "patch_size"),
                                 ("max_iter", "preimage_iterations")):
            if getattr(self.grouped, name) != getattr(GroupedOptions(), name):
                bad("grouped", f"sets {name}; set {field_name} of the parameters instead "
                               "(it applies to every method)")
        p = self.patch_size or PATCH_SIZE
        for name in ("stride", "stride1"):
            stride = getattr(self.grouped, name)
            if self.method == "grouped" and stride is not None and stride > p:
                if stride == getattr(GroupedOptions.preset(self.profile), name):
                    bad("patch_size", f"{p} is below the {name} {stride} of profile "
                                      f"'{self.profile}'; use a patch size of {stride} or more "
                                      "with it")
                bad("grouped", f"sets {name} {stride}, above the patch size {p}: a stride must "
                               f"be in 1..{p} to cover every pixel")
        if self.sequence not in SEQUENCE_CHOICES:
            bad("sequence", f"must be one of {', '.join(SEQUENCE_CHOICES)}, got {self.sequence!r}")
        if self.sequence == "yes" and self.method != "grouped":
            bad("sequence", "'yes' applies to method 'grouped' only; use 'no' or 'auto'")
        if self.tile_size is not None and (not is_int(self.tile_size) or self.tile_size < 64):
            bad("tile_size", "must be an integer >= 64 (pixels; omit it for the default), "
                             f"got {self.tile_size!r}")
        return self

    def replace(self, **changes: Any) -> "DenoiseParams":
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(changes)
        return DenoiseParams(**data)

    def to_dict(self) -> dict:
        """A JSON-ready dict; ``grouped`` holds only the knobs that differ from the defaults."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["ranks"] = list(self.ranks)
        d["grouped"] = self.grouped.changed()
        return d

    def grouped_options(self, data_range: float | None = None) -> GroupedOptions:
        """The grouped method's options for a run: ``grouped`` with this object's
        kernel, patch size and pre-image iterations, and ``data_range`` where the
        options leave it unset."""
        g = self.grouped
        return g.replace(kernel=self.kernel, patch_size=self.patch_size,
                         max_iter=g.max_iter if self.preimage_iterations is None
                         else self.preimage_iterations,
                         data_range=g.data_range if g.data_range is not None else data_range)

    @classmethod
    def from_dict(cls, data: dict) -> "DenoiseParams":
        """Parameters from a JSON object (a sidecar's ``params``); every key and value is
        checked, and a bad one is named (:class:`ParamError`)."""
        if not isinstance(data, dict):
            raise ParamError(None, "the parameters must be a JSON object such as "
                                   f'{{"method": "grouped"}}, got {type(data).__name__}')
        data = dict(data)
        if "extra" in data:  # what files written before the options object called it
            if "grouped" in data:
                raise ParamError("extra", "give the grouped options once, as grouped "
                                          "(extra is its old name)")
            data["grouped"] = data.pop("extra")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in set(data) - known)
        if unknown:
            raise ParamError(unknown[0], f"unknown parameter(s) {unknown}; known are {sorted(known)}")
        if "grouped" in data and not isinstance(data["grouped"], (dict, str)):
            raise ParamError("grouped", "grouped must be a JSON object of grouped-method "
                                        f'options such as {{"kappa1": 4.0}}, or a preset name '
                                        f'such as "single-stage", got {data["grouped"]!r}')
        if isinstance(data.get("grouped"), dict):
            _check_grouped_keys(data["grouped"])
        if "ranks" in data:
            data["ranks"] = parse_ranks(data["ranks"])
        for name in ("method", "kernel", "eigen_solver", "noise_model", "profile", "sequence"):
            if name in data and not isinstance(data[name], str):
                raise ParamError(name, f"{name} must be a string, got {data[name]!r}")
        return cls(**data).validate()


def as_params(params: "DenoiseParams | dict | None" = None, **changes: Any) -> DenoiseParams:
    """The validated parameters of a call, from what a front door was given.

    Parameters
    ----------
    params : DenoiseParams, dict or None
        A parameter object, a JSON-style dict (as in a sidecar's ``params``), or None
        for the defaults.
    **changes
        :class:`DenoiseParams` fields that replace those of ``params``
        (``profile="fast"``, ``strength=0.8``, ``ranks=(4, 8)``, ...).

    Returns
    -------
    DenoiseParams
        Validated; a bad value raises :class:`ParamError` naming the field.

    Raises
    ------
    TypeError
        ``params`` of another type, or a keyword that is no field.

    Examples
    --------
    >>> as_params(profile="fast", strength=0.8).profile
    'fast'
    """
    if isinstance(params, dict):
        params = DenoiseParams.from_dict(params)
    elif params is not None and not isinstance(params, DenoiseParams):
        raise TypeError(f"params must be a DenoiseParams or a dict, got {type(params).__name__}")
    params = params or DenoiseParams()
    if changes:
        known = {f.name for f in fields(DenoiseParams)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise TypeError(f"unknown parameter(s) {unknown}; DenoiseParams fields are "
                            f"{sorted(known)}")
        if "ranks" in changes:
            changes["ranks"] = parse_ranks(changes["ranks"])
        params = params.replace(**changes)
    return params.validate()


#: the front doors' old keyword names and the :class:`DenoiseParams` fields that replace
#: them (accepted with a DeprecationWarning for one release)
DEPRECATED_NAMES = {"n_components": "ranks", "random_state": "seed"}


def call_params(params: "DenoiseParams | dict | None", fields: dict, *,
                caller: str) -> DenoiseParams:
    """The parameters of one front-door call (``denoise_image(img, params, **fields)``).

    Like :func:`as_params`, and the old keyword names of :data:`DEPRECATED_NAMES` are
    taken with a ``DeprecationWarning`` naming the new one; an error in a value given
    under an old name names that old name.

    Parameters
    ----------
    params : DenoiseParams, dict or None
        The base parameters.
    fields : dict
        The call's keywords: :class:`DenoiseParams` fields (or old names).
    caller : str
        The front door's name, for the warning.

    Returns
    -------
    DenoiseParams
        Validated.
    """
    fields = dict(fields)
    renamed = {}
    for old, new in DEPRECATED_NAMES.items():
        if old not in fields:
            continue
        value = fields.pop(old)
        warnings.warn(f"{caller}({old}=...) is deprecated; use {new}=... (a DenoiseParams "
                      f"field)", DeprecationWarning, stacklevel=3)
        if new in fields:
            raise TypeError(f"give {new} or {old}, not both ({old} is {new}'s old name)")
        if old == "n_components":
            if value is not None and (not isinstance(value, (int, np.integer))
                                      or isinstance(value, (bool, np.bool_))
                                      or not 1 <= value < 2**31):
                raise ParamError(old, "n_components must be an integer >= 1, or None for the "
                                      f"method's default, got {value!r}")
            value = (value,)
        fields[new] = value
        renamed[new] = old
    try:
        return as_params(params, **fields)
    except ParamError as exc:  # named as the caller's argument
        old = renamed.get(exc.name or "")
        if old is None:
            raise
        msg = str(exc)
        raise ParamError(old, old + msg[len(exc.name):] if msg.startswith(exc.name) else msg
                         ) from None
