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
arguments and their checks, the shortcut, the config; `PreActBasicBlock`
in preact_blocks.py builds on it too); each block below builds its branch
`f(x)` and writes its addition in its own `call`.
"""

import functools
from typing import Any, Optional

import keras
import numpy as np

from residual_keras.checks import (
    check_bool,
    check_choice,
    check_data_format,
    check_image_input,
    check_pair,
    check_positive_int,
    strided_output_shape,
)
from residual_keras._conv_layers import batch_norm, conv2d
from residual_keras._initializers import clone_initializer
from residual_keras.steps import BlockLayer, ResidualStep
from residual_keras._types import Activation, ArrayLike, InitializerLike, IntOrPair, RegularizerLike
from residual_keras.shortcuts import SHORTCUTS, make_shortcut
from residual_keras._spellings import CONV_BLOCK, refuse_other_spellings

NORMS = ("batchnorm", "none")


class ConvBlockBase(BlockLayer):
    """The arguments, shortcut and config every CIFAR ResNet block shares (PreActBasicBlock's too).

    Subclasses build their branch in `build_branch(input_shape)`, write
    `branch(x)` (the residual function f), and write their residual in
    `call` with `shortcut_path(x)` (and `residual_steps`, the same
    addition for the instruments). `output_channels` is `filters` unless a
    subclass says otherwise.
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

    def _conv(self, name, filters, kernel_size, strides, input_shape, initializer=None):
        """A branch convolution: no bias before a BatchNorm, a bias in an unnormalised block."""
        initializer = initializer or clone_initializer(self.kernel_initializer)
        return conv2d(self, name, filters, kernel_size, strides, input_shape, initializer,
                      use_bias=self.norm == "none")

    def _norm(self, name, input_shape, gamma_initializer="ones"):
        """A branch BatchNorm, or None in an unnormalised block."""
        return None if self.norm == "none" else batch_norm(self, name, input_shape, gamma_initializer)

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)
        self.build_branch(input_shape)
        self.shortcut_layer = None
        if self.residual:
            self.shortcut_layer = make_shortcut(
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
            if self.shortcut_layer is not None:
                self.shortcut_layer.build(input_shape)

    def build_branch(self, input_shape):
        raise NotImplementedError

    def branch(self, inputs, training=None):
        """The residual function `f(x)`."""
        raise NotImplementedError

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


class _ConvBlock(ConvBlockBase):
    """What `BasicBlock` and `BottleneckBlock` share: `activation(f(x) + shortcut(x))`.

    Subclasses create their branch's conv/BN pairs in `build_branch()` with
    `self._conv_bn(...)`, compute the branch in `branch()` and write the
    addition in `call()`. The arguments every CIFAR block takes are checked
    in `ConvBlockBase` (above).
    """

    def __init__(
        self,
        filters: int,
        strides: IntOrPair = 1,
        *,
        final_activation: bool = True,
        zero_gamma: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(filters, strides, **kwargs)
        self.final_activation = check_bool(
            "final_activation", final_activation, " (the function itself is `activation`)"
        )
        if zero_gamma and not self.residual:
            raise ValueError(
                "zero_gamma=True needs residual=True: without a shortcut the "
                "block would output activation(0) for every input."
            )
        if zero_gamma and self.norm == "none":
            raise ValueError(
                "zero_gamma=True needs norm='batchnorm': without BatchNorm there "
                "is no gamma (Fixup, or PreActBasicBlock(zero_last_conv=True), "
                "start an unnormalised branch at 0)."
            )
        self.zero_gamma = bool(zero_gamma)

    def _conv_bn(self, name, filters, kernel_size, strides, input_shape, zero_gamma=False):
        """Creates and builds `Conv2D(no bias) -> BatchNorm`; returns the pair and output shape.

        With `norm="none"` the pair is `(Conv2D with bias, None)`.
        """
        conv, output_shape = self._conv(f"{name}_conv", filters, kernel_size, strides, input_shape)
        norm = self._norm(f"{name}_norm", output_shape, "zeros" if zero_gamma else "ones")
        return (conv, norm), output_shape

    @staticmethod
    def _conv_norm(conv, norm, x, training):
        """`norm(conv(x))`, or `conv(x)` in an unnormalised block."""
        x = conv(x)
        return x if norm is None else norm(x, training=training)

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
        """Mean |gamma| of the branch's last BatchNorm with zero_gamma=True (0 at first), else None.

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
class BasicBlock(_ConvBlock):
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

    def build_branch(self, input_shape):
        (self.conv1, self.norm1), shape = self._conv_bn(
            "branch1", self.filters, self.kernel_size, self.strides, input_shape
        )
        (self.conv2, self.norm2), _ = self._conv_bn(
            "branch2", self.filters, self.kernel_size, 1, shape, zero_gamma=self.zero_gamma
        )

    @property
    def last_norm(self):
        """The branch's last BatchNorm (zero_gamma starts its gamma at 0)."""
        return self.norm2

    def branch(self, inputs, training=None):
        """f(x) = BN(conv2(ReLU(BN(conv1(x)))))."""
        x = self.activation(self._conv_norm(self.conv1, self.norm1, inputs, training))
        return self._conv_norm(self.conv2, self.norm2, x, training)

    def call(self, inputs: ArrayLike, training: Optional[bool] = None) -> Any:
        update = self.branch(inputs, training)  # f(x)
        y = self.shortcut_path(inputs, training) + update if self.residual else update  # x + f(x); plain: f(x)
        return self.activation(y) if self.final_activation else y  # ReLU(x + f(x)), He et al. 2015


@keras.saving.register_keras_serializable(package="residual_keras")
class BottleneckBlock(_ConvBlock):
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

    def __init__(self, filters: int, strides: IntOrPair = 1, *, expansion: int = 4, **kwargs) -> None:
        super().__init__(filters, strides, **kwargs)
        self.expansion = check_positive_int("expansion", expansion)

    @property
    def output_channels(self):
        return self.filters * self.expansion

    def build_branch(self, input_shape):
        (self.conv1, self.norm1), shape = self._conv_bn(
            "branch1", self.filters, 1, 1, input_shape
        )
        (self.conv2, self.norm2), shape = self._conv_bn(
            "branch2", self.filters, self.kernel_size, self.strides, shape
        )
        (self.conv3, self.norm3), _ = self._conv_bn(
            "branch3", self.output_channels, 1, 1, shape, zero_gamma=self.zero_gamma
        )

    @property
    def last_norm(self):
        """The branch's last BatchNorm (zero_gamma starts its gamma at 0)."""
        return self.norm3

    def branch(self, inputs, training=None):
        """f(x) = BN(conv3(ReLU(BN(conv2(ReLU(BN(conv1(x)))))))) (1x1, 3x3, 1x1)."""
        x = self.activation(self._conv_norm(self.conv1, self.norm1, inputs, training))
        x = self.activation(self._conv_norm(self.conv2, self.norm2, x, training))
        return self._conv_norm(self.conv3, self.norm3, x, training)

    def call(self, inputs: ArrayLike, training: Optional[bool] = None) -> Any:
        update = self.branch(inputs, training)  # f(x)
        y = self.shortcut_path(inputs, training) + update if self.residual else update  # x + f(x); plain: f(x)
        return self.activation(y) if self.final_activation else y  # ReLU(x + f(x)), He et al. 2015

    def get_config(self):
        config = super().get_config()
        config["expansion"] = self.expansion
        return config


__all__ = ["NORMS", "BasicBlock", "BottleneckBlock", "ConvBlockBase"]
