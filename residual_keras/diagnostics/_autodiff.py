"""Gradients and Jacobian-vector products: the only TensorFlow code of the instruments.

Keras 3 has no backend-agnostic API for gradients with respect to tensors
computed inside a model, or for Jacobian-vector products, so every
instrument that differentiates asks this module. It uses TensorFlow
(`tf.GradientTape`, `tf.autodiff.ForwardAccumulator`, `tf.function`) and
needs the TensorFlow backend; another backend needs only these five
functions, whose signatures follow JAX's (`value_and_grad`, `linearize`,
`vjp`, `jit`):

- `value_and_gradients(function, tensors, variables)`: a scalar and its
  gradients with respect to input tensors and to variables;
- `linearize(function, x, tangent)`: `J v` and a pullback `c -> J^T c` from
  one forward pass;
- `vjp(function, x)`: `function(x)` and a pullback that may be called often;
- `trace(function)`: a compiled version of a function of tensors;
- `require_autodiff(name)`: a clear error on another backend.
"""

import contextlib
import logging

import keras


def require_autodiff(name):
    """Raises RuntimeError unless Keras runs on TensorFlow (what this module needs)."""
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            f"{name} differentiates with TensorFlow's autodiff and needs the TensorFlow "
            f"backend (KERAS_BACKEND=tensorflow); Keras is running on "
            f"{keras.backend.backend()!r}."
        )


def value_and_gradients(function, tensors, variables=()):
    """(value, gradients for `tensors`, gradients for `variables`).

    `function(*tensors)` returns a scalar; a gradient is None where the
    value does not depend on that tensor or variable.
    """
    import tensorflow as tf

    tensors = [tf.convert_to_tensor(tensor) for tensor in tensors]
    variables = list(variables)
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        value = function(*tensors)
    gradients = tape.gradient(value, tensors + variables)
    return value, gradients[: len(tensors)], gradients[len(tensors) :]


def linearize(function, x, tangent):
    """(J v, pullback) of `function` at `x` from one forward pass, v = `tangent`.

    `pullback(c)` returns `J^T c` (zeros where the output does not depend on
    x); it may be called once. `c` is treated as a constant.
    """
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(x)
        with tf.autodiff.ForwardAccumulator(x, tangent) as accumulator:
            y = function(x)
        jvp = accumulator.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def pullback(cotangent):
        return tape.gradient(
            y, x, output_gradients=tf.stop_gradient(cotangent),
            unconnected_gradients=tf.UnconnectedGradients.ZERO,
        )

    return jvp, pullback


def vjp(function, x):
    """(function(x), pullback) with `pullback(c) = J^T c`, callable any number of times.

    `function` may return a tuple of tensors; `c` is then a tuple too.
    """
    import tensorflow as tf

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = function(x)

    def pullback(cotangent):
        return tape.gradient(
            y, x, output_gradients=cotangent, unconnected_gradients=tf.UnconnectedGradients.ZERO
        )

    return y, pullback


def trace(function):
    """`function` compiled into a graph on its first call (a `tf.function`).

    Each instrument traces its functions anew, so TensorFlow's "retracing"
    warning is expected and kept quiet while they run.
    """
    import tensorflow as tf

    traced = tf.function(function, autograph=False)

    def run(*args):
        with _quiet_tensorflow_logger():
            return traced(*args)

    return run


@contextlib.contextmanager
def _quiet_tensorflow_logger():
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
