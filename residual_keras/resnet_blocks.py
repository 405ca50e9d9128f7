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
"""

import keras
import numpy as np

from residual_keras.checks import check_bool, check_positive_int
from residual_keras._conv_block import ConvBlockBase
from residual_keras._types import IntOrPair


class _ConvBlock(ConvBlockBase):
    """What `BasicBlock` and `BottleneckBlock` share: `activation(f(x) + shortcut(x))`.

    Subclasses create their branch's conv/BN pairs in `build_branch()` with
    `self._conv_bn(...)` and compute the branch in `branch()`; the step adds
    the shortcut, then the final activation (`after_addition`). The arguments every CIFAR block
    takes are checked in `ConvBlockBase` (_conv_block.py).
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
                "is no gamma (Fixup, or PreActBasicBlock(zero_init_last=True), "
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

    @property
    def after_addition(self):
        """`activation` (ReLU) with final_activation=True, else None."""
        return self.activation if self.final_activation else None

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

    def get_config(self):
        config = super().get_config()
        config["expansion"] = self.expansion
        return config
