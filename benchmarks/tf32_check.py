"""On a GPU: `jacobian_norm` with TensorFloat-32 allowed, with and without the instruments' float32 switch.

    KERAS_BACKEND=jax python benchmarks/tf32_check.py
    KERAS_BACKEND=torch python benchmarks/tf32_check.py
    python benchmarks/tf32_check.py            # TensorFlow (a GPU build)

The model is a stack of 6 linear residual blocks, x_l = x_{l-1} (I + A_l)
(width 12), whose Jacobian norms numpy computes exactly in float64. The
backend is first set as a GPU leaves it by default (TensorFloat-32 allowed
for float32 products); then `jacobian_norm` runs twice: as the package
ships it (the instruments switch TensorFloat-32 off while they run,
residual_keras/diagnostics/_precision.py) and with that switch removed.
Prints one line each: converged, iterations, and the largest relative
error of the total and per-block norms. On a CPU both lines are the same
(converged in 68 iterations, errors 3e-6 and 5e-5); on an NVIDIA GPU since
Ampere the second is expected to miss (benchmarks/NOTES.md, "GPU").
"""

import contextlib
import json

import numpy as np

import keras
import residual_keras as rk
from keras import layers
from residual_keras.diagnostics import _state, jacobian_norm

WIDTH, DEPTH = 12, 6


def allow_tensorfloat32():
    """The backend as a GPU has it by default; returns the device's name."""
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        torch.backends.cuda.matmul.fp32_precision = "tf32"
        torch.backends.cudnn.conv.fp32_precision = "tf32"
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    if backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", None)  # JAX's default: TensorFloat-32 on GPUs
        return str(jax.devices()[0])
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(True)
    gpus = tf.config.list_physical_devices("GPU")
    return gpus[0].name if gpus else "cpu"


def main():
    device = allow_tensorfloat32()
    rng = np.random.default_rng(0)
    matrices = [rng.normal(0, 0.4 / np.sqrt(WIDTH), (WIDTH, WIDTH)) for _ in range(DEPTH)]
    inputs = keras.Input((WIDTH,))
    x = inputs
    for index, matrix in enumerate(matrices):
        dense = layers.Dense(WIDTH, use_bias=False)
        dense.build((None, WIDTH))
        dense.kernel.assign(matrix.astype("float32"))
        x = rk.Residual(dense, name=f"block{index + 1}")(x)
    model = keras.Model(inputs, x)
    examples = rng.normal(size=(4, WIDTH)).astype("float32")

    identity, product = np.eye(WIDTH), np.eye(WIDTH)
    for matrix in matrices:
        product = product @ (identity + matrix)
    exact_total = np.linalg.norm(product, 2)
    exact_blocks = np.array([np.linalg.norm(identity + matrix, 2) for matrix in matrices])[:, None]

    for label in ("as shipped (TensorFloat-32 off while measuring)", "switch removed (TensorFloat-32 allowed)"):
        if label.startswith("switch removed"):
            _state.full_float32 = contextlib.nullcontext
        result = jacobian_norm(model, examples)
        row = {
            "converged": bool(result["converged"]),
            "iterations": int(result["iterations"]),
            "total: largest relative error": float(np.max(np.abs(result["total"] - exact_total)) / exact_total),
            "blocks: largest relative error": float(
                np.max(np.abs(np.asarray(result["per_block"]) - exact_blocks) / exact_blocks)),
        }
        print(keras.backend.backend(), device, label, json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
