"""ResNet blocks for CIFAR: `y = ReLU(f(x) + shortcut(x))`, and their plain twins.

He et al. 2015 (arXiv 1512.03385), equation 1 and figure 2: a block learns the
residual `f(x)` and adds its input back. `residual=False` gives the "plain"
network of section 4.2 with exactly the same convolutions and no addition,
`y = ReLU(f(x))`, so the two can be compared weight for weight.

`zero_gamma=True` starts the gamma of the branch's last BatchNorm at 0 (Goyal
et al. 2017, "Accurate, Large Minibatch SGD"), so at initialisation
`f(x) = 0` and every block is `ReLU(shortcut(x))`: the deep network starts
out as a shallow one.

`norm="none"` drops every BatchNorm (the convolutions get biases instead):
the unnormalised networks in which a plain stack's product of Jacobians, and
a residual stream's growth, show without BatchNorm rescaling them.

The ReLU after the addition is the original design; its Jacobian is a 0/1
mask, so the identity path is not quite clean. `PreActBasicBlock`
(preact_blocks.py, He et al. 2016) moves it into the branch;
`final_activation=False` drops it, `y = f(x) + shortcut(x)`, as EDSR's
blocks do (Lim et al. 2017, "Enhanced Deep Residual Networks for Single Image
Super-Resolution", which also drop BatchNorm: `norm="none"`).

As in keras-hub and torchvision, `kernel_size`, `activation` and tuple
`strides` are arguments, and `data_format="channels_first"` puts the
channels on axis 1 (the convolutions, the BatchNorms' axis and the
shortcut follow it).

`ConvBlockBase`, at the top, holds what every CIFAR block shares (its
arguments and their checks, its kind of convolution and BatchNorm, the
shortcut, the config; `PreActBasicBlock` in preact_blocks.py builds on it
too). Each block below makes its own layers in `build`, writes its residual
function f in `branch` and its addition in `call`, beside it, as timm's
`BasicBlock` does.
"""

import functools
from typing import Any, Optional

import keras
import numpy as np
from keras import layers

from residual_keras import batchnorm
from residual_keras.checks import (
    channel_axis,
    check_bool,
    check_choice,
    check_data_format,
    check_image_input,
    check_pair,
    check_positive_int,
    strided_output_shape,
)
from residual_keras._initializers import clone_initializer
from residual_keras.steps import BlockLayer, ResidualStep
from residual_keras._types import Activation, ArrayLike, InitializerLike, IntOrPair, RegularizerLike
from residual_keras.shortcuts import SHORTCUTS, make_shortcut
from residual_keras._spellings import CONV_BLOCK, refuse_other_spellings

NORMS = ("batchnorm", "none")


class ConvBlockBase(BlockLayer):
    """What every CIFAR ResNet block shares (PreActBasicBlock's too): its arguments, its kind of layers, its shortcut.

    A block makes its layers in its own `build` with `_conv` and
    `_batch_norm` (in the block's layout, dtype and settings), builds them
    with `_build_in_order` and makes its shortcut with `_shortcut`; it
    writes its residual function f in `branch` and its addition in `call`
    with `shortcut_path(x)` (and `residual_steps`, the same addition for the
    instruments). `output_channels` is `filters` unless a block says
    otherwise.
    """

    def __init__(
        self,
        filters: int,
        strides: IntOrPair = 1,
        *,
        kernel_size: IntOrPair = 3,
        activation: Activation = "relu",
        residual: bool = True,
        shortcut: str = "A",
        norm: str = "batchnorm",
        kernel_initializer: InitializerLike = "he_normal",
        kernel_regularizer: RegularizerLike = None,
        norm_momentum: float = 0.9,
        norm_epsilon: float = 1e-5,
        data_format: Optional[str] = None,
        **kwargs,
    ) -> None:
        refuse_other_spellings(self.__class__.__name__, kwargs, CONV_BLOCK)
        super().__init__(**kwargs)
        self.filters = check_positive_int("filters", filters)
        self.strides = check_pair("strides", strides)
        self.kernel_size = check_pair("kernel_size", kernel_size)
        self.activation = keras.activations.get(activation)
        self.data_format = check_data_format(data_format)
        if not isinstance(residual, bool):
            raise ValueError(f"residual must be True or False, got {residual!r}.")
        self.residual = residual
        self.shortcut = check_choice("shortcut", shortcut, SHORTCUTS)
        self.norm = check_choice("norm", norm, NORMS)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.norm_momentum = norm_momentum
        self.norm_epsilon = norm_epsilon

    @property
    def output_channels(self):
        return self.filters

    def _conv(self, name, filters, kernel_size, strides, kernel_initializer=None):
        """A 'same'-padded `Conv2D` of the block: no bias before a BatchNorm, a bias with `norm="none"`."""
        return layers.Conv2D(
            filters,
            kernel_size,
            strides=strides,
            padding="same",
            data_format=self.data_format,
            use_bias=self.norm == "none",
            kernel_initializer=kernel_initializer or clone_initializer(self.kernel_initializer),
            kernel_regularizer=self.kernel_regularizer,
            dtype=self.dtype_policy,
            name=name,
        )

    def _batch_norm(self, name, gamma_initializer="ones"):
        """A BatchNorm over the block's channel axis (residual_keras.batchnorm's), or None with `norm="none"`."""
        if self.norm == "none":
            return None
        return batchnorm.BatchNormalization(
            axis=channel_axis(self.data_format),
            momentum=self.norm_momentum,
            epsilon=self.norm_epsilon,
            gamma_initializer=gamma_initializer,
            dtype=self.dtype_policy,
            name=name,
        )

    @staticmethod
    def _build_in_order(input_shape, *sublayers):
        """Builds each layer (None: no layer) on the shape the one before it gives, in the order f applies them."""
        shape = input_shape
        for layer in sublayers:
            if layer is not None:
                layer.build(shape)
                shape = layer.compute_output_shape(shape)

    def _shortcut(self, input_shape):
        """The built shortcut layer: option A or B where the shape changes; None for the identity and the plain twin."""
        if not self.residual:
            return None
        shortcut = make_shortcut(
            self.shortcut,
            input_shape,
            self.output_channels,
            self.strides,
            dtype=self.dtype_policy,
            data_format=self.data_format,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            kernel_regularizer=self.kernel_regularizer,
            norm_momentum=self.norm_momentum,
            norm_epsilon=self.norm_epsilon,
            norm=self.norm,
        )
        if shortcut is not None:
            shortcut.build(input_shape)
        return shortcut

    def shortcut_path(self, inputs, training=None):
        """shortcut(x): the identity, or option A/B where the shape changes."""
        if self.shortcut_layer is None:
            return inputs
        return self.shortcut_layer(inputs, training=training)

    def compute_output_shape(self, input_shape):
        return strided_output_shape(input_shape, self.strides, self.output_channels, self.data_format)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "strides": self.strides,
                "kernel_size": self.kernel_size,
                "activation": keras.activations.serialize(self.activation),
                "data_format": self.data_format,
                "residual": self.residual,
                "shortcut": self.shortcut,
                "norm": self.norm,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "norm_momentum": self.norm_momentum,
                "norm_epsilon": self.norm_epsilon,
            }
        )
        return config


def _checked_zero_gamma(zero_gamma, residual, norm):
    """`zero_gamma` as a bool; `ValueError` where no last gamma can start the block at `ReLU(shortcut(x))`."""
    if zero_gamma and not residual:
        raise ValueError(
            "zero_gamma=True needs residual=True: without a shortcut the "
            "block would output activation(0) for every input."
        )
    if zero_gamma and norm == "none":
        raise ValueError(
            "zero_gamma=True needs norm='batchnorm': without BatchNorm there "
            "is no gamma (Fixup, or PreActBasicBlock(zero_last_conv=True), "
            "start an unnormalised branch at 0)."
        )
    return bool(zero_gamma)


@keras.saving.register_keras_serializable(package="residual_keras")
class BasicBlock(ConvBlockBase):
    """The two-layer block of the CIFAR ResNets (He et al. 2015, figure 2).

    `f(x) = BN(conv3x3(ReLU(BN(conv3x3_stride(x)))))` and
    `y = ReLU(f(x) + shortcut(x))`, or `y = ReLU(f(x))` when `residual=False`.

    Args:
        filters: int. Output channels of both convolutions.
        strides: int or (height, width) pair. Stride of the first
            convolution (2 halves the map). Default 1.
        kernel_size: int or (height, width) pair. Kernel of both
            convolutions. Default 3.
        activation: the activation inside the branch and after the
            addition (a name or a callable). Default "relu".
        final_activation: bool. Apply `activation` after the addition,
            `ReLU(f(x) + shortcut(x))` (He et al. 2015). False gives
            `f(x) + shortcut(x)`, as EDSR's blocks (with `norm="none"`).
            Default True.
        residual: bool. Add the shortcut (True) or build the plain twin
            with the same convolutions and no addition (False). Default True.
        shortcut: "A" (subsample + zero-pad channels, parameter-free) or "B"
            (1x1 conv + BN projection). Used only where the shape changes;
            elsewhere the shortcut is the identity. Default "A".
        zero_gamma: bool. Start the last BatchNorm's gamma at 0 so the block
            is `ReLU(shortcut(x))` at initialisation. Default False.
        norm: "batchnorm" (the paper) or "none" (no normalisation; the
            convolutions get biases). Default "batchnorm".
        kernel_initializer: initializer of the conv kernels. Default "he_normal".
        kernel_regularizer: optional regularizer of the conv kernels.
        norm_momentum: float. BatchNorm momentum (Keras convention). Default 0.9.
        norm_epsilon: float. BatchNorm epsilon. Default 1e-5.
        data_format: "channels_last" (batch, height, width, channels) or
            "channels_first" (batch, channels, height, width). Default None:
            `keras.config.image_data_format()`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor (batch, height, width, channels), or (batch,
            channels, height, width) with `data_format="channels_first"`.
        training: bool or None. BatchNorm uses the batch's statistics (and
            updates its moving ones) when True, the moving ones when False.
            Default None: Keras' learning phase.

    Example:
        >>> x = keras.random.normal((2, 32, 32, 16))
        >>> BasicBlock(32, strides=2)(x).shape
        (2, 16, 16, 32)
        >>> # EDSR's block (Lim et al. 2017): no BatchNorm, nothing after the addition
        >>> BasicBlock(16, norm="none", final_activation=False)(x).shape
        (2, 32, 32, 16)
    """

    def __init__(self, filters: int, strides: IntOrPair = 1, *, final_activation: bool = True,
                 zero_gamma: bool = False, **kwargs) -> None:
        super().__init__(filters, strides, **kwargs)  # the arguments every CIFAR block takes (ConvBlockBase)
        self.final_activation = check_bool(
            "final_activation", final_activation, " (the function itself is `activation`)"
        )
        self.zero_gamma = _checked_zero_gamma(zero_gamma, self.residual, self.norm)

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)
        self.conv1 = self._conv("branch1_conv", self.filters, self.kernel_size, self.strides)  # the block's stride
        self.norm1 = self._batch_norm("branch1_norm")  # None with norm="none"
        self.conv2 = self._conv("branch2_conv", self.filters, self.kernel_size, 1)
        self.norm2 = self._batch_norm("branch2_norm", "zeros" if self.zero_gamma else "ones")
        self._build_in_order(input_shape, self.conv1, self.norm1, self.conv2, self.norm2)
        self.shortcut_layer = self._shortcut(input_shape)  # None: the identity (or the plain twin)

    @property
    def last_norm(self):
        """norm2, whose gamma zero_gamma starts at 0 (a `.keras` file stores its weights under this name)."""
        return self.norm2

    def branch(self, inputs, training=None):
        """The residual function f(x) = BN(conv2(ReLU(BN(conv1(x))))), without the BNs for norm="none"."""
        x = self.conv1(inputs)
        x = x if self.norm1 is None else self.norm1(x, training=training)
        x = self.activation(x)
        x = self.conv2(x)
        return x if self.norm2 is None else self.norm2(x, training=training)

    def call(self, inputs: ArrayLike, training: Optional[bool] = None) -> Any:
        update = self.branch(inputs, training)  # f(x)
        y = self.shortcut_path(inputs, training) + update if self.residual else update  # x + f(x); plain: f(x)
        return self.activation(y) if self.final_activation else y  # ReLU(x + f(x)), He et al. 2015

    def residual_steps(self, training: Optional[bool] = False) -> list[ResidualStep]:
        """For the instruments, the addition `call` writes: one step, `ReLU(shortcut(x) + f(x))`.

        `post` is the final activation (nothing with final_activation=False),
        and the plain twin's step has no shortcut: `ReLU(f(x))`.
        """
        return [ResidualStep(
            "",
            branch=functools.partial(self.branch, training=training),
            shortcut=functools.partial(self.shortcut_path, training=training) if self.residual else None,
            post=self.activation if self.final_activation else None,
            training=training,
        )]

    def identity_scale(self):
        """Mean |gamma| of the last BatchNorm with zero_gamma=True (0 at first), else None.

        The block starts as `ReLU(shortcut(x))`: the spectral norm of its
        Jacobian is 1, but it passes the gradient only where the stream is
        positive, so a zero-gamma network's gradient gain is below 1 (the
        gradient on the stream's zero entries is lost).
        """
        if not self.zero_gamma:
            return None
        return float(np.mean(np.abs(keras.ops.convert_to_numpy(self.last_norm.gamma))))

    def get_config(self):
        config = super().get_config()
        config.update({"final_activation": self.final_activation, "zero_gamma": self.zero_gamma})
        return config


@keras.saving.register_keras_serializable(package="residual_keras")
class BottleneckBlock(ConvBlockBase):
    """The three-layer bottleneck block (He et al. 2015, figure 5 right).

    `f(x) = BN(conv1x1(ReLU(BN(conv3x3_stride(ReLU(BN(conv1x1(x))))))))` with
    `filters` channels inside and `filters * expansion` channels out;
    `y = ReLU(f(x) + shortcut(x))`, or `y = ReLU(f(x))` when `residual=False`.
    The stride sits on the 3x3 convolution (as in torchvision and timm).

    Args:
        filters: int. Channels of the 1x1 and 3x3 convolutions inside.
        strides: int or (height, width) pair. Stride of the 3x3 convolution.
            Default 1.
        expansion: int. Output channels are `filters * expansion`. Default 4.
        kernel_size: int or pair. Kernel of the middle convolution (the
            other two are 1x1). Default 3.
        activation: as in `BasicBlock`; so are `final_activation`,
            `residual`, `shortcut`, `zero_gamma`, `norm`, `kernel_initializer`,
            `kernel_regularizer`, `norm_momentum`, `norm_epsilon` and
            `data_format`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor (batch, height, width, channels), or (batch,
            channels, height, width) with `data_format="channels_first"`.
        training: bool or None. BatchNorm uses the batch's statistics (and
            updates its moving ones) when True, the moving ones when False.
            Default None: Keras' learning phase.

    Example:
        >>> x = keras.random.normal((2, 16, 16, 64))
        >>> BottleneckBlock(16)(x).shape
        (2, 16, 16, 64)
    """

    def __init__(self, filters: int, strides: IntOrPair = 1, *, expansion: int = 4, final_activation: bool = True,
                 zero_gamma: bool = False, **kwargs) -> None:
        super().__init__(filters, strides, **kwargs)  # the arguments every CIFAR block takes (ConvBlockBase)
        self.final_activation = check_bool(
            "final_activation", final_activation, " (the function itself is `activation`)"
        )
        self.zero_gamma = _checked_zero_gamma(zero_gamma, self.residual, self.norm)
        self.expansion = check_positive_int("expansion", expansion)

    @property
    def output_channels(self):
        return self.filters * self.expansion

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)
        self.conv1 = self._conv("branch1_conv", self.filters, 1, 1)  # 1x1: into the bottleneck
        self.norm1 = self._batch_norm("branch1_norm")  # None with norm="none"
        self.conv2 = self._conv("branch2_conv", self.filters, self.kernel_size, self.strides)  # the block's stride
        self.norm2 = self._batch_norm("branch2_norm")
        self.conv3 = self._conv("branch3_conv", self.output_channels, 1, 1)  # 1x1: out to filters * expansion
        self.norm3 = self._batch_norm("branch3_norm", "zeros" if self.zero_gamma else "ones")
        self._build_in_order(input_shape, self.conv1, self.norm1, self.conv2, self.norm2, self.conv3, self.norm3)
        self.shortcut_layer = self._shortcut(input_shape)  # None: the identity (or the plain twin)

    @property
    def last_norm(self):
        """norm3, whose gamma zero_gamma starts at 0 (a `.keras` file stores its weights under this name)."""
        return self.norm3

    def branch(self, inputs, training=None):
        """f(x) = BN(conv3(ReLU(BN(conv2(ReLU(BN(conv1(x)))))))) (1x1, 3x3, 1x1), without the BNs for norm="none"."""
        x = self.conv1(inputs)
        x = x if self.norm1 is None else self.norm1(x, training=training)
        x = self.activation(x)
        x = self.conv2(x)
        x = x if self.norm2 is None else self.norm2(x, training=training)
        x = self.activation(x)
        x = self.conv3(x)
        return x if self.norm3 is None else self.norm3(x, training=training)

    def call(self, inputs: ArrayLike, training: Optional[bool] = None) -> Any:
        update = self.branch(inputs, training)  # f(x)
        y = self.shortcut_path(inputs, training) + update if self.residual else update  # x + f(x); plain: f(x)
        return self.activation(y) if self.final_activation else y  # ReLU(x + f(x)), He et al. 2015

    def residual_steps(self, training: Optional[bool] = False) -> list[ResidualStep]:
        """For the instruments, the addition `call` writes, as `BasicBlock.residual_steps`."""
        return [ResidualStep(
            "",
            branch=functools.partial(self.branch, training=training),
            shortcut=functools.partial(self.shortcut_path, training=training) if self.residual else None,
            post=self.activation if self.final_activation else None,
            training=training,
        )]

    def identity_scale(self):
        """Mean |gamma| of the last BatchNorm with zero_gamma=True (0 at first), else None (as `BasicBlock`'s)."""
        if not self.zero_gamma:
            return None
        return float(np.mean(np.abs(keras.ops.convert_to_numpy(self.last_norm.gamma))))

    def get_config(self):
        config = super().get_config()
        config.update({"final_activation": self.final_activation, "zero_gamma": self.zero_gamma,
                       "expansion": self.expansion})
        return config


__all__ = ["NORMS", "BasicBlock", "BottleneckBlock", "ConvBlockBase"]
