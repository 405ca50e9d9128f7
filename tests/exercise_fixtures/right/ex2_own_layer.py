"""A right answer to exercise 2 without residual_keras.Residual: a layer of the student's own."""

import keras

EXERCISE = 2


class IdentityStart(keras.layers.Layer):
    def __init__(self, width, hidden, **kwargs):
        super().__init__(**kwargs)
        self.first = keras.layers.Dense(hidden, activation="relu")
        self.last = keras.layers.Dense(width, kernel_initializer="zeros")

    def call(self, x):
        return x + self.last(self.first(x))


def identity_block(width, hidden):
    return IdentityStart(width, hidden)
