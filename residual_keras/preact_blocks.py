"""The pre-activation residual block: `x_{l+1} = x_l + f(x_l)`, nothing after the addition.

He, Zhang, Ren and Sun 2016, "Identity Mappings in Deep Residual Networks"
(arXiv 1603.05027), equations 3-5 and figure 4(e). The original block
computes `ReLU(x + f(x))`; moving BatchNorm and ReLU into the branch,

    f(x) = conv2(ReLU(BN(conv1(ReLU(BN(x))))))
    x_{l+1} = shortcut(x_l) + f(x_l),

leaves the stream untouched between blocks, so for any l < L

    x_L = x_l + sum_{i=l}^{L-1} f(x_i)
    dLoss/dx_l = dLoss/dx_L (I + d/dx_l sum_i f(x_i)):

the gradient of the last block reaches every earlier block through the term
`I` unchanged (within a stage; see below). With `zero_init_last=True` the
last convolution starts at 0, so `f = 0` and every block starts as the
identity: the Jacobian of the whole stack, and the gradient's gain, are
exactly 1 at initialisation.

Where a block changes shape, option A's shortcut (subsample by the stride,
zero-pad the new channels) is a selection: its Jacobian has spectral norm 1,
but the gradient arriving on the padded channels, and at the skipped pixels,
has nowhere to go, so the gain across it is the share of the gradient on
the kept entries. The shortcut here takes `x` itself (not `ReLU(BN(x))` as
He et al.'s code does where the shape changes), so that this is the only
place the identity path is not exact.

`residual=False` builds the plain twin `x_{l+1} = f(x_l)` with the same
layers. `norm="none"` drops both BatchNorms (the convolutions get biases).
`kernel_size`, `activation`, tuple `strides` and `data_format` are as in
`BasicBlock`; nothing follows the addition, so there is no final activation
to drop.
"""

import keras
from keras import layers

from residual_keras._checks import (
    channel_axis,
    check_choice,
    check_data_format,
    check_image_input,
    check_pair,
    check_positive_int,
    strided_output_shape,
)
from residual_keras._initializers import clone_initializer
from residual_keras.resnet_blocks import NORMS
from residual_keras.shortcuts import SHORTCUTS, make_shortcut


@keras.saving.register_keras_serializable(package="residual_keras")
class PreActBasicBlock(layers.Layer):
    """He et al. 2016's pre-activation basic block, `x + f(x)`.

    `f(x) = conv3x3(ReLU(BN(conv3x3_stride(ReLU(BN(x))))))` and
    `y = shortcut(x) + f(x)`, or `y = f(x)` when `residual=False`.

    Args:
        filters: int. Output channels of both convolutions.
        strides: int or (height, width) pair. Stride of the first
            convolution (2 halves the map). Default 1.
        kernel_size: int or (height, width) pair. Kernel of both
            convolutions. Default 3.
        activation: the activation after each BatchNorm (a name or a
            callable). Default "relu".
        residual: bool. Add the shortcut (True) or build the plain twin with
            the same layers (False). Default True.
        shortcut: "A" (subsample + zero-pad channels, parameter-free) or "B"
            (1x1 conv + BN projection), used only where the shape changes.
            Default "A".
        norm: "batchnorm" (the paper) or "none" (no normalisation; the
            convolutions get biases). Default "batchnorm".
        zero_init_last: bool. Start the last convolution's kernel at 0, so
            the block is `shortcut(x)` at initialisation. Needs
            `residual=True`. Default False (the paper).
        kernel_initializer: initializer of the conv kernels. Default "he_normal".
        kernel_regularizer: optional regularizer of the conv kernels.
        norm_momentum: float. BatchNorm momentum (Keras convention). Default 0.9.
        norm_epsilon: float. BatchNorm epsilon. Default 1e-5.
        data_format: "channels_last" or "channels_first". Default None:
            `keras.config.image_data_format()`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Example:
        >>> x = keras.random.normal((2, 32, 32, 16))
        >>> block = PreActBasicBlock(16, zero_init_last=True)
        >>> bool(keras.ops.all(block(x) == x))  # the identity at initialisation
        True

    References:
        He, Zhang, Ren, Sun 2016, "Identity Mappings in Deep Residual
        Networks", https://arxiv.org/abs/1603.05027
    """

    def __init__(
        self,
        filters,
        strides=1,
        *,
        kernel_size=3,
        activation="relu",
        residual=True,
        shortcut="A",
        norm="batchnorm",
        zero_init_last=False,
        kernel_initializer="he_normal",
        kernel_regularizer=None,
        norm_momentum=0.9,
        norm_epsilon=1e-5,
        data_format=None,
        **kwargs,
    ):
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
        if zero_init_last and not residual:
            raise ValueError(
                "zero_init_last=True needs residual=True: without a shortcut the "
                "block would output 0 for every input."
            )
        self.zero_init_last = bool(zero_init_last)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.norm_momentum = norm_momentum
        self.norm_epsilon = norm_epsilon

    def _make_norm(self, name, shape):
        if self.norm == "none":
            return None
        norm = layers.BatchNormalization(
            axis=channel_axis(self.data_format),
            momentum=self.norm_momentum,
            epsilon=self.norm_epsilon,
            dtype=self.dtype_policy,
            name=name,
        )
        norm.build(shape)
        return norm

    def _make_conv(self, name, strides, shape, initializer):
        conv = layers.Conv2D(
            self.filters,
            self.kernel_size,
            strides=strides,
            padding="same",
            data_format=self.data_format,
            use_bias=self.norm == "none",
            kernel_initializer=initializer,
            kernel_regularizer=self.kernel_regularizer,
            dtype=self.dtype_policy,
            name=name,
        )
        conv.build(shape)
        return conv, conv.compute_output_shape(shape)

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)
        self.norm1 = self._make_norm("branch1_norm", input_shape)
        self.conv1, shape = self._make_conv(
            "branch1_conv", self.strides, input_shape, clone_initializer(self.kernel_initializer)
        )
        self.norm2 = self._make_norm("branch2_norm", shape)
        last_initializer = "zeros" if self.zero_init_last else clone_initializer(self.kernel_initializer)
        self.conv2, _ = self._make_conv("branch2_conv", 1, shape, last_initializer)
        self.shortcut_layer = None
        if self.residual:
            self.shortcut_layer = make_shortcut(
                self.shortcut,
                input_shape,
                self.filters,
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

    def _norm_activation(self, norm, x, training):
        """ReLU(BN(x)), or ReLU(x) in an unnormalised block (ReLU: `activation`)."""
        return self.activation(x if norm is None else norm(x, training=training))

    def branch(self, inputs, training=None):
        """The residual function f(x) = conv2(ReLU(BN(conv1(ReLU(BN(x))))))."""
        x = self.conv1(self._norm_activation(self.norm1, inputs, training))
        return self.conv2(self._norm_activation(self.norm2, x, training))

    def shortcut_path(self, inputs, training=None):
        """shortcut(x): the identity, or option A/B where the shape changes."""
        if self.shortcut_layer is None:
            return inputs
        return self.shortcut_layer(inputs, training=training)

    def call(self, inputs, training=None):
        residual = self.branch(inputs, training=training)  # f(x)
        if not self.residual:
            return residual  # the plain twin: f(x)
        shortcut = self.shortcut_path(inputs, training=training)
        return shortcut + residual  # x + f(x), nothing after the addition

    def compute_output_shape(self, input_shape):
        return strided_output_shape(input_shape, self.strides, self.filters, self.data_format)

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
                "zero_init_last": self.zero_init_last,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "norm_momentum": self.norm_momentum,
                "norm_epsilon": self.norm_epsilon,
            }
        )
        return config
