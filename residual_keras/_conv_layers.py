"""Built convolution and BatchNorm layers in a block's data format, dtype policy and settings.

The blocks (resnet_blocks.py, preact_blocks.py, fixup.py) and the projection
shortcut (shortcuts.py) make their sublayers here, so that every one of them
follows the owning block's `data_format`, `dtype_policy`,
`kernel_regularizer`, `norm_momentum` and `norm_epsilon` the same way.
"""

from keras import layers

from residual_keras import batchnorm
from residual_keras.checks import channel_axis


def conv2d(owner, name, filters, kernel_size, strides, input_shape, initializer, use_bias=False):
    """A built 'same'-padded `Conv2D` in `owner`'s data format, dtype policy and kernel regularizer.

    Returns the layer and its output shape.
    """
    conv = layers.Conv2D(
        filters,
        kernel_size,
        strides=strides,
        padding="same",
        data_format=owner.data_format,
        use_bias=use_bias,
        kernel_initializer=initializer,
        kernel_regularizer=owner.kernel_regularizer,
        dtype=owner.dtype_policy,
        name=name,
    )
    conv.build(input_shape)
    return conv, conv.compute_output_shape(input_shape)


def batch_norm(owner, name, input_shape, gamma_initializer="ones"):
    """A built `BatchNormalization` over `owner`'s channel axis, with its momentum and epsilon.

    The library's own (residual_keras/batchnorm.py): Keras' layer, with
    TensorFlow's fused kernel on the TensorFlow backend."""
    norm = batchnorm.BatchNormalization(
        axis=channel_axis(owner.data_format),
        momentum=owner.norm_momentum,
        epsilon=owner.norm_epsilon,
        gamma_initializer=gamma_initializer,
        dtype=owner.dtype_policy,
        name=name,
    )
    norm.build(input_shape)
    return norm


__all__ = ["batch_norm", "conv2d"]
