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
`I` unchanged (within a stage; see below). With `zero_last_conv=True` the
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

import functools
from typing import Any, Optional

import keras
import numpy as np

from residual_keras.checks import check_image_input
from residual_keras.resnet_blocks import ConvBlockBase
from residual_keras.steps import ResidualStep
from residual_keras._types import ArrayLike, IntOrPair
from residual_keras._spellings import renamed_since_0_2


@keras.saving.register_keras_serializable(package="residual_keras")
class PreActBasicBlock(ConvBlockBase):
    """He et al. 2016's pre-activation basic block, `x + f(x)`.

    `f(x) = conv3x3(ReLU(BN(conv3x3_stride(ReLU(BN(x))))))` and
    `y = shortcut(x) + f(x)`, or `y = f(x)` when `residual=False`.

    Args:
        filters, strides, kernel_size: as in `BasicBlock`.
        activation: the activation after each BatchNorm (a name or a
            callable). Default "relu".
        residual: bool. Add the shortcut (True) or build the plain twin with
            the same layers (False). Default True.
        shortcut: "A" (subsample + zero-pad channels, parameter-free) or "B"
            (1x1 conv + BN projection), used only where the shape changes.
            Default "A".
        norm: "batchnorm" (the paper) or "none" (no normalisation; the
            convolutions get biases). Default "batchnorm".
        zero_last_conv: bool. Start the last convolution's kernel at 0, so
            the block is `shortcut(x)` at initialisation. Needs
            `residual=True`. Default False (the paper).
        kernel_initializer: as in `BasicBlock`; so are `kernel_regularizer`,
            `norm_momentum`, `norm_epsilon` and `data_format`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor (batch, height, width, channels), or (batch,
            channels, height, width) with `data_format="channels_first"`.
        training: bool or None. BatchNorm uses the batch's statistics (and
            updates its moving ones) when True, the moving ones when False.
            Default None: Keras' learning phase.

    Example:
        >>> x = keras.random.normal((2, 32, 32, 16))
        >>> block = PreActBasicBlock(16, zero_last_conv=True)
        >>> bool(keras.ops.all(block(x) == x))  # the identity at initialisation
        True

    References:
        He, Zhang, Ren, Sun 2016, "Identity Mappings in Deep Residual
        Networks", https://arxiv.org/abs/1603.05027
    """

    def __init__(self, filters: int, strides: IntOrPair = 1, *, zero_last_conv: bool = False, **kwargs) -> None:
        super().__init__(filters, strides, **kwargs)
        if zero_last_conv and not self.residual:
            raise ValueError(
                "zero_last_conv=True needs residual=True: without a shortcut the "
                "block would output 0 for every input."
            )
        self.zero_last_conv = bool(zero_last_conv)

    def build(self, input_shape):
        check_image_input(self.__class__.__name__, input_shape, self.data_format)
        self.norm1 = self._batch_norm("branch1_norm")  # None with norm="none"
        self.conv1 = self._conv("branch1_conv", self.filters, self.kernel_size, self.strides)  # the block's stride
        self.norm2 = self._batch_norm("branch2_norm")
        self.conv2 = self._conv("branch2_conv", self.filters, self.kernel_size, 1,
                                "zeros" if self.zero_last_conv else None)  # None: kernel_initializer
        self._build_in_order(input_shape, self.norm1, self.conv1, self.norm2, self.conv2)
        self.shortcut_layer = self._shortcut(input_shape)  # None: the identity (or the plain twin)

    def branch(self, inputs, training=None):
        """The residual function f(x) = conv2(ReLU(BN(conv1(ReLU(BN(x)))))), without the BNs for norm="none"."""
        x = inputs if self.norm1 is None else self.norm1(inputs, training=training)
        x = self.activation(x)
        x = self.conv1(x)
        x = x if self.norm2 is None else self.norm2(x, training=training)
        x = self.activation(x)
        return self.conv2(x)

    def call(self, inputs: ArrayLike, training: Optional[bool] = None) -> Any:
        update = self.branch(inputs, training)  # f(x)
        if not self.residual:
            return update  # the plain twin: x_{l+1} = f(x_l)
        return self.shortcut_path(inputs, training) + update  # x_{l+1} = x_l + f(x_l): nothing after the addition

    def residual_steps(self, training: Optional[bool] = False) -> list[ResidualStep]:
        """For the instruments, the addition `call` writes: one step, `shortcut(x) + f(x)` (plain: `f(x)`)."""
        return [ResidualStep(
            "",
            branch=functools.partial(self.branch, training=training),
            shortcut=functools.partial(self.shortcut_path, training=training) if self.residual else None,
            training=training,
        )]

    def identity_scale(self):
        """The norm of the last kernel with zero_last_conv=True (0 at initialisation), else None."""
        if not self.zero_last_conv:
            return None
        return float(np.linalg.norm(keras.ops.convert_to_numpy(self.conv2.kernel)))

    def get_config(self):
        config = super().get_config()
        config["zero_last_conv"] = self.zero_last_conv
        return config

    @classmethod
    def from_config(cls, config):
        return super().from_config(renamed_since_0_2(config))  # a .keras file of 0.2.0: zero_init_last
