"""The vision track's optimizer: SGD with momentum, and Fixup's parameter groups.

He et al. 2015 (and every variant by default): SGD, momentum 0.9, coupled
weight decay 1e-4 on the convolution and dense kernels, written into the model
as an L2 penalty `weight_decay / 2 * ||W||^2` (`cifar_resnet(weight_decay=)`).

Zhang et al. 2019, the official Fixup code (hongyi-zhang/Fixup,
cifar/cifar_train.py), puts the parameters in two groups: the "bias" group
(every scalar bias and the classifier's bias) at lr/10, everything else at lr,
and both with coupled weight decay 1e-4:

    g <- g + weight_decay * w            # on every parameter
    m <- momentum * m + g;  w <- w - lr_group * m

`FixupSGD` is that recipe for a Keras model. The Fixup scalars already train
at lr/10 through their reparametrisation (value = sqrt(0.1) * stored
variable, residual_keras/fixup.py), so they get no second multiplier here;
their decay is `0.1 * weight_decay` on the stored variable, which is exactly
`weight_decay` on the value at lr/10. The classifier's bias, an ordinary
Keras bias, gets lr/10 here. The model is built without its L2 penalty
(`weight_decay=0`), so no parameter is decayed twice.
"""

import keras
from keras import ops

# Zhang et al.'s "bias" group trains at this fraction of the learning rate.
BIAS_GROUP_RATE = 0.1


class FixupSGD(keras.optimizers.SGD):
    """SGD with momentum, coupled weight decay on every variable, and slow variables.

    Args:
        learning_rate: float or schedule, as `keras.optimizers.SGD`.
        momentum: float. As `keras.optimizers.SGD`.
        coupled_weight_decay: float. `weight_decay * w` is added to every
            variable's gradient before the momentum (the paper's decay, not
            Keras' decoupled `weight_decay=`). Default 0.
        slow_paths: variable paths (`variable.path`) trained at
            `BIAS_GROUP_RATE` times the learning rate.
        decay_scales: {variable path: factor}: variables whose decay is
            `factor * coupled_weight_decay` (reparametrised scalars).
        **kwargs: the other `keras.optimizers.SGD` arguments.
    """

    def __init__(self, learning_rate=0.01, momentum=0.0, *, coupled_weight_decay=0.0, slow_paths=(),
                 decay_scales=None, **kwargs):
        super().__init__(learning_rate=learning_rate, momentum=momentum, **kwargs)
        if not coupled_weight_decay >= 0:
            raise ValueError(f"coupled_weight_decay must be >= 0, got {coupled_weight_decay!r}")
        self.coupled_weight_decay = float(coupled_weight_decay)
        self.slow_paths = tuple(slow_paths)
        self.decay_scales = dict(decay_scales or {})

    def build(self, variables):
        super().build(variables)
        # update_step sees the backend's variable (no `path` on TensorFlow): look groups up by index,
        # as SGD finds its momentum slot.
        self._decay_by_index = [self.coupled_weight_decay * self.decay_scales.get(variable.path, 1.0)
                                for variable in variables]
        self._slow_by_index = [variable.path in self.slow_paths for variable in variables]

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        gradient = ops.cast(gradient, variable.dtype)
        if self._decay_by_index[index]:
            gradient = gradient + ops.cast(self._decay_by_index[index], variable.dtype) * variable
        if self._slow_by_index[index]:
            learning_rate = learning_rate * BIAS_GROUP_RATE
        super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        config = super().get_config()
        config.update({"coupled_weight_decay": self.coupled_weight_decay, "slow_paths": list(self.slow_paths),
                       "decay_scales": dict(self.decay_scales)})
        return config


def fixup_groups(model):
    """(slow_paths, decay_scales) of Zhang et al.'s recipe for a `cifar_resnet(block=blocks.fixup())` model.

    Slow: the classifier's bias. Decay scales: every reparametrised scalar
    (the stem's and head's biases, each block's b1..b4 and s) at its
    learning-rate multiplier (see the module docstring).
    """
    from residual_keras.fixup import FixupBasicBlock, ScalarBias, ScalarScale

    slow = tuple(variable.path for variable in model.get_layer("classifier").trainable_variables
                 if variable.path.endswith("bias"))
    scalars = []
    for layer in model.layers:
        if isinstance(layer, (ScalarBias, ScalarScale)):
            scalars.append(layer)
        elif isinstance(layer, FixupBasicBlock):
            scalars += [layer.bias1, layer.bias2, layer.bias3, layer.scale, layer.bias4]
    return slow, {scalar.variable.path: scalar.learning_rate_multiplier for scalar in scalars}
