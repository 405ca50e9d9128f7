"""XLA detection through Keras' public state, on models where Keras keeps XLA and where it falls back."""

import warnings

import numpy as np

import keras
from tracks.common.xla import xla_step_ran


class NoXLA(keras.layers.Layer):
    """A layer that says it cannot be compiled by XLA (as some Keras layers do)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_jit = False  # Layer.__init__ sets True

    def call(self, x):
        return x


def _fit(model, jit_compile):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.compile("sgd", "mse", jit_compile=jit_compile)
    model.fit(np.zeros((4, 3), "float32"), np.zeros((4, 2), "float32"), epochs=1, verbose=0)
    return [str(warning.message) for warning in caught]


def _model(*extra):
    inputs = keras.Input((3,))
    x = inputs
    for layer in extra:
        x = layer(x)
    return keras.Model(inputs, keras.layers.Dense(2)(x))


def test_xla_detected_when_it_ran():
    model = _model()
    assert not xla_step_ran(model)  # nothing ran yet
    _fit(model, jit_compile=True)
    assert xla_step_ran(model)
    assert not xla_step_ran(model, "predict")  # predict has not run


def test_keras_falling_back_silently_is_detected():
    model = _model(NoXLA())
    messages = _fit(model, jit_compile=True)
    assert any("doesn't support `jit_compile=True`" in message for message in messages)
    assert not xla_step_ran(model)


def test_xla_off_is_reported_off():
    model = _model()
    _fit(model, jit_compile=False)
    assert not xla_step_ran(model)
