"""A wrong answer to exercise 2: the branch not started at 0."""
# expect: identity: f(x) is not 0 at initialisation

import keras

import residual_keras as rk

EXERCISE = 2


def identity_block(width, hidden):
    branch = keras.Sequential([
        keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dense(width),
    ])
    # Only the last layer at 0: its input (the hidden layer's output) is not 0, so its
    # gradient is not 0 and it learns; with both at 0 nothing would.
    return rk.Residual(branch)
