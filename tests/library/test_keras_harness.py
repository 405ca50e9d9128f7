"""Keras' own layer harness (`keras.src.testing.TestCase.run_layer_test`) on every public layer.

A cross-check of the project's harness (tests/layer_checks.py) by the one
keras-hub's tests use: output shape and dtype of eager and symbolic calls,
config round trip, a training step, and `mixed_float16` (output in the
compute dtype, float32 variables; Keras skips it on PyTorch without a GPU).
Slow: about a second a layer.
"""

import inspect

import numpy as np
import pytest

import keras
import residual_keras as rk
from keras.src.testing import TestCase

IMAGES = np.random.default_rng(0).random((2, 8, 8, 4)).astype("float32")
VECTORS = np.random.default_rng(1).standard_normal((4, 6)).astype("float32")
SEQUENCES = np.random.default_rng(2).standard_normal((2, 8, 16)).astype("float32")
TOKENS = np.random.default_rng(3).integers(1, 10, size=(2, 12)).astype("int32")


def _serialized(layer):
    return keras.saving.serialize_keras_object(layer)


@keras.saving.register_keras_serializable(package="tests")
class DampedBlock(rk.BlockLayer):
    """y = x + 0.1 Dense(x): a student's block, its call and its residual steps."""

    def build(self, input_shape):
        self.f = keras.layers.Dense(input_shape[-1], dtype=self.dtype_policy)  # mixed precision too
        self.f.build(input_shape)

    def branch(self, x):
        return 0.1 * self.f(x)

    def call(self, x):
        return x + self.branch(x)

    def residual_steps(self, training=False):
        return [rk.ResidualStep("", branch=self.branch, training=training)]


# The public bases no one builds directly, each tested through a subclass of its own.
ABSTRACT_BASES = {rk.BlockLayer: DampedBlock}

# (layer class, constructor arguments, input, output shape): at least one case per public layer.
CASES = {
    "BlockLayer": (DampedBlock, {}, VECTORS, (4, 6)),
    "BasicBlock": (rk.BasicBlock, {"filters": 4}, IMAGES, (2, 8, 8, 4)),
    "BasicBlock-option-B": (rk.BasicBlock, {"filters": 8, "strides": 2, "shortcut": "B"}, IMAGES, (2, 4, 4, 8)),
    "BottleneckBlock": (rk.BottleneckBlock, {"filters": 2, "expansion": 2}, IMAGES, (2, 8, 8, 4)),
    "FixupBasicBlock": (rk.FixupBasicBlock, {"filters": 8, "strides": 2, "num_blocks": 9}, IMAGES, (2, 4, 4, 8)),
    "PreActBasicBlock": (rk.PreActBasicBlock, {"filters": 4}, IMAGES, (2, 8, 8, 4)),
    "PadShortcut": (rk.PadShortcut, {"filters": 8, "strides": 2}, IMAGES, (2, 4, 4, 8)),
    "ProjectionShortcut": (rk.ProjectionShortcut, {"filters": 8, "strides": 2}, IMAGES, (2, 4, 4, 8)),
    "Residual": (rk.Residual, {"branch": _serialized(keras.layers.Dense(6))}, VECTORS, (4, 6)),
    "Residual-projection-post-ln": (
        rk.Residual, {"branch": _serialized(keras.layers.Dense(3)),
                      "shortcut": _serialized(keras.layers.Dense(3, use_bias=False)),
                      "post": _serialized(keras.layers.LayerNormalization()), "rezero": True},
        VECTORS, (4, 3)),
    "ScalarBias": (rk.ScalarBias, {"learning_rate_multiplier": 0.1}, VECTORS, (4, 6)),
    "ScalarScale": (rk.ScalarScale, {"learning_rate_multiplier": 0.1}, VECTORS, (4, 6)),
    "TokenAndPositionEmbedding": (rk.TokenAndPositionEmbedding,
                                  {"vocab_size": 10, "sequence_length": 12, "embed_dim": 16},
                                  TOKENS, (2, 12, 16)),
    "TransformerBlock": (rk.TransformerBlock, {"num_heads": 4}, SEQUENCES, (2, 8, 16)),
}


def _public_layers():
    return {value for value in vars(rk).values()
            if inspect.isclass(value) and issubclass(value, keras.layers.Layer)}


def test_every_public_layer_has_a_case():
    """A layer exported later without a case here fails this test."""
    tested = {layer_cls for layer_cls, *_ in CASES.values()}
    for base, subclass in ABSTRACT_BASES.items():
        assert issubclass(subclass, base) and subclass in tested
        tested = tested - {subclass} | {base}
    assert _public_layers() == tested


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_keras_run_layer_test(case):
    layer_cls, kwargs, data, expected_shape = CASES[case]
    harness = TestCase(methodName="run_layer_test")
    harness.run_layer_test(
        layer_cls, init_kwargs=kwargs, input_data=data, expected_output_shape=expected_shape,
        run_mixed_precision_check=True,
    )
