"""A `.keras` file saved on one backend loads on the others with the same outputs.

Saved here (the backend of this test session), loaded in a subprocess on each
other backend that is installed (the `backends` extra installs JAX and
PyTorch; .ci/run runs this file under JAX and PyTorch).
"""

import importlib.util
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import keras
from residual_keras import BasicBlock, PreActBasicBlock, cifar_resnet, transformer_lm

BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}
OTHERS = [name for name in BACKEND_MODULES if name != keras.backend.backend()]
LOAD = textwrap.dedent(
    """
    import sys

    import numpy as np

    import keras
    import residual_keras  # registers the layers

    folder = sys.argv[1]
    for name in ("resnet", "lm", "blocks"):
        model = keras.saving.load_model(f"{folder}/{name}.keras")
        with np.load(f"{folder}/{name}.npz") as saved:
            output = keras.ops.convert_to_numpy(model(saved["x"], training=False))
            np.testing.assert_allclose(output, saved["y"], rtol=1e-4, atol=1e-5)
    print("loaded on", keras.backend.backend())
    """
)


def _models():
    rng = np.random.default_rng(0)
    resnet = cifar_resnet(8, width=4, input_shape=(8, 8, 3), block="preact")
    lm = transformer_lm(11, 8, 2, embed_dim=16, num_heads=2, norm_position="post")
    inputs = keras.Input((3, 8, 8))
    x = BasicBlock(8, strides=(2, 1), kernel_size=(3, 5), activation="gelu", shortcut="B",
                   data_format="channels_first")(inputs)
    x = PreActBasicBlock(8, data_format="channels_first")(x)
    blocks = keras.Model(inputs, BasicBlock(8, norm="none", final_activation=False, data_format="channels_first")(x))
    return {
        "resnet": (resnet, rng.normal(size=(2, 8, 8, 3)).astype("float32")),
        "lm": (lm, rng.integers(0, 11, (2, 8)).astype("int32")),
        "blocks": (blocks, rng.normal(size=(2, 3, 8, 8)).astype("float32")),
    }


@pytest.mark.parametrize("other", OTHERS)
def test_files_saved_here_load_on_the_other_backends(tmp_path, other):
    if importlib.util.find_spec(BACKEND_MODULES[other]) is None:
        pytest.skip(f"{other} is not installed (pip install -e '.[backends]')")
    for name, (model, x) in _models().items():
        model.save(tmp_path / f"{name}.keras")
        y = keras.ops.convert_to_numpy(model(x, training=False))
        np.savez(tmp_path / f"{name}.npz", x=x, y=y)
    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "KERAS_BACKEND": other,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path)], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"loaded on {other}" in result.stdout
