"""A wrong answer to exercise 1: call() computes with copies of the weights taken in build()."""
# expect: equation: must read the Dense layers made in build() every time

import keras

EXERCISE = 1


@keras.saving.register_keras_serializable(package="exercises")
class ResidualMLP(keras.layers.Layer):
    def __init__(self, hidden, residual=True, **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden
        self.residual = residual

    def build(self, input_shape):
        self.inner = keras.layers.Dense(self.hidden, activation="relu", name="inner")
        self.outer = keras.layers.Dense(input_shape[-1], name="outer")
        self.inner.build(input_shape)
        self.outer.build((*input_shape[:-1], self.hidden))
        self.frozen = [keras.ops.convert_to_tensor(w.numpy()) for w in self.inner.weights + self.outer.weights]

    def call(self, x):
        kernel_in, bias_in, kernel_out, bias_out = self.frozen
        hidden = keras.ops.relu(keras.ops.matmul(x, kernel_in) + bias_in)
        update = keras.ops.matmul(hidden, kernel_out) + bias_out  # f(x) with the weights of build() time
        return x + update if self.residual else update  # y = x + f(x); the plain twin: f(x)

    def get_config(self):
        return {**super().get_config(), "hidden": self.hidden, "residual": self.residual}
