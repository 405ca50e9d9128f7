"""What the CIFAR ResNet blocks share: their arguments, their conv/BN layers, the shortcut.

`ConvBlockBase` is the common parent of `BasicBlock` and `BottleneckBlock`
(resnet_blocks.py) and `PreActBasicBlock` (preact_blocks.py). It checks the
arguments every one of them takes, builds the shortcut (identity, option A or
option B where the shape changes) and writes the shared part of the config;
each block builds its own branch `f(x)` and says what follows the addition
(`after_addition`). The residual step `after_addition(shortcut(x) + f(x))`
is stated once, here, and `BlockLayer` (steps.py) derives `call` from it.
"""

from typing import Optional

import keras

from residual_keras.checks import (
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
from residual_keras._types import (
    Activation,
    InitializerLike,
    IntOrPair,
    RegularizerLike,
)
from residual_keras.shortcuts import SHORTCUTS, make_shortcut
from residual_keras._spellings import CONV_BLOCK, refuse_other_spellings

NORMS = ("batchnorm", "none")


class ConvBlockBase(BlockLayer):
    """The arguments, shortcut and config every CIFAR ResNet block shares.

    Subclasses build their branch in `build_branch(input_shape)`, write
    `branch(x)` (the residual function f) and say in `after_addition` what
    follows the addition; `residual_steps` combines them with the shortcut,
    and the call runs that step (`BlockLayer`, steps.py). `output_channels`
    is `filters` unless a subclass says otherwise.
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

    @property
    def after_addition(self):
        """What follows `shortcut(x) + f(x)` (a function), or None for nothing."""
        return None

    def residual_steps(self, training: Optional[bool] = False) -> list[ResidualStep]:
        """One step, `after_addition(shortcut(x) + f(x))` (`after_addition(f(x))` for the plain twin)."""
        return [ResidualStep(
            "",
            branch=lambda x: self.branch(x, training=training),
            shortcut=(lambda x: self.shortcut_path(x, training=training)) if self.residual else None,
            post=self.after_addition,
            training=training,
        )]

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


__all__ = ["NORMS", "ConvBlockBase"]
