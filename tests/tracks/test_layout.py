"""The package's layering, checked on the source: what the file list and docs/architecture.md promise.

- No module imports (or reaches through an attribute) a `_private` name of
  another top-level package: residual_keras, tracks, tests, benchmarks,
  scripts and solutions use each other's public names only.
- tracks/common names no track and no track's data set: a track tells it
  everything through its `Track` (tracks/common/track.py).
- Each track's `__main__.py` is a few lines: the track lives in its track.py,
  and its track.py is its parts (no forwarders), listed in tracks/registry.py.
"""

import ast
import inspect
import pathlib
import re

import pytest

pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("residual_keras", "tracks", "benchmarks", "scripts", "solutions", "tests")
TRACKS = sorted(path.parent.name for path in (ROOT / "tracks").glob("*/track.py") if path.parent.name != "common")


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _sources():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _top(module):
    return module.split(".")[0]


def private_uses(path):
    """["line N: what"] for every private name of another top-level package that `path` uses."""
    own = path.relative_to(ROOT).parts[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    found, modules = [], set()  # names bound to our modules of other packages
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _top(alias.name) in PACKAGES and _top(alias.name) != own:
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"line {node.lineno}: import {alias.name}")
                    modules.add(alias.asname or _top(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _top(node.module) not in PACKAGES or _top(node.module) == own:
                continue
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"line {node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_checker_finds_private_names_of_other_packages(tmp_path, monkeypatch):
    probe = ROOT / "tests" / "_layout_probe.py"
    probe.write_text("from residual_keras.diagnostics._block_search import outermost_blocks\n"
                     "from tracks.vision.data import loading as vision_sources\n"
                     "import residual_keras as rk\n"
                     "from tracks.common.run_directory import RunDirectory\n"
                     "x = vision_sources._split\nrk.plots._style\nRunDirectory.create\n")
    try:
        found = private_uses(probe)
    finally:
        probe.unlink()
    assert found == ["line 1: from residual_keras.diagnostics._block_search import ...",
                     "line 5: vision_sources._split", "line 6: rk.plots._style"]


def test_no_module_uses_a_private_name_of_another_package():
    found = {str(path.relative_to(ROOT)): uses for path in _sources() if (uses := private_uses(path))}
    assert not found, f"private names of other packages: {found}"


def test_tracks_common_names_no_track_and_no_data_set():
    names = "|".join([*TRACKS, "cifar", "shakespeare", "pydoc", "spirals"])
    found = [f"{path.name}:{number}: {line.strip()}"
             for path in sorted((ROOT / "tracks" / "common").glob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(rf"\b({names})\b", line, re.IGNORECASE)]
    assert not found, "tracks/common knows about tracks:\n" + "\n".join(found)


@pytest.mark.parametrize("track", TRACKS)
def test_each_track_main_is_a_few_lines(track):
    lines = (ROOT / "tracks" / track / "__main__.py").read_text().splitlines()
    assert len(lines) <= 14, f"tracks/{track}/__main__.py has {len(lines)} lines: the track belongs in track.py"
    assert f"from tracks.{track}.track import TRACK" in lines


def test_the_registry_lists_every_track_folder_and_nothing_else():
    from tracks.registry import TRACKS as REGISTERED

    assert sorted(REGISTERED) == TRACKS
    assert all(module == f"tracks.{name}.track" for name, module in REGISTERED.items())


@pytest.mark.parametrize("track", TRACKS)
def test_a_track_py_holds_its_parts_and_no_forwarders(track):
    """A track.py builds its `Track` from its modules' functions: it defines `load_parts` and nothing else."""
    tree = ast.parse((ROOT / "tracks" / track / "track.py").read_text())
    functions = [node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    lambdas = sum(isinstance(node, ast.Lambda) for node in ast.walk(tree))
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    assert functions == ["load_parts"] and not lambdas and not classes, (functions, lambdas, classes)


def test_no_part_is_named_by_a_string():
    """Every part is a function reference an editor can follow: no "module:function" strings left."""
    for path in sorted((ROOT / "tracks").rglob("*.py")):
        assert not re.search(r"""\bpart\(\s*["']""", path.read_text()), path


@pytest.mark.parametrize("track", TRACKS)
def test_every_part_of_a_track_is_a_function_of_the_tracks_own_modules(track):
    import dataclasses
    import importlib

    declared = importlib.import_module(f"tracks.{track}.track").TRACK
    parts = declared.parts
    for field in dataclasses.fields(parts):
        function = getattr(parts, field.name)
        assert callable(function) and inspect.isfunction(function), f"{track}.{field.name}: {function!r}"
        assert function.__module__.startswith((f"tracks.{track}.", "tracks.common.track")), \
            f"{track}.{field.name}: {function.__module__}"
    for name in ("parse_source", "resources"):  # read before TensorFlow loads: the standard library only
        assert getattr(declared, name).__module__.startswith(f"tracks.{track}."), name


def _imports(package):
    """{module: the modules of `package` it imports, at its top or inside a function}, for every module of it."""
    modules = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
                found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name.split(".")[0] == package}
        modules[name] = found
    # a module's own packages (their __init__) are not edges: Python imports them first, whatever the module says
    return {name: {other for other in found if other in modules and other != name and not name.startswith(other + ".")}
            for name, found in modules.items()}


@pytest.mark.parametrize("package", ["tracks", "residual_keras"])
def test_no_two_modules_import_each_other(package):
    """One direction between any two modules, through any chain (issue 49 found the process and runtime setup did)."""
    graph = _imports(package)

    def reaches(start, goal, seen):
        return any(step == goal or (step not in seen and not seen.add(step) and reaches(step, goal, seen))
                   for step in graph[start])

    circles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if reaches(b, a, set())})
    assert not circles, circles
