"""Small numeric helpers the instruments share: norms per example, means over the real positions, numpy."""

import keras
import numpy as np
from keras import ops

_TINY = 1e-300


def _smallest_normal(dtype):
    """Smallest positive normal number of a float dtype (float32's for bfloat16)."""
    dtype = keras.backend.standardize_dtype(dtype)
    return float(np.finfo(dtype).tiny) if dtype in ("float16", "float64") else 1.2e-38


def _to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def _per_example_norm(x, dtype="float32"):
    """Euclidean norm of each example (all axes but the first).

    Scaled by each example's largest entry first, so that neither squares of
    tiny entries (1e-30) underflow nor squares of huge ones overflow: float32
    is enough, which matters on JAX (no float64 unless enabled).
    """
    x = ops.reshape(ops.cast(x, dtype), (ops.shape(x)[0], -1))
    scale = ops.max(ops.abs(x), axis=1, keepdims=True)
    safe = ops.where(scale > 0, scale, ops.ones_like(scale))
    # An all-zero example has scale 0: its norm comes out as sqrt(0) * 0 = 0.
    return ops.sqrt(ops.sum(ops.square(x / safe), axis=1)) * ops.squeeze(scale, axis=1)


def _per_example_rms(x):
    x = ops.cast(x, "float32")
    return ops.sqrt(ops.mean(ops.square(ops.reshape(x, (ops.shape(x)[0], -1))), axis=1))


def _masked(x, mask):
    """`x` (B, T, ...) with the positions where `mask` (B, T) is False set to 0; `x` when mask is None."""
    if mask is None:
        return x
    mask = ops.cast(mask, x.dtype)
    return x * ops.reshape(mask, tuple(ops.shape(mask)) + (1,) * (len(x.shape) - 2))


def _per_example_masked_rms(x, mask):
    """RMS of each example over its real positions (`mask` (B, T) True), all channels."""
    if mask is None:
        return _per_example_rms(x)
    x = ops.cast(_masked(x, mask), "float32")
    total = ops.sum(ops.square(ops.reshape(x, (ops.shape(x)[0], -1))), axis=1)
    entries_per_position = float(np.prod(x.shape[2:])) if len(x.shape) > 2 else 1.0
    count = ops.maximum(ops.sum(ops.cast(mask, "float32"), axis=1) * entries_per_position, 1.0)
    return ops.sqrt(total / count)


def masked_mean(values, mask):
    """The mean of `values` over the positions where `mask` is True, as Keras' losses reduce a masked output.

    `sum(values * mask) / sum(mask)` (0 where no position is real, as
    Keras' `divide_no_nan`); the plain mean where `mask` is None or does not
    have the shape of `values` (a scalar, or one value per example).
    """
    values = ops.cast(values, "float32")
    if mask is None or tuple(values.shape) != tuple(mask.shape):
        return ops.mean(values)
    weights = ops.cast(mask, "float32")
    return ops.divide_no_nan(ops.sum(values * weights), ops.sum(weights))
