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
(preact_blocks.py, He et al. 2016) moves it into the branch.
"""

import keras
from keras import layers, ops

from residual_keras._checks import (
    check_choice,
    check_image_input,
    check_positive_int,
    strided_output_shape,
)

NORMS = ("batchnorm", "none")
from residual_keras._initializers import clone_initializer
from residual_keras.shortcuts import SHORTCUTS, make_shortcut


class _ConvBlock(layers.Layer):
    """What `BasicBlock` and `BottleneckBlock` share.

    Subclasses create their branch's conv/BN pairs in `build_branch()` with
    `self._conv_bn(...)` and compute the branch in `branch()`; this class adds
    the shortcut and the final ReLU, and handles config and shapes.
    """

    def __init__(
        self,
        filters,
        strides=1,
        *,
        residual=True,
        shortcut="A",
        zero_gamma=False,
        norm="batchnorm",
        kernel_initializer="he_normal",
        kernel_regularizer=None,
        norm_momentum=0.9,
        norm_epsilon=1e-5,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.filters = check_positive_int("filters", filters)
        self.strides = check_positive_int("strides", strides)
        if not isinstance(residual, bool):
            raise ValueError(f"residual must be True or False, got {residual!r}.")
        self.residual = residual
        self.shortcut = check_choice("shortcut", shortcut, SHORTCUTS)
        if zero_gamma and not residual:
            raise ValueError(
                "zero_gamma=True needs residual=True: without a shortcut the "
                "block would output ReLU(0) = 0 for every input."
            )
        self.zero_gamma = bool(zero_gamma)
        self.norm = check_choice("norm", norm, NORMS)
        if zero_gamma and norm == "none":
            raise ValueError(
                "zero_gamma=True needs norm='batchnorm': without BatchNorm there "
                "is no gamma (Fixup, or PreActBasicBlock(zero_init_last=True), "
                "start an unnormalised branch at 0)."
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.norm_momentum = norm_momentum
        self.norm_epsilon = norm_epsilon

    @property
    def output_channels(self):
        return self.filters

    def _conv_bn(self, name, filters, kernel_size, strides, input_shape, zero_gamma=False):
        """Creates and builds `Conv2D(no bias) -> BatchNorm`; returns the pair and output shape.

        With `norm="none"` the pair is `(Conv2D with bias, None)`.
        """
        normalised = self.norm == "batchnorm"
        conv = layers.Conv2D(
            filters,
            kernel_size,
            strides=strides,
            padding="same",
            use_bias=not normalised,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            kernel_regularizer=self.kernel_regularizer,
            dtype=self.dtype_policy,
            name=f"{name}_conv",
        )
        conv.build(input_shape)
        output_shape = conv.compute_output_shape(input_shape)
        if not normalised:
            return (conv, None), output_shape
        norm = layers.BatchNormalization(
            momentum=self.norm_momentum,
            epsilon=self.norm_epsilon,
            gamma_initializer="zeros" if zero_gamma else "ones",
            dtype=self.dtype_policy,
            name=f"{name}_norm",
        )
        norm.build(output_shape)
        return (conv, norm), output_shape

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape)
        self.build_branch(input_shape)
        self.shortcut_layer = None
        if self.residual:
            self.shortcut_layer = make_shortcut(
                self.shortcut,
                input_shape,
                self.output_channels,
                self.strides,
                dtype=self.dtype_policy,
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

    @staticmethod
    def _conv_norm(conv, norm, x, training):
        """`norm(conv(x))`, or `conv(x)` in an unnormalised block."""
        x = conv(x)
        return x if norm is None else norm(x, training=training)

    def branch(self, inputs, training=None):
        """The residual function `f(x)`, before the addition and final ReLU."""
        raise NotImplementedError

    def shortcut_path(self, inputs, training=None):
        """shortcut(x): the identity, or option A/B where the shape changes."""
        if self.shortcut_layer is None:
            return inputs
        return self.shortcut_layer(inputs, training=training)

    def call(self, inputs, training=None):
        residual = self.branch(inputs, training=training)  # f(x)
        if not self.residual:
            return ops.relu(residual)  # the plain twin: ReLU(f(x))
        shortcut = self.shortcut_path(inputs, training=training)
        return ops.relu(residual + shortcut)  # ReLU(f(x) + shortcut(x))

    def compute_output_shape(self, input_shape):
        return strided_output_shape(input_shape, self.strides, self.output_channels)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "strides": self.strides,
                "residual": self.residual,
                "shortcut": self.shortcut,
                "zero_gamma": self.zero_gamma,
                "norm": self.norm,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "kernel_regularizer": keras.regularizers.serialize(
                    self.kernel_regularizer
                ),
                "norm_momentum": self.norm_momentum,
                "norm_epsilon": self.norm_epsilon,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="residual_keras")
class BasicBlock(_ConvBlock):
    """The two-layer block of the CIFAR ResNets (He et al. 2015, figure 2).

    `f(x) = BN(conv3x3(ReLU(BN(conv3x3_stride(x)))))` and
    `y = ReLU(f(x) + shortcut(x))`, or `y = ReLU(f(x))` when `residual=False`.

    Args:
        filters: int. Output channels of both convolutions.
        strides: int. Stride of the first convolution (2 halves the map).
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
        **kwargs: standard `keras.layers.Layer` arguments.

    Example:
        >>> x = keras.random.normal((2, 32, 32, 16))
        >>> BasicBlock(32, strides=2)(x).shape
        (2, 16, 16, 32)
    """

    def build_branch(self, input_shape):
        (self.conv1, self.norm1), shape = self._conv_bn(
            "branch1", self.filters, 3, self.strides, input_shape
        )
        (self.conv2, self.norm2), _ = self._conv_bn(
            "branch2", self.filters, 3, 1, shape, zero_gamma=self.zero_gamma
        )

    def branch(self, inputs, training=None):
        """f(x) = BN(conv2(ReLU(BN(conv1(x)))))."""
        x = ops.relu(self._conv_norm(self.conv1, self.norm1, inputs, training))
        return self._conv_norm(self.conv2, self.norm2, x, training)


@keras.saving.register_keras_serializable(package="residual_keras")
class BottleneckBlock(_ConvBlock):
    """The three-layer bottleneck block (He et al. 2015, figure 5 right).

    `f(x) = BN(conv1x1(ReLU(BN(conv3x3_stride(ReLU(BN(conv1x1(x))))))))` with
    `filters` channels inside and `filters * expansion` channels out;
    `y = ReLU(f(x) + shortcut(x))`, or `y = ReLU(f(x))` when `residual=False`.
    The stride sits on the 3x3 convolution (as in torchvision and timm).

    Args:
        filters: int. Channels of the 1x1 and 3x3 convolutions inside.
        strides: int. Stride of the 3x3 convolution. Default 1.
        expansion: int. Output channels are `filters * expansion`. Default 4.
        residual, shortcut, zero_gamma, norm, kernel_initializer,
        kernel_regularizer, norm_momentum, norm_epsilon: as in `BasicBlock`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Example:
        >>> x = keras.random.normal((2, 16, 16, 64))
        >>> BottleneckBlock(16)(x).shape
        (2, 16, 16, 64)
    """

    def __init__(self, filters, strides=1, *, expansion=4, **kwargs):
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
            "branch2", self.filters, 3, self.strides, shape
        )
        (self.conv3, self.norm3), _ = self._conv_bn(
            "branch3", self.output_channels, 1, 1, shape, zero_gamma=self.zero_gamma
        )

    def branch(self, inputs, training=None):
        """f(x) = BN(conv3(ReLU(BN(conv2(ReLU(BN(conv1(x)))))))) (1x1, 3x3, 1x1)."""
        x = ops.relu(self._conv_norm(self.conv1, self.norm1, inputs, training))
        x = ops.relu(self._conv_norm(self.conv2, self.norm2, x, training))
        return self._conv_norm(self.conv3, self.norm3, x, training)

    def get_config(self):
        config = super().get_config()
        config["expansion"] = self.expansion
        return config
