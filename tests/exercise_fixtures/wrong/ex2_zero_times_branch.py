"""A wrong answer to exercise 2: the identity by multiplying the branch by 0."""
# expect: learns: cut from the loss

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
    scaled = keras.Sequential([branch, keras.layers.Rescaling(0.0)])  # f(x) * 0 = 0
    return rk.Residual(scaled)
