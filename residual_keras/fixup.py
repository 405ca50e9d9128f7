"""Fixup: training deep residual networks with no normalisation at all.

Zhang, Dauphin and Ma 2019, "Fixup Initialization" (arXiv 1901.09321). Each
basic block is

    out = conv2(ReLU(conv1(x + b1) + b2) + b3) * s + b4
    y   = ReLU(out + shortcut(x))

with four scalar biases `b1..b4` (start 0) and one scalar multiplier `s`
(starts 1). At initialisation `conv2 = 0`, so the branch outputs exactly 0 and
the deep network starts as the identity on its shortcuts; `conv1` is He-normal
(fan-out) scaled by `L^(-1/2)`, L = number of residual blocks, so that the
branches' total contribution stays O(1) once `conv2` moves.

The official code trains the scalars at 1/10 of the learning rate. Keras
optimizers have one learning rate, so `ScalarBias` and `ScalarScale` take a
`learning_rate_multiplier` m and store a variable v with value = sqrt(m) * v.
For SGD with or without momentum (Fixup's optimizer) this is exactly the same
as training the value at m times the learning rate: the gradient reaching v is
sqrt(m) times the value's, and each step of v moves the value by sqrt(m) times
again. (Adaptive optimizers such as Adam rescale gradients per variable, so
there the multiplier has no such meaning.)
"""

import math
from typing import Any, Optional

import keras
from keras import layers, ops

from residual_keras.checks import (
    check_bool,
    check_data_format,
    check_image_input,
    check_pair,
    check_positive_int,
    strided_output_shape,
)
from residual_keras.steps import BlockLayer, ResidualStep
from residual_keras._types import Activation, ArrayLike, IntOrPair, RegularizerLike
from residual_keras.shortcuts import PadShortcut, needs_projection
from residual_keras._spellings import FIXUP_BLOCK, refuse_other_spellings


class _Scalar(layers.Layer):
    """One trainable scalar, stored as v and used as `sqrt(m) * v`."""

    initial_value = 0.0

    def __init__(self, learning_rate_multiplier: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        if not learning_rate_multiplier > 0:
            raise ValueError(
                "learning_rate_multiplier must be > 0, got "
                f"{learning_rate_multiplier!r}."
            )
        self.learning_rate_multiplier = float(learning_rate_multiplier)
        self._factor = math.sqrt(self.learning_rate_multiplier)

    def build(self, input_shape):
        self.variable = self.add_weight(
            name="value",
            shape=(),
            initializer=keras.initializers.Constant(self.initial_value / self._factor),
            trainable=True,
        )

    @property
    def value(self):
        """The scalar the layer applies (the stored variable times sqrt(m))."""
        return self.variable * self._factor

    def _value_for(self, inputs):
        # The variable stays float32 under mixed precision; cast at use.
        return ops.cast(self.value, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["learning_rate_multiplier"] = self.learning_rate_multiplier
        return config


@keras.saving.register_keras_serializable(package="residual_keras")
class ScalarBias(_Scalar):
    """`y = x + b` with one trainable scalar `b`, initialised to 0.

    Args:
        learning_rate_multiplier: float. Train `b` at this multiple of the
            optimizer's learning rate (exact for SGD; see the module
            docstring). Default 1.0.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of any shape.

    Example:
        >>> bias = ScalarBias()
        >>> float(bias(keras.ops.ones((2, 3)))[0, 0])  # b starts at 0
        1.0
    """

    initial_value = 0.0

    def call(self, inputs: ArrayLike) -> Any:
        return inputs + self._value_for(inputs)


@keras.saving.register_keras_serializable(package="residual_keras")
class ScalarScale(_Scalar):
    """`y = s * x` with one trainable scalar `s`, initialised to 1.

    Args:
        learning_rate_multiplier: float. As in `ScalarBias`. Default 1.0.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of any shape.

    Example:
        >>> scale = ScalarScale()
        >>> float(scale(keras.ops.ones((2, 3)))[0, 0])  # s starts at 1
        1.0
    """

    initial_value = 1.0

    def call(self, inputs: ArrayLike) -> Any:
        return inputs * self._value_for(inputs)


@keras.saving.register_keras_serializable(package="residual_keras")
class FixupBasicBlock(BlockLayer):
    """A CIFAR basic block without normalisation, initialised by Fixup.

    `out = conv2(ReLU(conv1(x + b1) + b2) + b3) * s + b4` and
    `y = ReLU(out + shortcut)`, where the shortcut is `x` when the shape is
    kept and, when it changes, `x + b1` subsampled by the stride with zero
    channels appended (the official code's 1x1 average pool with the stride
    and zero concatenation: option A). At initialisation `out == 0`.

    There is no plain twin: with `conv2 = 0` and no shortcut every block would
    output 0. Compare Fixup with BatchNorm residual nets instead.

    Args:
        filters: int. Output channels of both convolutions.
        strides: int or (height, width) pair. Stride of the first
            convolution. Default 1.
        num_blocks: int. L, the number of residual blocks in the whole
            network; scales conv1's initialisation by `L^(-1/2)`.
        kernel_size: int or (height, width) pair. Kernel of both
            convolutions. Default 3.
        activation: the activation inside the branch and after the
            addition. Default "relu".
        final_activation: bool. Apply `activation` after the addition (the
            paper); False gives `out + shortcut`. Default True.
        kernel_regularizer: optional regularizer of the two conv kernels.
        scalar_learning_rate_multiplier: float. Learning-rate multiple of the
            five scalars (the official code uses 0.1). Default 0.1.
        data_format: "channels_last" or "channels_first". Default None:
            `keras.config.image_data_format()`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor (batch, height, width, channels), or (batch,
            channels, height, width) with `data_format="channels_first"`.

    Example:
        >>> x = keras.random.normal((2, 32, 32, 16))
        >>> FixupBasicBlock(32, strides=2, num_blocks=9)(x).shape
        (2, 16, 16, 32)
    """

    def __init__(
        self,
        filters: int,
        strides: IntOrPair = 1,
        *,
        num_blocks: int,
        kernel_size: IntOrPair = 3,
        activation: Activation = "relu",
        final_activation: bool = True,
        kernel_regularizer: RegularizerLike = None,
        scalar_learning_rate_multiplier: float = 0.1,
        data_format: Optional[str] = None,
        **kwargs,
    ) -> None:
        refuse_other_spellings(self.__class__.__name__, kwargs, FIXUP_BLOCK)
        super().__init__(**kwargs)
        self.filters = check_positive_int("filters", filters)
        self.strides = check_pair("strides", strides)
        self.num_blocks = check_positive_int("num_blocks", num_blocks)
        self.kernel_size = check_pair("kernel_size", kernel_size)
        self.activation = keras.activations.get(activation)
        self.final_activation = check_bool(
            "final_activation", final_activation, " (the function itself is `activation`)"
        )
        self.data_format = check_data_format(data_format)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.scalar_learning_rate_multiplier = scalar_learning_rate_multiplier

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)

        def scalar(cls, name):
            layer = cls(
                self.scalar_learning_rate_multiplier,
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(())
            return layer

        def conv(name, strides, kernel_initializer, shape):
            layer = layers.Conv2D(
                self.filters,
                self.kernel_size,
                strides=strides,
                padding="same",
                data_format=self.data_format,
                use_bias=False,
                kernel_initializer=kernel_initializer,
                kernel_regularizer=self.kernel_regularizer,
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(shape)
            return layer, layer.compute_output_shape(shape)

        self.bias1 = scalar(ScalarBias, "bias1")
        # He-normal with fan-out, times L^(-1/2): variance 2 / fan_out / L.
        he_scaled = keras.initializers.VarianceScaling(
            scale=2.0 / self.num_blocks, mode="fan_out", distribution="untruncated_normal"
        )
        self.conv1, shape = conv("conv1", self.strides, he_scaled, input_shape)
        self.bias2 = scalar(ScalarBias, "bias2")
        self.bias3 = scalar(ScalarBias, "bias3")
        self.conv2, _ = conv("conv2", 1, "zeros", shape)  # the branch starts at exactly 0
        self.scale = scalar(ScalarScale, "scale")
        self.bias4 = scalar(ScalarBias, "bias4")
        self.shortcut_layer = None
        if needs_projection(input_shape, self.filters, self.strides, self.data_format):
            self.shortcut_layer = PadShortcut(
                self.filters, self.strides, data_format=self.data_format, dtype=self.dtype_policy,
                name="shortcut",
            )
            self.shortcut_layer.build(input_shape)

    def branch(self, inputs):
        """The residual function, exactly 0 at initialisation."""
        x = self.conv1(self.bias1(inputs))
        x = self.activation(self.bias2(x))
        x = self.conv2(self.bias3(x))
        return self.bias4(self.scale(x))

    def shortcut_path(self, inputs):
        """shortcut(x): the identity, or option A (after the first scalar bias) where the shape changes."""
        if self.shortcut_layer is None:
            return inputs
        return self.shortcut_layer(self.bias1(inputs))

    def call(self, inputs: ArrayLike) -> Any:
        y = self.shortcut_path(inputs) + self.branch(inputs)  # x + f(x), f exactly 0 at initialisation
        return self.activation(y) if self.final_activation else y  # ReLU(x + f(x))

    def residual_steps(self, training: Optional[bool] = False) -> list[ResidualStep]:
        """For the instruments, the addition `call` writes: one step, `ReLU(shortcut(x) + f(x))`."""
        return [ResidualStep("", branch=self.branch, shortcut=self.shortcut_path,
                             post=self.activation if self.final_activation else None, training=training)]

    def identity_scale(self):
        """The branch's scale s (1 at initialisation; the branch is 0 because conv2 is)."""
        return float(ops.convert_to_numpy(self.scale.value))

    def compute_output_shape(self, input_shape):
        return strided_output_shape(input_shape, self.strides, self.filters, self.data_format)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "strides": self.strides,
                "num_blocks": self.num_blocks,
                "kernel_size": self.kernel_size,
                "activation": keras.activations.serialize(self.activation),
                "final_activation": self.final_activation,
                "data_format": self.data_format,
                "kernel_regularizer": keras.regularizers.serialize(
                    self.kernel_regularizer
                ),
                "scalar_learning_rate_multiplier": self.scalar_learning_rate_multiplier,
            }
        )
        return config
