"""Every instrument measures in float32: TensorFloat-32 off while it runs, the setting put back after.

On a CPU TensorFloat-32 does not exist, so these tests read the backend's
switch itself: a layer inside the measured model records it while the
instrument runs. Why: on an H100, with TensorFloat-32, `jacobian_norm` did
not converge on JAX and PyTorch (benchmarks/NOTES.md, "GPU: the library's
tests on an H100"; the switch's effect there is not measured yet:
benchmarks/tf32_check.py).
"""

import numpy as np
import pytest

import keras
import residual_keras as rk
from keras import layers
from residual_keras.diagnostics import (
    TrainingDynamics,
    activation_norms,
    full_float32,
    gradient_norms,
    jacobian_norm,
    stream_contributions,
)

BACKEND = keras.backend.backend()


def tf32_setting():
    """The backend's TensorFloat-32 switch, as a comparable value."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.config.experimental.tensor_float_32_execution_enabled()
    if BACKEND == "jax":
        import jax

        return jax.config.jax_default_matmul_precision
    import torch

    return torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision


FULL = {"tensorflow": False, "jax": "highest", "torch": ("ieee", "ieee")}[BACKEND]


@pytest.fixture
def tf32_allowed():
    """The backend set as it is on a GPU by default (TensorFloat-32 allowed); the original put back after."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        before = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(True)
        yield True
        tf.config.experimental.enable_tensor_float_32_execution(before)
    elif BACKEND == "jax":
        import jax

        with jax.default_matmul_precision("default"):
            yield "default"
    else:
        import torch

        before = tf32_setting()
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        torch.backends.cudnn.conv.fp32_precision = "tf32"
        yield ("tf32", "tf32")
        torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = before


class Probe(layers.Layer):
    """The identity, recording the TensorFloat-32 switch every time it is called (traced calls too)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen = []

    def call(self, x):
        self.seen.append(tf32_setting())
        return x


def _model():
    inputs = keras.Input((6,))
    x = layers.Dense(8, name="stem")(inputs)
    probe = Probe(name="probe")
    x = rk.Residual(keras.Sequential([layers.Dense(8, activation="relu"), probe]), name="block1")(x)
    x = rk.Residual(layers.Dense(8), name="block2")(x)
    model = keras.Model(inputs, layers.Dense(3, name="logits")(x))
    rng = np.random.default_rng(0)
    return model, probe, rng.normal(size=(4, 6)).astype("float32"), np.arange(4) % 3


@pytest.mark.parametrize("measure", [
    lambda model, x, y: activation_norms(model, x),
    lambda model, x, y: gradient_norms(model, x, y),
    lambda model, x, y: jacobian_norm(model, x, num_iterations=3),
    lambda model, x, y: stream_contributions(model, x),
], ids=["activation_norms", "gradient_norms", "jacobian_norm", "stream_contributions"])
def test_an_instrument_runs_without_tensorfloat32_and_puts_the_setting_back(tf32_allowed, measure):
    model, probe, x, y = _model()
    probe.seen.clear()
    measure(model, x, y)
    assert probe.seen, "the instrument never ran the block the probe sits in"
    assert set(map(repr, probe.seen)) == {repr(FULL)}
    assert tf32_setting() == tf32_allowed


def test_training_dynamics_records_without_tensorfloat32(tf32_allowed):
    model, probe, x, y = _model()
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    dynamics = TrainingDynamics(x, y)
    model.fit(x, y, epochs=1, verbose=0)  # traced: the probe records at trace time, in the training setting
    probe.seen.clear()
    dynamics.set_model(model)
    dynamics.on_epoch_end(0)
    assert probe.seen and set(map(repr, probe.seen)) == {repr(FULL)}
    assert tf32_setting() == tf32_allowed


def test_the_setting_is_put_back_when_the_block_raises(tf32_allowed):
    with pytest.raises(RuntimeError, match="inside"):
        with full_float32():
            assert tf32_setting() == FULL
            raise RuntimeError("inside")
    assert tf32_setting() == tf32_allowed
