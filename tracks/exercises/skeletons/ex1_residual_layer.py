"""Exercise 1: y = x + f(x) as a Keras layer, with a plain twin.

The course's first line: a residual block learns a function f and adds its
input back, y = x + f(x). Its Jacobian is I + df/dx, so the gradient keeps
an identity path through any depth; the plain twin y = f(x) keeps only
df/dx, and a stack of them multiplies one Jacobian per block.

Write `ResidualMLP`: f is Dense(hidden, activation="relu") followed by
Dense(width of the input). With `residual=True` the layer computes
x + f(x); with `residual=False`, f(x) alone (the plain twin, with exactly the
same weights). Register it for saving and give it a complete get_config.

Check your work:  python -m tracks check THIS_FILE

Hints:
- keras.saving.register_keras_serializable(package="exercises") above the class;
- create the two Dense layers in build(input_shape): the output width is input_shape[-1];
- get_config must return every constructor argument, so that
  ResidualMLP.from_config(layer.get_config()) builds the same layer.
"""

import keras

EXERCISE = 1


class ResidualMLP(keras.layers.Layer):
    def __init__(self, hidden, residual=True, **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden
        self.residual = residual

    def build(self, input_shape):
        raise NotImplementedError("create the two Dense layers of f here")

    def call(self, x):
        raise NotImplementedError("x + f(x), or f(x) for the plain twin")

    def get_config(self):
        return super().get_config()
