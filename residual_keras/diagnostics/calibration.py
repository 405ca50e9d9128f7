"""BatchNorm moving statistics from one batch (`calibrate_batchnorm`)."""

import keras
from keras import ops


def calibrate_batchnorm(model, x):
    """Sets every BatchNorm's moving statistics to those of the batch `x`.

    One forward pass in training mode with momentum 0: afterwards inference
    mode computes on `x` exactly what training mode computes, so per-example
    instruments that run in inference mode (`jacobian_norm`) see a normalised
    network. Only the BatchNorm moving statistics of `model` change.

    Returns:
        The number of BatchNormalization layers calibrated.
    """
    norms = [
        layer
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    momenta = [layer.momentum for layer in norms]
    for layer in norms:
        layer.momentum = 0.0
    try:
        model(ops.convert_to_tensor(x), training=True)
    finally:
        for layer, momentum in zip(norms, momenta):
            layer.momentum = momentum
    return len(norms)
