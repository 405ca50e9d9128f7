"""Exercise 2: start the block as the identity.

Zero-gamma BatchNorm, Fixup and ReZero all start every branch at 0: then
each block is y = x + 0 = x, the whole stack is the identity, its Jacobian
is exactly I, and the deep network starts as a shallow one. Training grows
each branch from 0 only as far as it helps.

Write `identity_block(width, hidden)`: a Keras layer (a `keras.Sequential`
branch inside `residual_keras.Residual` will do, or a layer of your own)
computing x + f(x) with f = Dense(hidden, relu) -> Dense(width), such that
at initialisation the block's output equals its input exactly, while f's
weights can still learn (the gradient on f's parameters is not 0).

Check your work:  python -m tracks check THIS_FILE

Hints:
- which of f's layers must start at 0 so that f(x) = 0 for every x, and
  why not both? (If both are 0, what is the gradient on the first one?)
- keras.layers.Dense(..., kernel_initializer="zeros")
- residual_keras.Residual(branch) computes x + branch(x).
"""

import keras

import residual_keras as rk

EXERCISE = 2


def identity_block(width, hidden):
    raise NotImplementedError("return a layer that is exactly the identity at initialisation")
