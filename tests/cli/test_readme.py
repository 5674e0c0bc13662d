"""The README's quick start and CI must agree (CI runs the README's test command)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _quick_start_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(?:bash|sh)?\n(.*?)\n```", section, flags=re.S)


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    cmds = _quick_start_commands()
    assert len(cmds) == 2, cmds
    run, test = (c.strip() for c in cmds)
    assert "kpca-denoise denoise sample_images" in run
    assert "pytest" in test
    ci = (ROOT / ".ci" / "run").read_text()
    assert test in ci.splitlines()
