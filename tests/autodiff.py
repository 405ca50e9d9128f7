"""Gradients with respect to an input on every Keras backend, for the layer tests.

The layers' tests measure gradients (causality, the identity path) on
TensorFlow, JAX and PyTorch alike, each with its own autodiff: TensorFlow's
`GradientTape`, `jax.grad`, `torch.autograd.grad`. (The instruments'
per-backend autodiff lives in residual_keras.diagnostics.)
"""

import numpy as np

import keras

BACKEND = keras.backend.backend()


def gradient(fn, x, jit=False):
    """d fn(x) / dx as a numpy array, for a scalar-valued `fn` of the array `x`.

    `jit=True` compiles the gradient with XLA (TensorFlow, JAX); PyTorch has
    no XLA here, so its tests skip that case.
    """
    x = np.asarray(x, dtype="float32")
    if BACKEND == "tensorflow":
        import tensorflow as tf

        def grad(t):
            with tf.GradientTape() as tape:
                tape.watch(t)
                value = fn(t)
            return tape.gradient(value, t)

        if jit:
            grad = tf.function(grad, jit_compile=True)
        return grad(tf.constant(x)).numpy()
    if BACKEND == "jax":
        import jax

        def value(t):
            # State updates (BatchNorm statistics, dropout seeds) stay inside the
            # scope: jax.grad traces `fn`, and a traced value must not leak into a variable.
            with keras.StatelessScope():
                return fn(t)

        grad = jax.jit(jax.grad(value)) if jit else jax.grad(value)
        return np.asarray(grad(jax.numpy.asarray(x)))
    if BACKEND == "torch":
        import torch

        if jit:
            raise ValueError("PyTorch has no XLA here: test the jit case on TensorFlow and JAX")
        t = keras.ops.convert_to_tensor(x).detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(fn(t), t)
        return grad.detach().cpu().numpy()
    raise ValueError(f"no gradient for the {BACKEND} backend")
