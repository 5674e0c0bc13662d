"""The seams of io/ and the command line: no module takes another module's private name
(``from x import _y``), and io/'s modules import each other without a circle (the TIFF
header and page helpers live in io/tiff.py, which both TIFF readers use)."""

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[2] / "kpca_denoise"
COMMAND_LINE = ("cli.py", "cli_args.py", "cli_outputs.py", "cli_params.py", "cli_progress.py",
                "cli_resume.py", "display.py",
                "entry.py", "__main__.py", "lazy_inputs.py", "signals.py", "numba_cache.py")


def _relative_imports(path):
    """(module imported, names) of each ``from .x import ...`` in the file, with the module
    as a dotted path below kpca_denoise."""
    here = path.relative_to(PKG).parent.parts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(here[:len(here) - node.level + 1])
            yield ".".join(base + ([node.module] if node.module else [])), [a.name for a in
                                                                             node.names]


def _files():
    return [*(PKG / "io").glob("*.py"), *(PKG / name for name in COMMAND_LINE)]


def test_no_private_name_crosses_a_module():
    taken = [(f.relative_to(PKG).as_posix(), mod, name) for f in _files()
             for mod, names in _relative_imports(f) for name in names
             if name.startswith("_") and not name.startswith("__")]
    assert taken == []


def test_io_modules_import_each_other_without_a_circle():
    graph = {}
    for f in (PKG / "io").glob("*.py"):
        graph[f.stem] = {mod.split(".")[1] for mod, _ in _relative_imports(f)
                         if mod.startswith("io.") and mod.count(".") == 1}
    graph.pop("__init__")  # the package's door: imports every module, none imports it

    def reach(start, node, path):
        for nxt in graph.get(node, ()):
            assert nxt != start, f"import circle: {' -> '.join(path + [nxt])}"
            if nxt not in path:
                reach(start, nxt, path + [nxt])

    for name in graph:
        reach(name, name, [name])
    assert "tiff" in graph["reading"] and "tiff" in graph["lazy_tiff"]
    assert "reading" not in graph["lazy_tiff"]
