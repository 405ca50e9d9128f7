"""Without TensorFlow the tracks say what to install, in one line, and exit 2 (issue 42)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("track, args", [("toy", []), ("vision", ["--preset", "smoke"]), ("language", ["diagnose"])])
def test_a_track_without_tensorflow_names_what_to_install(tmp_path, track, args):
    code = (f"import sys, tensorflow_blocker; tensorflow_blocker.install()\n"
            f"from tracks.{track}.__main__ import main\nsys.exit(main({args!r}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr[-1500:]
    assert result.stderr.splitlines() == [
        "error: the tracks train with TensorFlow, which is not installed here: pip install tensorflow (the "
        "package's default install has it; the residual_keras library alone runs on JAX and PyTorch too)"]
    assert result.stdout == "" and list(tmp_path.iterdir()) == []  # nothing written
