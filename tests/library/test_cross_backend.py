"""A `.keras` file saved on one backend loads on the others with the same outputs.

Saved here (the backend of this test session), loaded in a subprocess on each
other backend that is installed (the `backends` extra installs JAX and
PyTorch; .ci/run runs this file under JAX and PyTorch).
"""

import importlib.util
import inspect
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import keras
import residual_keras as rk
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
        try:
            model = keras.saving.load_model(f"{folder}/{name}.keras")
        except Exception as error:
            # TensorFlow on a CPU without oneDNN cannot convolve channels_first:
            # the blocks refuse to be built there, and say why.
            if name != "blocks" or "channels_first' cannot run on this machine" not in str(error):
                raise
            print("blocks: refused here, with the reason (no channels_first convolution on this CPU)")
            continue
        with np.load(f"{folder}/{name}.npz") as saved:
            output = keras.ops.convert_to_numpy(model(saved["x"], training=False))
            np.testing.assert_allclose(output, saved["y"], rtol=1e-4, atol=1e-5)
    print("loaded on", keras.backend.backend())
    """
)


def _models():
    rng = np.random.default_rng(0)
    resnet = cifar_resnet(8, block=rk.blocks.preact(), width=4, input_shape=(8, 8, 3))
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
def test_files_saved_here_load_on_the_other_backends(tmp_path, other, channels_first_conv):
    if importlib.util.find_spec(BACKEND_MODULES[other]) is None:
        pytest.skip(f"{other} is not installed (pip install -e '.[backends]')")
    for name, (model, x) in _models().items():
        model.save(tmp_path / f"{name}.keras")
        y = keras.ops.convert_to_numpy(model(x, training=False))
        np.savez(tmp_path / f"{name}.npz", x=x, y=y)
    assert f"loaded on {other}" in _run_on(other, LOAD, tmp_path)


def _run_on(backend, script, folder):
    """The stdout of `script` run with `folder` as its argument in a new process on `backend`."""
    root = pathlib.Path(__file__).resolve().parents[2]
    env = {**os.environ, "KERAS_BACKEND": backend,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", script, str(folder)], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# Run in the other backend's process after `_measure`'s own source (inspect.getsource).
MEASURE_HEADER = "import json\nimport sys\n\nimport keras\nimport numpy as np\n\nimport residual_keras  # registers the layers\n\n"
MEASURE_LOOP = textwrap.dedent(
    """
    folder = sys.argv[1]
    measured = {}
    for name in ("resnet", "lm"):
        model = keras.saving.load_model(f"{folder}/{name}.keras")
        with np.load(f"{folder}/{name}.npz") as saved:
            measured[name] = _measure(model, saved["x"], saved["y"])
    print(json.dumps(measured))
    """
)


def _measure(model, x, y):
    """What the differentiating instruments say about one model, as plain floats."""
    from residual_keras import diagnostics

    gradients = diagnostics.gradient_norms(model, x, y, training=False)
    jacobian = diagnostics.jacobian_norm(model, x, num_iterations=30, tolerance=1e-7)
    result = {
        "loss": gradients["loss"],
        "stream_grad_norms": gradients["stream_grad_norms"].tolist(),
        "weight_grad_norms": gradients["weight_grad_norms"].tolist(),
        "jacobian": np.asarray(jacobian["total"]).tolist(),
        "jacobian_per_block": np.asarray(jacobian["per_block"]).tolist(),
    }
    if getattr(model, "name", "") != "lm":
        result["paths"] = diagnostics.path_gradients(model, x, y, samples=2)["gradient_per_path"].tolist()
    return result


@pytest.mark.parametrize("other", OTHERS)
def test_the_differentiating_instruments_agree_across_backends(tmp_path, other):
    """gradient_norms, jacobian_norm and path_gradients: each backend's own autodiff, the same numbers."""
    if importlib.util.find_spec(BACKEND_MODULES[other]) is None:
        pytest.skip(f"{other} is not installed (pip install -e '.[backends]')")
    if keras.backend.backend() == "torch":
        pytest.skip("compared from the JAX and TensorFlow sessions (.ci/run's JAX job covers all three)")
    rng = np.random.default_rng(1)
    models = {
        "resnet": (cifar_resnet(8, block=rk.blocks.preact(), width=4, input_shape=(8, 8, 3), name="resnet"),
                   rng.normal(size=(4, 8, 8, 3)).astype("float32"), rng.integers(0, 10, 4)),
        "lm": (transformer_lm(11, 8, 2, embed_dim=16, num_heads=2, norm_position="post", name="lm"),
               rng.integers(0, 11, (4, 8)).astype("int32"), rng.integers(0, 11, (4, 8))),
    }
    here = {}
    for name, (model, x, y) in models.items():
        model.save(tmp_path / f"{name}.keras")
        np.savez(tmp_path / f"{name}.npz", x=x, y=y)
        here[name] = _measure(model, x, y)
    stdout = _run_on(other, MEASURE_HEADER + inspect.getsource(_measure) + MEASURE_LOOP, tmp_path)
    there = json.loads(stdout.strip().splitlines()[-1])
    for name in models:
        for key, value in here[name].items():
            np.testing.assert_allclose(there[name][key], value, rtol=2e-3, atol=1e-6,
                                       err_msg=f"{name} {key}: {other} vs {keras.backend.backend()}")
