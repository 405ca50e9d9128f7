"""Every name the library's docs show as importable imports (issue 40, case 6).

docs/library.md opens with "What `import residual_keras as rk` gives you":
its tables of layers and instruments name `rk.<name>`. The API pages
(docs/api/*.md) render `::: residual_keras.<path>` with `members: [...]`.
The prose names dotted paths `residual_keras.<module>.<name>`. Each must
resolve; on the old code `rk.loss_landscape` and `rk.stream_delta_rank`
did not (they were in the table, but only under `rk.diagnostics`).
"""

import importlib
import pathlib
import re

import pytest

import residual_keras as rk

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
LIBRARY = DOCS / "library.md"
API_PAGES = sorted((DOCS / "api").glob("*.md"))


def _resolve(path):
    """The object at dotted `path` (a module, or attributes of one), or raise."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for part in parts[split:]:
            found = getattr(found, part)
        return found
    raise ModuleNotFoundError(path)


def _table_names(text, first_header):
    """The backticked identifiers in the first column of the tables whose first header is `first_header`."""
    names, inside = [], False
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            inside = False
        elif cells[0] == first_header:
            inside = True
        elif inside and not set(cells[0]) <= set("- "):
            names += re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", cells[0])
    return names


def _rk_names():
    text = LIBRARY.read_text()
    names = _table_names(text, "layer") + _table_names(text, "instrument")
    names += re.findall(r"`rk\.([A-Za-z_][A-Za-z_0-9]*)", text)
    return sorted(set(names))


def _dotted_paths():
    paths = set()
    for page in [LIBRARY, *API_PAGES]:
        text = page.read_text()
        paths.update(re.findall(r"`(residual_keras(?:\.[A-Za-z_][A-Za-z_0-9]*)+)", text))
        for target, options in re.findall(r"^::: (\S+)\n((?:[ \t]+.*\n)*)", text, flags=re.MULTILINE):
            paths.add(target)
            members = re.search(r"members:\s*\[([^\]]*)\]", options)
            if members:
                paths.update(f"{target}.{member.strip()}" for member in members.group(1).split(",") if member.strip())
    return sorted(paths)


def test_the_docs_name_what_is_checked():
    """The parsers find the tables (a guard: an empty list would pass the tests below vacuously)."""
    assert {"BasicBlock", "Residual", "lesion", "loss_landscape", "stream_delta_rank", "TrainingDynamics"} <= set(
        _rk_names())
    assert "residual_keras.diagnostics.stream_delta_rank" in _dotted_paths()
    assert "residual_keras.batchnorm.use_fused" in _dotted_paths()


@pytest.mark.parametrize("name", _rk_names())
def test_every_name_in_library_md_is_an_attribute_of_rk(name):
    assert hasattr(rk, name), f"docs/library.md shows rk.{name}, which does not exist"
    assert name in rk.__all__


@pytest.mark.parametrize("path", _dotted_paths())
def test_every_dotted_path_in_the_docs_imports(path):
    _resolve(path)
