"""The package around the code: metadata, one version, commands, the tracks' backend.

(.ci/package_check builds the wheel and the sdist, installs the wheel in a
fresh virtual environment and runs the commands from another directory.)
"""

import importlib
import os
import pathlib
import re
import subprocess
import sys
import tomllib
import types

import pytest

import tracks.__main__ as tracks_main
from residual_keras import __version__
from tracks.common.environment import use_tensorflow_backend

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _python(code, backend):
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_metadata_license_and_one_version():
    assert PROJECT["license"] == "Apache-2.0"  # an SPDX expression, not the deprecated table
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert PROJECT["license-files"] == ["LICENSE"]
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert PROJECT["classifiers"] and PROJECT["urls"] and PROJECT["authors"]


def test_console_scripts_are_the_tracks_main_functions():
    assert PROJECT["scripts"] == {"residual-vision": "tracks.vision.__main__:main",
                                  "residual-language": "tracks.language.__main__:main"}
    for target in PROJECT["scripts"].values():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function))


def test_python_m_tracks_lists_the_tracks_and_their_commands(capsys):
    assert tracks_main.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"residual-keras {__version__}")
    found = dict(tracks_main.tracks())
    assert {"vision", "language", "toy"} <= set(found)  # found from tracks/*/track.py, not listed by hand
    assert found["vision"] == "residual-vision" and found["toy"] is None  # a console script is optional
    for track, script in found.items():
        assert f"python -m tracks.{track}" in out and (script is None or script in out)
    assert "plain vs residual ResNets" in out and "character Transformers" in out and "two spirals" in out


def test_version_option_of_the_tracks():
    result = _python("import sys; from tracks.vision.__main__ import main; sys.exit(main(['--version']))",
                     "tensorflow")
    assert result.returncode == 0
    assert result.stdout.strip().splitlines()[-1].startswith(f"residual-keras {__version__} (keras ")


def test_tracks_use_tensorflow_when_another_backend_is_chosen_and_say_so_in_one_line():
    result = _python("from tracks.common.environment import configure_process, read_environment\n"
                     "configure_process(read_environment())\n"
                     "import keras; print(keras.backend.backend())", "jax")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "tensorflow"
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: Keras backend")]
    assert notes == ["note: Keras backend 'jax' chosen, but the tracks train with TensorFlow (tf.data, "
                     "tf.distribute), while the residual_keras layers and models work on any Keras "
                     "backend: this run uses TensorFlow."]


def test_tracks_stop_cleanly_where_keras_already_runs_on_another_backend(monkeypatch):
    # A notebook that imported Keras on JAX, then the tracks: Keras cannot switch in-process.
    on_jax = types.SimpleNamespace(backend=types.SimpleNamespace(backend=lambda: "jax"))
    monkeypatch.setitem(sys.modules, "keras", on_jax)
    with pytest.raises(ImportError) as error:
        use_tensorflow_backend()
    assert str(error.value) == (
        "Keras already runs on the jax backend in this process, and the tracks train with TensorFlow "
        "(tf.data, tf.distribute), while the residual_keras layers and models work on any Keras backend. "
        "Run the tracks in a new process (they choose TensorFlow themselves).")
