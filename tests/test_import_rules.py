"""Modules meet through public names only, and imports run one way (docs/layout.md).

An AST walk over the package and the tests: no ``from kpca_denoise.x import _y`` and no
``x._y`` on an imported kpca_denoise module (a helper two modules need is public in
the module that owns its job), and no import circle between the package's modules,
imports inside functions included (an import moved into a function to dodge a loop is
still a loop)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "kpca_denoise"
TESTS = ROOT / "tests"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(path: pathlib.Path):
    """(module imported, names taken from it, line, node) for every import of the package."""
    own = _module_name(path) if path.is_relative_to(PKG) else ""
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "kpca_denoise":
                    yield a.name, [], node.lineno, a
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "kpca_denoise":
                yield target, [a.name for a in node.names], node.lineno, node


def _private_uses(path: pathlib.Path) -> list[str]:
    """Where ``path`` takes a private name of another module of the package."""
    own = _module_name(path) if path.is_relative_to(PKG) else ""
    found, aliases = [], {}
    for target, names, line, node in _imports(path):
        for name in names:
            sub = f"{target}.{name}"
            if sub in MODULES:  # a module imported by name: its attributes are checked below
                aliases[next(a.asname or a.name for a in node.names if a.name == name)] = sub
            elif _is_private(name) and target != own:
                found.append(f"{path.relative_to(ROOT)}:{line}: from {target} import {name}")
        if not names:  # import kpca_denoise.x [as y]
            if node.asname:
                aliases[node.asname] = target
            else:
                aliases[target.split(".")[0]] = target.split(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in aliases:
                mod = ".".join([aliases[value.id]] + chain[:0:-1])
                if mod in MODULES and mod != own:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {mod}.{node.attr}")
    return found


def test_no_module_takes_another_modules_private_name():
    found = [use for f in sorted(PKG.rglob("*.py")) + sorted(TESTS.rglob("*.py"))
             for use in _private_uses(f)]
    assert not found, ("private names taken across modules (make them public where their "
                       "job lives):\n" + "\n".join(found))


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        for target, names, _, _ in _imports(path):
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            for t in subs or ([target] if target in MODULES else []):
                if t != mod:
                    graph[mod].add(t)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    circles = _circles(_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_checks_see_a_circle_and_a_private_import(tmp_path):
    # the checks themselves: a made-up circle and a made-up private import are found
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    f = TESTS / "_probe_private_import.py"
    f.write_text("from kpca_denoise.prepare import _x\nimport kpca_denoise.prepare as p\np._y\n")
    try:
        uses = _private_uses(f)
    finally:
        f.unlink()
    assert [u.split(": ", 1)[1] for u in uses] == ["from kpca_denoise.prepare import _x",
                                                   "kpca_denoise.prepare._y"]
