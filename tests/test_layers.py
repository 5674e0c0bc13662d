"""The layer rule (docs/layout.md): core imports only numpy/scipy/numba (no Qt,
no Pillow, no files); only gui/ imports Qt, and only the napari plugin (napari/) imports
napari, through qtpy rather than a fixed binding."""

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parent.parent / "kpca_denoise"
QT = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "shiboken6", "superqt", "qtpy")
#: the gui modules that hold the window's state, its computing side and its texts: no Qt,
#: so they can be used and tested without widgets
QT_FREE_GUI = ("model.py", "compute.py", "texts.py")
#: napari and its GUI toolkit; only the plugin package imports them
NAPARI = ("napari", "magicgui", "npe2", "app_model", "vispy")
#: what the plugin may import of these: napari's binding-neutral Qt (a plugin runs on
#: whatever binding napari runs on, so never PySide6 or PyQt directly, nor pyqtgraph)
PLUGIN_QT = ("qtpy", "superqt") + NAPARI
#: the plugin modules that import neither napari nor Qt (the package's __init__, the
#: layer helpers and the sample data): usable and testable without napari
NAPARI_FREE_PLUGIN = ("__init__.py", "_layers.py", "_sample_data.py")


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0], node
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node


def test_core_imports_only_numeric_libraries():
    # llvmlite is numba's own code generator: core/grouped/group_pca.py registers scipy's LAPACK
    # ssyevr under a name with it, so that the numba kernel calling it can be cached
    # concurrent and os: core/parallel.py's thread pool for the kernels, dropped in a
    # forked child (os.register_at_fork); files stay out (the check below)
    allowed = {"numpy", "scipy", "numba", "llvmlite", "math", "dataclasses", "typing",
               "__future__", "threading", "inspect", "time", "warnings", "functools",
               "collections", "concurrent", "os"}
    for f in (PKG / "core").rglob("*.py"):
        for mod, node in _imports(f):
            if mod == "kpca_denoise":  # absolute imports inside core are fine
                assert node.module.startswith("kpca_denoise.core"), f"{f.name} imports {node.module}"
                continue
            assert mod in allowed, f"{f.name} imports {mod}"
        src = f.read_text()
        assert "open(" not in src and "np.load" not in src and "np.save" not in src, f.name


def test_only_gui_imports_qt_and_only_the_napari_plugin_imports_napari():
    for f in PKG.rglob("*.py"):
        part = f.relative_to(PKG).parts[0]
        if part == "gui":
            continue
        plugin_may = PLUGIN_QT if part == "napari" and f.name not in NAPARI_FREE_PLUGIN else ()
        for mod, _ in _imports(f):
            if mod in plugin_may:
                continue
            assert mod not in QT + NAPARI, f"{f.relative_to(PKG)} imports {mod}"
        if part == "napari":  # the plugin stays out of the desktop application (PySide6)
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom):
                    name = ("kpca_denoise." if node.level else "") + (node.module or "")
                    assert not name.startswith("kpca_denoise.gui"), f"{f.name} imports {name}"
    for f in (PKG / "gui").rglob("*.py"):
        for mod, _ in _imports(f):
            assert mod not in NAPARI, f"{f.relative_to(PKG)} imports {mod}"


def test_the_gui_model_compute_and_texts_import_no_qt():
    # AST, not sys.modules: importing any gui module runs gui/__init__.py, which loads PySide6;
    # the gui modules they import (relative imports inside gui/) are checked as well
    gui = PKG / "gui"
    todo, seen = list(QT_FREE_GUI), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((gui / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:  # from .x import y
                todo += [f"{node.module.split('.')[0]}.py"] if node.module else \
                    [f"{a.name}.py" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] not in QT, f"gui/{name} imports {node.module}"
                assert not node.module.startswith("kpca_denoise.gui"), \
                    f"gui/{name}: import gui modules relatively ({node.module})"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    assert a.name.split(".")[0] not in QT, f"gui/{name} imports {a.name}"
    assert seen >= set(QT_FREE_GUI)


def test_importing_the_library_does_not_load_qt():
    import subprocess
    import sys

    code = ("import sys, kpca_denoise, kpca_denoise.pipeline, kpca_denoise.cli; "
            "print(any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
