"""On a GPU: what TensorFloat-32 does to a product, and `jacobian_norm` with it allowed.

    KERAS_BACKEND=jax python benchmarks/tf32_check.py
    KERAS_BACKEND=torch python benchmarks/tf32_check.py
    python benchmarks/tf32_check.py            # TensorFlow (a GPU build)

The model is a stack of 6 linear residual blocks, x_l = x_{l-1} (I + A_l)
(width 12), whose outputs and Jacobian norms numpy computes exactly in
float64. The backend is first set as a GPU leaves it by default
(TensorFloat-32 allowed for float32 products). Then, one line each:

- the model's output, with TensorFloat-32 allowed and inside
  `rk.diagnostics.full_float32()`: the largest relative error against numpy;
- `jacobian_norm` (which runs inside `full_float32` itself): converged,
  iterations, the largest relative error of the total and per-block norms.

On a CPU the two outputs agree to float32's rounding and `jacobian_norm`
converges in 68 iterations (errors 3e-6 and 5e-5). On an NVIDIA GPU since
Ampere the first output is expected near 1e-3, and without the instruments'
switch `jacobian_norm` did not converge there (benchmarks/NOTES.md, "GPU:
the library's tests on an H100").
"""

import contextlib
import json

import numpy as np

import keras
import residual_keras as rk
from keras import layers
from residual_keras.diagnostics import full_float32, jacobian_norm

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

    exact = examples.astype("float64") @ product
    for label, context in (("output, TensorFloat-32 allowed", contextlib.nullcontext),
                           ("output, inside full_float32()", full_float32)):
        with context():
            output = keras.ops.convert_to_numpy(model(examples))
        error = float(np.max(np.abs(output - exact)) / np.max(np.abs(exact)))
        print(keras.backend.backend(), device, label, json.dumps({"largest relative error": error}), flush=True)

    result = jacobian_norm(model, examples)
    row = {
        "converged": bool(result["converged"]),
        "iterations": int(result["iterations"]),
        "total: largest relative error": float(np.max(np.abs(result["total"] - exact_total)) / exact_total),
        "blocks: largest relative error": float(
            np.max(np.abs(np.asarray(result["per_block"]) - exact_blocks) / exact_blocks)),
    }
    print(keras.backend.backend(), device, "jacobian_norm", json.dumps(row), flush=True)

if __name__ == "__main__":
    main()
