"""Gradients and Jacobian-vector products on TensorFlow, JAX and PyTorch.

Keras 3 has no backend-agnostic API for gradients with respect to tensors
computed inside a model, or for Jacobian-vector products, so every
instrument that differentiates asks this module, which asks the backend's
own autodiff. Four functions, whose signatures follow JAX's
(`value_and_grad`, `linearize`, `vjp`, `jit`):

- `value_and_gradients(function, tensors, variables)`: a scalar and its
  gradients with respect to input tensors and to variables;
- `linearize(function, x, tangent)`: `J v` and a pullback `c -> J^T c`;
- `vjp(function, x)`: `function(x)` and a pullback that may be called often;
- `trace(function)`: a compiled version of a function of tensors
  (`tf.function` on TensorFlow; the function itself elsewhere).

How each backend does it:

| | gradients | J v | J^T c |
| --- | --- | --- | --- |
| TensorFlow | `GradientTape` | the transpose of `J^T u` in `u` (double backward) | `GradientTape` |
| JAX | `jax.value_and_grad` | `jax.linearize` | `jax.linear_transpose` |
| PyTorch | `torch.autograd.grad` | the transpose of `J^T u` in `u` (double backward) | `torch.autograd.grad` |

On JAX the function runs in a `keras.StatelessScope`: JAX traces it, and a
traced value must not be written into a variable (BatchNorm's moving
statistics in training mode); the instruments restore the variables anyway.
"""

import contextlib
import logging

import keras

BACKENDS = ("tensorflow", "jax", "torch")


def require_autodiff(name):
    """Raises RuntimeError on a backend without autodiff here (numpy, openvino)."""
    if keras.backend.backend() not in BACKENDS:
        raise RuntimeError(
            f"{name} differentiates the model and needs the TensorFlow, JAX or PyTorch "
            f"backend; Keras is running on {keras.backend.backend()!r}."
        )


def value_and_gradients(function, tensors, variables=()):
    """(value, gradients for `tensors`, gradients for `variables`).

    `function(*tensors)` returns a scalar. Where the value does not depend on
    a tensor or variable its gradient is None (TensorFlow, PyTorch) or zeros (JAX).
    """
    backend = keras.backend.backend()
    variables = list(variables)
    if backend == "tensorflow":
        import tensorflow as tf

        tensors = [tf.convert_to_tensor(tensor) for tensor in tensors]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            value = function(*tensors)
        gradients = tape.gradient(value, tensors + variables)
        return value, gradients[: len(tensors)], gradients[len(tensors) :]
    if backend == "jax":
        import jax

        def pure(tensor_values, variable_values):
            with keras.StatelessScope(state_mapping=list(zip(variables, variable_values))):
                return function(*tensor_values)

        tensors = [jax.numpy.asarray(tensor) for tensor in tensors]
        value, (tensor_grads, variable_grads) = jax.value_and_grad(pure, argnums=(0, 1))(
            tensors, [variable.value for variable in variables]
        )
        return value, list(tensor_grads), list(variable_grads)
    if backend == "torch":
        import torch

        tensors = [_torch_leaf(tensor) for tensor in tensors]
        parameters = [variable.value for variable in variables]
        with torch.enable_grad():
            value = function(*tensors)
            gradients = torch.autograd.grad(value, tensors + parameters, allow_unused=True)
        return value.detach(), list(gradients[: len(tensors)]), list(gradients[len(tensors) :])
    require_autodiff("value_and_gradients")


def linearize(function, x, tangent):
    """(J v, pullback) of `function` at `x`, v = `tangent`.

    `pullback(c)` returns `J^T c` (zeros where the output does not depend on
    x); it may be called once. `c` is treated as a constant.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        zero = tf.UnconnectedGradients.ZERO
        with tf.GradientTape(persistent=True) as tape:  # persistent: J^T u now, J^T c in the pullback
            tape.watch(x)
            y = function(x)
        # J^T u is linear in u; its gradient in u along v is J v (as on PyTorch). TensorFlow's
        # ForwardAccumulator does the same op by op, but in eager mode it traces a function for
        # every op's forward rule: 2.5 times slower on a 6-block Transformer, the same numbers.
        u = tf.zeros_like(y)
        with tf.GradientTape() as outer:
            outer.watch(u)
            transposed = tape.gradient(y, x, output_gradients=u, unconnected_gradients=zero)
        jvp = outer.gradient(transposed, u, output_gradients=tangent, unconnected_gradients=zero)

        def pullback(cotangent):
            return tape.gradient(y, x, output_gradients=tf.stop_gradient(cotangent), unconnected_gradients=zero)

        return jvp, pullback
    if backend == "jax":
        import jax

        x = jax.numpy.asarray(x)
        _, linear = jax.linearize(_stateless(function), x)
        transposed = jax.linear_transpose(linear, x)
        return linear(jax.numpy.asarray(tangent)), lambda cotangent: transposed(cotangent)[0]
    if backend == "torch":
        import torch

        leaf = _torch_leaf(x)
        with torch.enable_grad():
            y = function(leaf)
            # J^T u is linear in u; its gradient in u along v is J v.
            u = torch.zeros_like(y, requires_grad=True)
            (transposed,) = torch.autograd.grad(y, leaf, grad_outputs=u, create_graph=True,
                                                allow_unused=True)
            if transposed is None:  # the output does not depend on x
                jvp = torch.zeros_like(y)
            else:
                (jvp,) = torch.autograd.grad(transposed, u, grad_outputs=_torch_constant(tangent),
                                             retain_graph=True, allow_unused=True)
                jvp = torch.zeros_like(y) if jvp is None else jvp

        def pullback(cotangent):
            return _torch_pullback(y, leaf, cotangent, retain_graph=False)

        return jvp.detach(), pullback
    require_autodiff("linearize")


def vjp(function, x):
    """(function(x), pullback) with `pullback(c) = J^T c`, callable any number of times.

    `function` may return a tuple of tensors; `c` is then a tuple too.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = function(x)

        def pullback(cotangent):
            return tape.gradient(
                y, x, output_gradients=cotangent, unconnected_gradients=tf.UnconnectedGradients.ZERO
            )

        return y, pullback
    if backend == "jax":
        import jax

        y, pull = jax.vjp(_stateless(function), jax.numpy.asarray(x))
        return y, lambda cotangent: pull(cotangent)[0]
    if backend == "torch":
        import torch

        leaf = _torch_leaf(x)
        with torch.enable_grad():
            y = function(leaf)

        def pullback(cotangent):
            return _torch_pullback(y, leaf, cotangent, retain_graph=True)

        detached = tuple(t.detach() for t in y) if isinstance(y, (tuple, list)) else y.detach()
        return detached, pullback
    require_autodiff("vjp")


def trace(function):
    """`function` compiled on its first call: a `tf.function` on TensorFlow.

    On JAX and PyTorch the function runs as it is (eagerly): the instruments
    call Keras layers whose variables a `jax.jit` would have to thread through.
    Each instrument traces its functions anew, so TensorFlow's "retracing"
    warning is expected and kept quiet while they run.
    """
    if keras.backend.backend() != "tensorflow":
        return function
    import tensorflow as tf

    traced = tf.function(function, autograph=False)

    def run(*args, **kwargs):
        with _quiet_tensorflow_logger():
            return traced(*args, **kwargs)

    return run


def _stateless(function):
    """`function` without side effects on variables (JAX traces it)."""

    def run(*args):
        with keras.StatelessScope():
            return function(*args)

    return run


def _torch_leaf(tensor):
    """A fresh tensor that autograd differentiates with respect to."""
    return keras.ops.convert_to_tensor(tensor).detach().requires_grad_(True)


def _torch_constant(tensor):
    return keras.ops.convert_to_tensor(tensor).detach()


def _torch_pullback(y, leaf, cotangent, retain_graph):
    import torch

    outputs = list(y) if isinstance(y, (tuple, list)) else [y]
    cotangents = list(cotangent) if isinstance(y, (tuple, list)) else [cotangent]
    used = [(out, _torch_constant(c)) for out, c in zip(outputs, cotangents) if out.requires_grad]
    if not used:
        return torch.zeros_like(leaf).detach()
    with torch.enable_grad():
        (gradient,) = torch.autograd.grad([out for out, _ in used], leaf,
                                          grad_outputs=[c for _, c in used],
                                          retain_graph=retain_graph, allow_unused=True)
    return torch.zeros_like(leaf).detach() if gradient is None else gradient.detach()


@contextlib.contextmanager
def _quiet_tensorflow_logger():
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
