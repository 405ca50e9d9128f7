"""Shortcut connections of a residual block: the `x` in `y = f(x) + x`.

He et al. 2015 (arXiv 1512.03385), section 3.3: when a block keeps the shape of
its input the shortcut is the identity. When it halves the feature map and
widens the channels, the shortcut must change shape too:

- option A (`PadShortcut`): subsample by the stride and append zero channels.
  Parameter-free, so a residual net has exactly the weights of its plain twin
  (the CIFAR-10 networks of section 4.2).
- option B (`ProjectionShortcut`): a strided 1x1 convolution followed by
  BatchNorm, `x -> BN(W_s x)` (equation 2 of the paper); in an unnormalised
  network (`norm="none"`) the 1x1 convolution alone, `x -> W_s x`.
"""

from typing import Any, Optional

import keras
from keras import layers, ops

from residual_keras import batchnorm
from residual_keras.checks import (
    channel_axis,
    check_choice,
    check_data_format,
    check_image_input,
    check_pair,
    check_positive_int,
    input_channels,
    strided_output_shape,
)
from residual_keras._initializers import clone_initializer
from residual_keras._types import ArrayLike, InitializerLike, IntOrPair, RegularizerLike
from residual_keras._sublayers import SublayersShown

SHORTCUTS = ("A", "B")


@keras.saving.register_keras_serializable(package="residual_keras")
class PadShortcut(layers.Layer):
    """Option A shortcut: subsample by `strides`, then zero-pad the channels.

    `y[:, i, j, :] = concat(zeros, x[:, s*i, s*j, :], zeros)`. The new channels
    are split evenly before and after the old ones, as in the widely used
    reimplementation of the CIFAR ResNets. No trainable weights.

    Args:
        filters: int. Number of output channels; must be >= the input's.
        strides: int or (height, width) pair. Spatial subsampling factor
            (1 keeps the size). Default 1.
        data_format: "channels_last" (batch, height, width, channels) or
            "channels_first" (batch, channels, height, width). Default None:
            `keras.config.image_data_format()`.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).

    Call arguments:
        inputs: float tensor (batch, height, width, channels), or (batch,
            channels, height, width) with `data_format="channels_first"`.

    Example:
        >>> x = keras.random.normal((2, 32, 32, 16))
        >>> PadShortcut(32, strides=2)(x).shape
        (2, 16, 16, 32)
    """

    def __init__(self, filters: int, strides: IntOrPair = 1, data_format: Optional[str] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.filters = check_positive_int("filters", filters)
        self.strides = check_pair("strides", strides)
        self.data_format = check_data_format(data_format, convolves=False)  # slices and pads only

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)
        in_channels = input_channels(input_shape, self.data_format)
        if self.filters < in_channels:
            raise ValueError(
                f"PadShortcut (option A) can only add channels: input has "
                f"{in_channels} channels but filters={self.filters}. Use "
                f"shortcut='B' (a 1x1 projection) to reduce channels."
            )
        extra = self.filters - in_channels
        self._pad_before = extra // 2
        self._pad_after = extra - extra // 2

    def call(self, inputs: ArrayLike) -> Any:
        step_height, step_width = self.strides
        padding = [[0, 0], [0, 0], [0, 0], [0, 0]]
        if self.data_format == "channels_last":
            x = inputs[:, ::step_height, ::step_width, :]  # (B, H/s, W/s, C)
        else:
            x = inputs[:, :, ::step_height, ::step_width]  # (B, C, H/s, W/s)
        if self._pad_before or self._pad_after:
            padding[channel_axis(self.data_format)] = [self._pad_before, self._pad_after]
            x = ops.pad(x, padding)
        return x

    def compute_output_shape(self, input_shape):
        return strided_output_shape(input_shape, self.strides, self.filters, self.data_format)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"filters": self.filters, "strides": self.strides, "data_format": self.data_format}
        )
        return config


@keras.saving.register_keras_serializable(package="residual_keras")
class ProjectionShortcut(SublayersShown, layers.Layer):
    """Option B shortcut: `x -> BN(Conv1x1_stride(x))`, or `Conv1x1_stride(x)` with `norm="none"`.

    Args:
        filters: int. Number of output channels.
        strides: int or (height, width) pair. Stride of the 1x1 convolution.
            Default 1.
        kernel_initializer: initializer of the 1x1 kernel. Default "he_normal".
        kernel_regularizer: optional regularizer of the 1x1 kernel.
        norm_momentum: float. BatchNorm moving-average momentum (Keras
            convention: 0.9 equals PyTorch's momentum=0.1). Default 0.9.
        norm_epsilon: float. BatchNorm epsilon. Default 1e-5.
        norm: "batchnorm" or "none" (no BatchNorm after the convolution).
            Default "batchnorm".
        data_format: "channels_last" or "channels_first". Default None:
            `keras.config.image_data_format()`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor (batch, height, width, channels), or (batch,
            channels, height, width) with `data_format="channels_first"`.
        training: bool or None. The projection's BatchNorm uses the batch's
            statistics when True. Default None: Keras' learning phase.

    Example:
        >>> x = keras.random.normal((2, 32, 32, 16))
        >>> ProjectionShortcut(32, strides=2)(x).shape
        (2, 16, 16, 32)
    """

    def __init__(
        self,
        filters: int,
        strides: IntOrPair = 1,
        kernel_initializer: InitializerLike = "he_normal",
        kernel_regularizer: RegularizerLike = None,
        norm_momentum: float = 0.9,
        norm_epsilon: float = 1e-5,
        norm: str = "batchnorm",
        data_format: Optional[str] = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.filters = check_positive_int("filters", filters)
        self.strides = check_pair("strides", strides)
        self.data_format = check_data_format(data_format)
        self.norm_kind = check_choice("norm", norm, ("batchnorm", "none"))
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.norm_momentum = norm_momentum
        self.norm_epsilon = norm_epsilon

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)
        self.conv = layers.Conv2D(
            self.filters,
            1,
            strides=self.strides,
            padding="same",
            data_format=self.data_format,
            use_bias=False,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            kernel_regularizer=self.kernel_regularizer,
            dtype=self.dtype_policy,
            name="conv",
        )
        self.conv.build(input_shape)
        self.norm = None
        if self.norm_kind == "batchnorm":
            self.norm = batchnorm.BatchNormalization(
                axis=channel_axis(self.data_format),
                momentum=self.norm_momentum,
                epsilon=self.norm_epsilon,
                dtype=self.dtype_policy,
                name="norm",
            )
            self.norm.build(self.conv.compute_output_shape(input_shape))

    def call(self, inputs: ArrayLike, training: Optional[bool] = None) -> Any:
        x = self.conv(inputs)
        return x if self.norm is None else self.norm(x, training=training)

    def compute_output_shape(self, input_shape):
        return strided_output_shape(input_shape, self.strides, self.filters, self.data_format)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "strides": self.strides,
                "data_format": self.data_format,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "kernel_regularizer": keras.regularizers.serialize(
                    self.kernel_regularizer
                ),
                "norm_momentum": self.norm_momentum,
                "norm_epsilon": self.norm_epsilon,
                "norm": self.norm_kind,
            }
        )
        return config


def needs_projection(input_shape, filters, strides, data_format="channels_last"):
    """True when a block with `filters` and `strides` changes the input's shape."""
    return check_pair("strides", strides) != (1, 1) or input_channels(input_shape, data_format) != filters


def make_shortcut(kind, input_shape, filters, strides, dtype=None, data_format="channels_last",
                  **projection_kwargs):
    """The shortcut layer a block needs, or None for the identity.

    Args:
        kind: "A" (zero-pad, parameter-free) or "B" (1x1 projection).
        input_shape: the block's input shape.
        filters: the block's output channels.
        strides: the block's stride (an int or a (height, width) pair).
        dtype: dtype policy of the new layer.
        data_format: "channels_last" or "channels_first".
        **projection_kwargs: passed to `ProjectionShortcut` for option B.
    """
    check_choice("shortcut", kind, SHORTCUTS)
    if not needs_projection(input_shape, filters, strides, data_format):
        return None
    if kind == "A":
        return PadShortcut(filters, strides, data_format=data_format, dtype=dtype, name="shortcut")
    return ProjectionShortcut(
        filters, strides, data_format=data_format, dtype=dtype, name="shortcut", **projection_kwargs
    )
