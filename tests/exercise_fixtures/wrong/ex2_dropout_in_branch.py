"""A wrong answer to exercise 2: a Dropout in the branch (f is Dense then Dense)."""
# expect: other_weights: in training mode the block must compute x + f(x) too

import keras

import residual_keras as rk

EXERCISE = 2


def identity_block(width, hidden):
    branch = keras.Sequential([
        keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(width, kernel_initializer="zeros"),  # f(x) = 0 at initialisation
    ])
    # Only the last layer at 0: its input (the hidden layer's output) is not 0, so its
    # gradient is not 0 and it learns; with both at 0 nothing would.
    return rk.Residual(branch)
