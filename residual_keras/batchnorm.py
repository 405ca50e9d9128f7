"""`BatchNormalization` with TensorFlow's fused kernel, and its one switch `use_fused`.

On the TensorFlow backend Keras 3's `keras.layers.BatchNormalization`
computes the batch moments and the normalisation as separate ops (mean,
squared difference, mean, rsqrt, multiply, add ... and as many again in the
gradient). This subclass computes the same thing with TensorFlow's fused
kernel, `FusedBatchNormV3` (one op forward, `FusedBatchNormGradV3` backward,
through TensorFlow's registered gradient), which XLA also compiles
(`jit_compile=True`). Every BatchNorm of the library's blocks, shortcuts and
`cifar_resnet` is one.

It is a drop-in replacement: the same constructor, `get_config` and weights
(`gamma`, `beta`, `moving_mean`, `moving_variance`, same names and shapes),
and the same numbers up to float32 rounding. The moving statistics are
updated exactly as Keras 3 updates them,

    moving = moving * momentum + batch * (1 - momentum),

with the biased batch variance (divided by n, the number of values per
channel): the fused kernel returns the Bessel-corrected variance (divided by
n - 1), which is scaled back by (n - 1) / n before the update. Under a mixed
policy (`mixed_bfloat16`, `mixed_float16`) the kernel takes the bfloat16 /
float16 input with float32 gamma, beta and statistics, computes in float32
and returns the compute dtype, as Keras does with its float32 upcast.

The fused path runs on the TensorFlow backend for a 4-D input whose channel
axis is last (NHWC) or axis 1 (NCHW; TensorFlow's CPU kernel takes it too),
in float32, bfloat16 or float16, with no mask, and for a layer without
`renorm` or `synchronized`. Anything else (another backend, another rank or
axis, float64, a mask, renorm, synchronized) is exactly Keras' own
`BatchNormalization.call`.

The switch (default on):

    from residual_keras import batchnorm

    batchnorm.use_fused(False)          # Keras' own ops from now on
    with batchnorm.use_fused(False):    # ... or only inside the block
        ...
    batchnorm.use_fused(None)           # back to the default
    batchnorm.fused_enabled()           # what a call would do now

or, for a whole process, the environment variable
`RESIDUAL_KERAS_FUSED_BATCHNORM=0` (also `false`, `off`, `no`). An explicit
`use_fused(True/False)` overrides the variable. The switch is read when a
layer's `call` runs or is traced: a function already traced
(`model.fit`'s train function) keeps its path; set the switch before
`compile`/`fit` (or build the model anew). On JAX and PyTorch it has no
effect: the layer is Keras' `BatchNormalization` there.

The class keeps Keras' name, `BatchNormalization`, on purpose: a `.keras`
or `.weights.h5` file keys the weights of a list of layers (a functional
model's) by class name (`batch_normalization`, `batch_normalization_1`,
...), so weights saved from a model with Keras' layer load into the same
model built with this one. Files saved with Keras' layer load as they are.

TensorFlow is imported only inside the TensorFlow branch: the module imports
on JAX and PyTorch without TensorFlow installed.
"""

import os
from typing import Optional

import keras
from keras import ops

ENVIRONMENT_VARIABLE = "RESIDUAL_KERAS_FUSED_BATCHNORM"
_OFF = ("0", "false", "off", "no")
_ON = ("", "1", "true", "on", "yes")
# The input dtypes FusedBatchNormV3 takes (its T; gamma, beta and statistics are float32).
_FUSED_DTYPES = ("float32", "bfloat16", "float16")

# None: follow the environment variable; True/False: set by use_fused.
_explicit: Optional[bool] = None


def _environment_default() -> bool:
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ValueError(
        f"{ENVIRONMENT_VARIABLE} must be one of {', '.join(repr(v) for v in _OFF + _ON[1:])} "
        f"(or unset), got {os.environ[ENVIRONMENT_VARIABLE]!r}."
    )


def fused_enabled() -> bool:
    """Whether the switch is on: `use_fused`'s setting, else the environment variable (default on).

    The fused kernel itself runs only on the TensorFlow backend, for the
    inputs it covers (module docstring)."""
    return _environment_default() if _explicit is None else _explicit


class _Switch:
    """What `use_fused` returns: the setting is made already; as a context manager it is undone on exit."""

    def __init__(self, previous: Optional[bool]) -> None:
        self._previous = previous

    def __enter__(self) -> "_Switch":
        return self

    def __exit__(self, *exc_info) -> None:
        global _explicit
        _explicit = self._previous


def use_fused(enabled: Optional[bool]) -> _Switch:
    """Turns the fused BatchNorm on (True) or off (False), or back to the default (None).

    Takes effect at once; used as a context manager (`with use_fused(False):`)
    the previous setting comes back on exit."""
    global _explicit
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"use_fused takes True, False or None, got {enabled!r}.")
    previous, _explicit = _explicit, enabled
    return _Switch(previous)


@keras.saving.register_keras_serializable(package="residual_keras")
class BatchNormalization(keras.layers.BatchNormalization):
    """Keras' `BatchNormalization`, with TensorFlow's fused kernel where it applies.

    Same arguments, config, weights and results as
    `keras.layers.BatchNormalization`; see the module docstring for when the
    fused kernel runs and for its switch (`use_fused`)."""

    def _fused_data_format(self, inputs, mask) -> Optional[str]:
        """"NHWC" or "NCHW" where the fused kernel applies to this call, else None."""
        if (
            keras.backend.backend() != "tensorflow"
            or mask is not None
            or self.renorm
            or self.synchronized
            or not fused_enabled()
        ):
            return None
        if len(inputs.shape) != 4 or keras.backend.standardize_dtype(inputs.dtype) not in _FUSED_DTYPES:
            return None
        axis = self.axis % 4
        return {3: "NHWC", 1: "NCHW"}.get(axis)

    def call(self, inputs, training=None, mask=None):
        data_format = self._fused_data_format(inputs, mask)
        if data_format is None:
            return super().call(inputs, training=training, mask=mask)
        return self._fused_call(inputs, bool(training and self.trainable), data_format)

    def _fused_call(self, inputs, training, data_format):
        import tensorflow as tf  # the TensorFlow backend only

        channels = inputs.shape[self.axis]
        scale = ops.cast(self.gamma, "float32") if self.scale else tf.ones([channels], tf.float32)
        offset = ops.cast(self.beta, "float32") if self.center else tf.zeros([channels], tf.float32)
        moving_mean = ops.cast(self.moving_mean, "float32")
        moving_variance = ops.cast(self.moving_variance, "float32")
        # In training the kernel computes the batch's statistics (its statistics inputs are
        # unused with exponential_avg_factor 1); in inference it reads the moving ones.
        empty = tf.constant([], tf.float32)
        outputs, mean, variance = tf.raw_ops.FusedBatchNormV3(
            x=inputs,
            scale=scale,
            offset=offset,
            mean=empty if training else moving_mean,
            variance=empty if training else moving_variance,
            epsilon=self.epsilon,
            exponential_avg_factor=1.0,
            data_format=data_format,
            is_training=bool(training),
        )[:3]
        if training:
            # The kernel's batch variance (its output 2, "for the running variance") is
            # Bessel-corrected, n / max(n - 1, 1) times the biased one that Keras uses
            # (so on the CPU and under XLA: test_the_moving_variance_is_keras_biased_one).
            variance = variance * _bessel_inverse(inputs, channels)
            self.moving_mean.assign(moving_mean * self.momentum + mean * (1.0 - self.momentum))
            self.moving_variance.assign(
                moving_variance * self.momentum + variance * (1.0 - self.momentum)
            )
        return ops.cast(outputs, self.compute_dtype)


def _bessel_inverse(inputs, channels):
    """max(n - 1, 1) / n for n values per channel: the factor from the unbiased variance back to the biased one."""
    import tensorflow as tf  # the TensorFlow backend only

    if inputs.shape.is_fully_defined():
        n = inputs.shape.num_elements() // channels
        return tf.constant(max(n - 1, 1) / max(n, 1), tf.float32)
    n = tf.cast(tf.size(inputs, out_type=tf.int64) // channels, tf.float32)
    return tf.maximum(n - 1.0, 1.0) / tf.maximum(n, 1.0)


__all__ = ["ENVIRONMENT_VARIABLE", "BatchNormalization", "fused_enabled", "use_fused"]
