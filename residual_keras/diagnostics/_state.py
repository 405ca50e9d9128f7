"""Leaving the measured model exactly as it was.

An instrument may run the model in training mode (BatchNorm then updates its
moving statistics, Dropout advances its seed generator), so every
instrument saves the value of every variable of the model (`model.variables`:
weights, BatchNorm statistics, seed-generator states) before it runs and
writes back those that changed. The instruments never touch the optimizer
or the compiled metrics. `calibrate_batchnorm` is the one function meant to
change a model: it keeps only the new BatchNorm statistics.
"""

import contextlib
import functools

import keras
import numpy as np

from residual_keras.diagnostics._precision import full_float32


def _variables(model_or_layers):
    if isinstance(model_or_layers, keras.layers.Layer):
        return list(model_or_layers.variables)
    if isinstance(model_or_layers, (list, tuple)):
        found, seen = [], set()
        for layer in model_or_layers:
            for variable in getattr(layer, "variables", []):
                if id(variable) not in seen:
                    seen.add(id(variable))
                    found.append(variable)
        return found
    return []


@contextlib.contextmanager
def unchanged(model_or_layers, keep=()):
    """Restores every variable of the model (or list of layers) on exit.

    Args:
        model_or_layers: a Keras layer or model, or a list of layers.
        keep: variables whose new values are kept (calibrated statistics).
    """
    saved = [(variable, np.array(keras.ops.convert_to_numpy(variable), copy=True))
             for variable in _variables(model_or_layers)]
    try:
        yield
    finally:
        kept = {id(variable) for variable in keep}
        for variable, value in saved:
            if id(variable) in kept:
                continue
            if not np.array_equal(keras.ops.convert_to_numpy(variable), value):
                variable.assign(value)


@contextlib.contextmanager
def measuring(model_or_layers):
    """What every measurement runs inside: the model (or layers) restored afterwards (`unchanged`), and
    float32 products not done in TensorFloat-32 (`_precision.full_float32`)."""
    with unchanged(model_or_layers), full_float32():
        yield


def instrument(measure):
    """Decorator for every instrument: it runs `measuring` its first argument (model or layers)."""

    @functools.wraps(measure)
    def wrapper(model, *args, **kwargs):
        with measuring(model):
            return measure(model, *args, **kwargs)

    return wrapper
