"""BatchNorm moving statistics from one batch (`calibrate_batchnorm`).

The one function of `residual_keras.diagnostics` meant to change its model:
it sets the BatchNorm moving statistics, and nothing else (seed generators
a training-mode pass advances are written back).
"""

import keras

from residual_keras._types import ArrayLike
from residual_keras.diagnostics import _inputs
from residual_keras.diagnostics._block_search import all_layers
from residual_keras.diagnostics._forward import as_tensors
from residual_keras.diagnostics._state import unchanged


def calibrate_batchnorm(model: keras.Model, x: ArrayLike) -> int:
    """Sets every BatchNorm's moving statistics to those of the batch `x`.

    One forward pass in training mode with momentum 0: afterwards inference
    mode computes on `x` exactly what training mode computes, so per-example
    instruments that run in inference mode (`jacobian_norm`) see a normalised
    network. Only the BatchNorm moving statistics of `model` change (every
    other variable is written back); unlike the instruments, this changes
    the model on purpose. Works on any model shape (BatchNorms in nested
    models and inside layers count).

    Args:
        model: a keras.Model.
        x: a batch of model inputs, or a dataset whose first batch is used.

    Returns:
        The number of BatchNormalization layers calibrated.
    """
    x = as_tensors(_inputs.one_batch(x)[0])
    if not model.built:
        model(x, training=False)  # a subclassed model creates its layers' statistics in its first call
    norms = [layer for layer in all_layers(model) if isinstance(layer, keras.layers.BatchNormalization)]
    statistics = [variable for layer in norms for variable in (layer.moving_mean, layer.moving_variance)]
    momenta = [layer.momentum for layer in norms]
    for layer in norms:
        layer.momentum = 0.0
    try:
        with unchanged(model, keep=statistics):
            model(x, training=True)
    finally:
        for layer, momentum in zip(norms, momenta):
            layer.momentum = momentum
    return len(norms)
