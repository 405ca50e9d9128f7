"""A wrong answer to exercise 2: the branch behind stop_gradient."""
# expect: learns: cut from the loss

import keras

import residual_keras as rk

EXERCISE = 2


class Frozen(keras.layers.Layer):
    """The branch, with its output held constant for the gradient."""

    def __init__(self, branch, **kwargs):
        super().__init__(**kwargs)
        self.branch = branch

    def call(self, x):
        return keras.ops.stop_gradient(self.branch(x))


def identity_block(width, hidden):
    branch = keras.Sequential([
        keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dense(width, kernel_initializer="zeros"),  # f(x) = 0 at initialisation
    ])
    # Only the last layer at 0: its input (the hidden layer's output) is not 0, so its
    # gradient is not 0 and it learns; with both at 0 nothing would.
    return rk.Residual(Frozen(branch))
