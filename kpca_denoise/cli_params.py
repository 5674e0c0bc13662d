"""The command line's parameters: the options over a parameter file (``--params``: a
sidecar or a bare parameter object), the trial settings a sidecar records and a reuse
leaves out, and errors in the user's terms (the option or the file's key)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .cli_args import OPTIONS, UsageError
from .params import DenoiseParams, ParamError

__all__ = ["TRIAL_SETTINGS", "load_params_file", "param_error", "params_from_args",
           "read_params_file", "trial_settings"]


def param_error(exc: ParamError, source: str | None = None) -> UsageError:
    """A parameter error in the user's terms: the option (or the JSON key) that set it."""
    msg = str(exc)
    if source is not None:
        return UsageError(f"{source}: {msg}")
    opt = OPTIONS.get(exc.name or "")
    if opt and msg.startswith(exc.name):
        msg = opt + msg[len(exc.name):]
    return UsageError(msg)


#: settings of a trial on clean images: recorded in a sidecar's ``trial``, never taken
#: from a parameter file (a sidecar reused on real photographs added noise to them)
TRIAL_SETTINGS = ("add_noise", "reference")


def read_params_file(path) -> tuple[DenoiseParams, dict]:
    """The parameters of a sidecar (``{"params": {...}}``) or of a bare parameter object,
    and the trial settings it holds that were left out (``{"add_noise": 25.0}``: a
    sidecar's ``trial``, or ``add_noise`` where an older one kept it in ``params``).
    A UTF-8 byte-order mark is allowed."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise UsageError(f"{path}: cannot read the parameter file ({exc})") from None
    trial = {}
    if isinstance(data, dict) and isinstance(data.get("params"), dict):
        if isinstance(data.get("trial"), dict):
            trial = {k: v for k, v in data["trial"].items() if k in TRIAL_SETTINGS and v}
        data = data["params"]
    if isinstance(data, dict) and "add_noise" in data:
        data = dict(data)
        noise = data.pop("add_noise")
        if noise:
            trial.setdefault("add_noise", noise)
    try:
        return DenoiseParams.from_dict(data), trial
    except ParamError as exc:
        raise param_error(exc, f"{path}") from None
    except (TypeError, ValueError) as exc:  # a value no check foresaw: still one line
        raise UsageError(f"{path}: bad parameters ({exc})") from None


def load_params_file(path) -> DenoiseParams:
    """The parameters of a sidecar or parameter object (:func:`read_params_file`),
    without the trial settings (``add_noise``)."""
    return read_params_file(path)[0]


def params_from_args(args) -> DenoiseParams:
    """The run's parameters: ``--params``'s file (its trial settings left out, with a
    line saying what was taken), then the options given; UsageError in their terms."""
    if args.params:
        base, trial = read_params_file(args.params)
    else:
        base, trial = DenoiseParams(), {}
    changes = {name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None}
    try:
        params = base.replace(**changes).validate()
    except ParamError as exc:
        raise param_error(exc) from None
    if args.profile is not None and params.method != "grouped" and params.profile != "default":
        raise UsageError(f"--profile {params.profile} is a preset of the grouped method; "
                         f"--method {params.method} does not use it: omit --profile")
    if args.params:
        _note_params_taken(args, base, trial)
    return params


def _note_params_taken(args, base: DenoiseParams, trial: dict) -> None:
    """One line: what --params took from its file (what differs from the defaults, less
    what the command line sets) and the trial settings it left out."""
    default = DenoiseParams().to_dict()
    mine = base.to_dict()
    taken = [f"{k} {_setting(v)}" for k, v in mine.items()
             if v != default.get(k) and getattr(args, k, None) is None and k != "add_noise"]
    left = [f"{k} {_setting(v)}" if k == "add_noise" else k for k, v in trial.items()
            if not (k == "add_noise" and args.add_noise is not None)
            and not (k == "reference" and args.reference)]
    took = ", ".join(taken) if taken else "nothing but the defaults"
    line = f"note: --params {args.params}: took {took}"
    if left:
        line += (f"; left out {' and '.join(left)} (a trial on clean images: give "
                 "--add-noise or --reference again to repeat it)")
    print(line, file=sys.stderr)


def _setting(v) -> str:
    """A parameter's value as the note shows it (ranks 4,8; grouped kappa1=4.0)."""
    if isinstance(v, dict):
        return ",".join(f"{k}={x}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ",".join("auto" if x is None else str(x) for x in v)
    return str(v)


def trial_settings(params: DenoiseParams, args) -> dict:
    """The run's trial settings (noise added to clean images, their reference): recorded
    in the sidecar's ``trial``, not taken back by --params."""
    return {k: v for k, v in (("add_noise", params.add_noise),
                              ("reference", args.reference)) if v}
