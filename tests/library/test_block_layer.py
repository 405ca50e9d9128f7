"""`BlockLayer`: a block states its residual once, in `residual_steps`, and its call runs those steps."""

import ast
import inspect
import pathlib

import numpy as np
import pytest

import keras
import residual_keras as rk
from residual_keras.steps import residual_steps, run_steps

PACKAGE = pathlib.Path(rk.__file__).parent


def _classes_defining(*names):
    """Every class in residual_keras/ whose own body defines all of `names`, as 'module.Class'."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                own = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
                if set(names) <= own:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    return found


def test_only_the_generic_base_writes_both_call_and_residual_steps():
    # the library's blocks declare their steps and inherit call: the two cannot drift apart
    assert _classes_defining("call", "residual_steps") == []
    assert _classes_defining("call") and "steps.py:BlockLayer" in _classes_defining("call")


BLOCKS = {
    "BasicBlock": lambda: rk.BasicBlock(8, strides=2, shortcut="B"),
    "BottleneckBlock": lambda: rk.BottleneckBlock(2, expansion=2),
    "PreActBasicBlock": lambda: rk.PreActBasicBlock(4),
    "FixupBasicBlock": lambda: rk.FixupBasicBlock(4, num_blocks=3),
    "Residual": lambda: rk.Residual(keras.layers.Dense(4)),
}


@pytest.mark.parametrize("name", list(BLOCKS))
def test_every_library_block_inherits_the_call_its_steps_give(name):
    block = BLOCKS[name]()
    assert isinstance(block, rk.BlockLayer)
    x = np.random.default_rng(0).standard_normal((2, 8, 8, 4) if name != "Residual" else (3, 4)).astype("float32")
    y = keras.ops.convert_to_numpy(block(x, training=False))
    from_steps = keras.ops.convert_to_numpy(run_steps(residual_steps(block), keras.ops.convert_to_tensor(x)))
    np.testing.assert_allclose(y, from_steps, rtol=1e-6, atol=1e-6)


def test_the_call_takes_the_arguments_of_residual_steps_by_name():
    # Keras reads the call's signature: `training` (default None) and masks each by name, as before the redesign
    parameters = inspect.signature(rk.TransformerBlock.call).parameters
    assert list(parameters)[:7] == ["self", "inputs", "training", "padding_mask", "attention_mask", "mask",
                                    "return_attention_scores"]
    assert parameters["training"].default is None
    assert list(inspect.signature(rk.BasicBlock.call).parameters) == ["self", "inputs", "training"]


def test_training_reaches_the_steps_batchnorm_uses_batch_statistics_only_in_training():
    block = rk.BasicBlock(4)
    x = np.random.default_rng(1).standard_normal((8, 6, 6, 4)).astype("float32") * 3 + 2
    inference = keras.ops.convert_to_numpy(block(x, training=False))
    training = keras.ops.convert_to_numpy(block(x, training=True))
    assert np.max(np.abs(training - inference)) > 1e-2  # batch statistics differ from the moving ones at init
    steps = residual_steps(block, training=True)
    assert all(step.training is True for step in steps)


def test_a_step_with_an_extra_output_makes_the_call_return_it():
    block = rk.TransformerBlock(num_heads=2)
    x = np.random.default_rng(2).standard_normal((2, 5, 8)).astype("float32")
    y, scores = block(x, return_attention_scores=True)
    assert tuple(y.shape) == (2, 5, 8) and tuple(scores.shape) == (2, 2, 5, 5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(y), keras.ops.convert_to_numpy(block(x)), atol=1e-6)


def test_a_subclass_with_its_own_call_keeps_it():
    class Own(rk.BlockLayer):
        def build(self, input_shape):
            self.f = keras.layers.Dense(input_shape[-1])

        def call(self, x):
            return x + 2 * self.f(x)  # not what the steps say: check_residual_steps must catch it

        def residual_steps(self, training=False):
            return [rk.ResidualStep("", branch=self.f)]

    block, x = Own(), np.ones((2, 3), "float32")
    y = keras.ops.convert_to_numpy(block(x))
    np.testing.assert_allclose(y, x + 2 * keras.ops.convert_to_numpy(block.f(x)), atol=1e-6)
    with pytest.raises(ValueError, match="do not compute what the layer computes"):
        rk.check_residual_steps(block, x)


def test_a_block_layer_without_steps_names_the_protocol():
    with pytest.raises(TypeError, match="residual_steps"):
        rk.BlockLayer()(np.ones((2, 3), "float32"))


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="jit_compile=True means torch.compile on PyTorch")
@pytest.mark.parametrize("name", ["BasicBlock", "FixupBasicBlock", "TransformerBlock"])
def test_xla_compiles_the_derived_call(name):
    # Keras silently turns XLA off for a layer that cannot be compiled (model.jit_compile becomes False)
    if name == "TransformerBlock":
        inputs = keras.Input((6, 8))
        x = keras.layers.GlobalAveragePooling1D()(rk.TransformerBlock(num_heads=2)(inputs))
        data = np.random.default_rng(3).standard_normal((4, 6, 8)).astype("float32")
    else:
        inputs = keras.Input((8, 8, 4))
        x = keras.layers.GlobalAveragePooling2D()(BLOCKS[name]()(inputs))
        data = np.random.default_rng(3).standard_normal((4, 8, 8, 4)).astype("float32")
    model = keras.Model(inputs, keras.layers.Dense(2)(x))
    model.compile("sgd", "mse", jit_compile=True)
    history = model.fit(data, np.zeros((4, 2), "float32"), epochs=2, verbose=0)
    assert model.jit_compile is True
    assert all(np.isfinite(history.history["loss"]))
