"""Exercise 4: the Jacobian of two residual blocks, and its four terms.

For y1 = x + f1(x) and y2 = y1 + f2(y1), the chain rule gives

    d y2 / d x = (I + J2)(I + J1) = I + J1 + J2 + J2 J1,

with J1 = d f1 / d x at x and J2 = d f2 / d y1 at y1. The identity term I
survives whatever the J's are; J2 J1 is the only term a plain stack keeps.

Write three functions, for a single input vector x of shape (n,) and
branches f1, f2 that map (n,) to (n,) (Python functions of keras.ops, or
Keras layers called on a batch of one: see the hint):

- `jacobian(f, x)`: the (n, n) matrix J with J[i, j] = d f(x)[i] / d x[j],
  computed with automatic differentiation (any backend), NOT by finite
  differences;
- `two_block_terms(f1, f2, x)`: a dict with "I", "J1", "J2", "J2J1" (each
  (n, n)) and "total" (d y2 / d x, computed with `jacobian` on the whole
  two-block map);
- `identity_term_error(f1, f2, x)`: the spectral norm of total - (I + J1 + J2),
  which the course says is at most ||J2|| ||J1||.

Check your work:  python -m tracks check THIS_FILE

Hints:
- residual_keras.diagnostics has no "full Jacobian" function on purpose;
  write one: row i is the gradient of f(x)[i] (TensorFlow: tf.GradientTape
  with tape.jacobian; JAX: jax.jacobian; PyTorch: torch.autograd.functional.jacobian).
  The checks use the TensorFlow backend.
- the layout: row index = output, column index = input (J @ v is the change
  of f for a change v of x).
- J2 is evaluated at y1 = x + f1(x), not at x.
"""

import numpy as np

EXERCISE = 4


def jacobian(f, x):
    raise NotImplementedError


def two_block_terms(f1, f2, x):
    raise NotImplementedError


def identity_term_error(f1, f2, x):
    raise NotImplementedError
