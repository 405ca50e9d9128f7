"""Instruments measure in float32: TensorFloat-32 is off while they run.

NVIDIA GPUs since Ampere can multiply float32 matrices in TensorFloat-32, a
float32 number with a 10-bit mantissa: each product is then accurate to
about 1e-3, not 1e-7. TensorFlow and JAX do this by default for matrix
products and convolutions, PyTorch at least for cuDNN's convolutions. It
is fine for training and wrong for a measurement: `jacobian_norm`'s power
iteration stops when two estimates agree to 1e-5, which products accurate
to 1e-3 never do, and a rank blurs at the same level (`stream_delta_rank`
counted 11 of 12 dimensions). The library's tests found both on an H100 (JAX and
PyTorch): benchmarks/NOTES.md, "GPU: the library's tests on an H100".

`full_float32()` switches TensorFloat-32 off for the `with` block and puts
back what was set before. On a CPU nothing changes (CPUs have no
TensorFloat-32). Models in `mixed_bfloat16` keep their bfloat16 products:
only float32 ones are affected.
"""

import contextlib
from collections.abc import Iterator

import keras


def _tensorflow(stack):
    import tensorflow as tf

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    stack.callback(tf.config.experimental.enable_tensor_float_32_execution, before)


def _jax(stack):
    import jax

    stack.enter_context(jax.default_matmul_precision("highest"))


def _torch(stack):
    import torch

    # PyTorch with `fp32_precision` (2.13 here): one setting per library, "ieee" being full float32. Its
    # older switches (allow_tf32) are not to be mixed with these, so they serve older versions only.
    settings = [getattr(torch.backends.cuda, "matmul", None), getattr(torch.backends.cudnn, "conv", None)]
    if all(hasattr(setting, "fp32_precision") for setting in settings):
        for setting in settings:
            stack.callback(setattr, setting, "fp32_precision", setting.fp32_precision)
            setting.fp32_precision = "ieee"
        return
    stack.callback(torch.set_float32_matmul_precision, torch.get_float32_matmul_precision())
    stack.callback(setattr, torch.backends.cudnn, "allow_tf32", torch.backends.cudnn.allow_tf32)
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False


_SWITCHES = {"tensorflow": _tensorflow, "jax": _jax, "torch": _torch}


@contextlib.contextmanager
def full_float32() -> Iterator[None]:
    """Inside the block, float32 matrix products and convolutions are not done in TensorFloat-32.

    Every instrument runs inside it; use it for a measurement of your own on
    a GPU:

        with rk.diagnostics.full_float32():
            gain = my_power_iteration(model, x)

    On exit the backend's setting is what it was before (also when the block
    raises). On a CPU it changes nothing.
    """
    with contextlib.ExitStack() as stack:
        switch = _SWITCHES.get(keras.backend.backend())
        if switch is not None:
            switch(stack)
        yield
