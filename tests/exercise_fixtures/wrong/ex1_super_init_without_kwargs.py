"""A wrong answer to exercise 1: __init__ drops what Keras passes on (name, dtype), so from_config(get_config())
gives another layer back."""
# expect: saving: super().__init__(**kwargs)

import keras

EXERCISE = 1


@keras.saving.register_keras_serializable(package="exercises")
class ResidualMLP(keras.layers.Layer):
    def __init__(self, hidden, residual=True, **kwargs):
        super().__init__()  # kwargs (name, dtype, ...) dropped
        self.hidden = hidden
        self.residual = residual

    def build(self, input_shape):
        self.inner = keras.layers.Dense(self.hidden, activation="relu", name="inner")
        self.outer = keras.layers.Dense(input_shape[-1], name="outer")
        self.inner.build(input_shape)
        self.outer.build((*input_shape[:-1], self.hidden))

    def call(self, x):
        update = self.outer(self.inner(x))  # f(x)
        return x + update if self.residual else update  # y = x + f(x); the plain twin: f(x)

    def get_config(self):
        return {**super().get_config(), "hidden": self.hidden, "residual": self.residual}
