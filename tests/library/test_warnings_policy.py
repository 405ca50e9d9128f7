"""The tests' warnings policy (pyproject.toml, `[tool.pytest.ini_options] filterwarnings`).

A DeprecationWarning, PendingDeprecationWarning or FutureWarning attributed to
one of our modules (residual_keras, tracks, benchmarks, scripts) is an error:
our code warns no deprecation of its own and calls no deprecated API of
Keras, TensorFlow or NumPy. Another library's deprecation stays a warning.
"""

import builtins
import importlib
import pathlib
import re
import tomllib
import warnings

import pytest

PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"

OURS = ["residual_keras", "residual_keras.models", "residual_keras.diagnostics._block_search", "tracks",
        "tracks.vision.data.pipeline", "tracks.language.pipeline", "benchmarks.throughput", "scripts.doc_numbers"]
THEIRS = ["keras.src.x", "keras", "tensorflow.python.data.ops.dataset_ops", "numpy", "tensorflow_datasets.core",
          "residual_keras_fork", "trackster", "test_models"]
CATEGORIES = [DeprecationWarning, PendingDeprecationWarning, FutureWarning]


def _filters():
    """The filterwarnings lines of pyproject.toml, as (action, message, category, module, lineno).

    Parsed as pytest parses its ini lines: `action:message:category:module:lineno`,
    message and module regular expressions (not escaped, unlike -W on the command line).
    """
    lines = tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]["filterwarnings"]
    parsed = []
    for line in lines:
        parts = [part.strip() for part in line.split(":")]
        assert len(parts) <= 5, line
        action, message, category, module, lineno = parts + [""] * (5 - len(parts))
        parsed.append((action, message, _category(category), module, int(lineno or 0)))
    return parsed


def _category(name):
    """A warning class by its name: a builtin (`DeprecationWarning`) or `module.Class`; empty: Warning."""
    if not name:
        return Warning
    if "." not in name:
        return getattr(builtins, name)
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def _warn(category, module):
    """Warns as if from `module` (what `warnings.warn` does from a frame of that module)."""
    warnings.warn_explicit(f"something is deprecated ({module})", category,
                           filename=module.replace(".", "/") + ".py", lineno=1, module=module, registry={})


def _apply_pyproject():
    warnings.resetwarnings()
    warnings.simplefilter("default")  # what pytest shows by default
    for action, message, category, module, lineno in _filters():
        warnings.filterwarnings(action, message, category, module, lineno)  # later lines win, as in pytest


@pytest.mark.parametrize("category", CATEGORIES, ids=lambda category: category.__name__)
def test_pyproject_makes_deprecations_from_our_modules_errors(category):
    with warnings.catch_warnings():
        _apply_pyproject()
        for module in OURS:
            with pytest.raises(category, match=re.escape(module)):
                _warn(category, module)


@pytest.mark.parametrize("category", CATEGORIES, ids=lambda category: category.__name__)
def test_pyproject_leaves_other_libraries_deprecations_as_warnings(category):
    with warnings.catch_warnings(record=True) as caught:
        _apply_pyproject()
        for module in THEIRS:
            _warn(category, module)  # does not raise
    assert [str(warning.message) for warning in caught] == [
        f"something is deprecated ({module})" for module in THEIRS
    ]


def test_pyproject_no_longer_ignores_every_deprecation():
    assert not [line for line in _filters() if line[0] == "ignore" and issubclass(DeprecationWarning, line[2])
                and not line[1] and not line[3]]


def test_the_filters_this_session_runs_with_are_the_policy(pytestconfig):
    """The same, under the filters pytest itself applied to this test from pyproject.toml."""
    if not pytestconfig.pluginmanager.has_plugin("warnings"):
        pytest.skip("pytest's warnings plugin is off (-p no:warnings): it applies no filters")
    with pytest.raises(DeprecationWarning):
        _warn(DeprecationWarning, "residual_keras.models")
    with pytest.raises(FutureWarning):
        _warn(FutureWarning, "tracks.common.training")
    with warnings.catch_warnings(record=True) as caught:
        _warn(DeprecationWarning, "keras.src.x")
    assert len(caught) == 1 and caught[0].category is DeprecationWarning
