"""The package's public input-validation utility: one clear error for a bad argument.

Every public entry point of `residual_keras` validates its arguments here, so
that a student gets one clear `ValueError` (or `TypeError`) naming the bad
value and the accepted ones; the tracks use the same checks (`check_int`)
for their data pipelines, and a student's own layers may use them too:

    >>> from residual_keras.checks import check_int
    >>> check_int("filters", 16)
    16
    >>> check_int("filters", 0)
    Traceback (most recent call last):
    ...
    ValueError: filters must be a positive integer, got 0.
"""

import functools
import re

import numpy as np


def check_choice(name, value, choices):
    """Raises `ValueError` unless `value` is one of `choices`."""
    if value not in choices:
        accepted = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"Unknown {name}={value!r}. Accepted: {accepted}.")
    return value


def check_bool(name, value, hint=""):
    """Raises `TypeError` unless `value` is True or False (`hint` ends the message)."""
    if value is not True and value is not False:
        raise TypeError(f"{name} must be True or False, got {value!r}.{hint}")
    return value


def check_int(name, value, minimum=1):
    """`value` as an int; `ValueError` unless it is an integer (Python or NumPy, not a bool) >= `minimum`.

    The one integer check of the package and of the tracks.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {wanted}, got {value!r}.")
    return int(value)


def check_positive_int(name, value):
    """`check_int(name, value, minimum=1)`."""
    return check_int(name, value, 1)


DATA_FORMATS = ("channels_last", "channels_first")


def check_data_format(data_format, convolves=True):
    """`data_format`, or Keras' global `image_data_format()` when None; `ValueError` otherwise.

    For a layer that convolves, also `ValueError` for "channels_first" where
    the backend cannot convolve in that layout (`channels_first_refusal`), so
    that a model fails when it is made, with the reason, instead of in its
    first prediction.
    """
    if data_format is None:
        import keras

        data_format = keras.config.image_data_format()
    check_choice("data_format", data_format, DATA_FORMATS)
    if data_format == "channels_first" and convolves:
        refusal = channels_first_refusal()
        if refusal is not None:
            raise ValueError(refusal)
    return data_format


@functools.cache
def channels_first_refusal():
    """Why this backend cannot run a channels_first convolution here, or None (it can).

    TensorFlow's CPU kernels convolve (batch, channels, height, width) only
    through oneDNN, which TensorFlow turns on by itself only on CPUs with
    AVX-512 (TF_ENABLE_ONEDNN_OPTS=1 forces it); elsewhere every eager
    prediction, training step and instrument of a channels_first model
    fails (only XLA-compiled steps run).
    Found by trying one tiny convolution, once per process.
    """
    import keras

    try:
        keras.ops.conv(keras.ops.zeros((1, 1, 2, 2)), keras.ops.zeros((1, 1, 1, 1)),
                       data_format="channels_first")
    except Exception as error:  # noqa: BLE001  (each backend has its own "unimplemented" error)
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        said = next((line for line in lines if "NCHW" in line or "NHWC" in line), lines[0] if lines else "")
        said = re.sub(r"\x1b\[[0-9;]*m|\{\{[^}]*\}\}|\s*name:\s*$", "", said).strip()[:200]
        return (
            f"data_format='channels_first' cannot run on this machine with the {keras.backend.backend()} "
            f"backend ({said}). TensorFlow convolves channels_first on a CPU only with oneDNN, which it "
            "turns on for CPUs with AVX-512 (or with TF_ENABLE_ONEDNN_OPTS=1); only XLA-compiled "
            "steps would run, not predict() or the instruments. Use channels_last (the default), "
            "a GPU, or the JAX or PyTorch backend."
        )
    return None


def channel_axis(data_format):
    """The channels' axis of an image batch: -1 (channels_last) or 1 (channels_first)."""
    return -1 if data_format == "channels_last" else 1


def check_pair(name, value):
    """An int or a pair of ints, each >= 1, as a (height, width) tuple; `ValueError` otherwise.

    Keras' convention for `strides` and `kernel_size`: `2` means `(2, 2)`.
    """
    pair = (value, value) if isinstance(value, int) and not isinstance(value, bool) else value
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in pair)
    ):
        raise ValueError(
            f"{name} must be a positive integer or a pair of them (height, width), got {value!r}."
        )
    return tuple(pair)


def check_image_input(layer_name, input_shape, data_format="channels_last"):
    """Raises `ValueError` unless `input_shape` is a 4D image batch with known channels."""
    layout = "(batch, height, width, channels)" if data_format == "channels_last" else (
        "(batch, channels, height, width)"
    )
    if len(input_shape) != 4:
        raise ValueError(
            f"{layer_name} expects 4D image input {layout} ({data_format}), got shape "
            f"{tuple(input_shape)}."
        )
    if input_shape[channel_axis(data_format)] is None:
        raise ValueError(
            f"{layer_name} needs a known number of channels ({data_format}: {layout}), got shape "
            f"{tuple(input_shape)}."
        )


def input_channels(input_shape, data_format="channels_last"):
    """The number of channels of an image batch's shape."""
    return input_shape[channel_axis(data_format)]


def strided_size(size, strides):
    """Spatial size after a 'same'-padded op with `strides` (an int), or None."""
    return None if size is None else -(-size // strides)


def strided_output_shape(input_shape, strides, channels, data_format="channels_last"):
    """The image batch's shape after a 'same'-padded op with `strides` (height, width) and `channels`."""
    stride_height, stride_width = check_pair("strides", strides)
    if data_format == "channels_last":
        batch, height, width, _ = input_shape
        return (batch, strided_size(height, stride_height), strided_size(width, stride_width), channels)
    batch, _, height, width = input_shape
    return (batch, channels, strided_size(height, stride_height), strided_size(width, stride_width))


__all__ = [
    "DATA_FORMATS",
    "channel_axis",
    "channels_first_refusal",
    "check_bool",
    "check_choice",
    "check_data_format",
    "check_image_input",
    "check_int",
    "check_pair",
    "check_positive_int",
    "input_channels",
    "strided_output_shape",
    "strided_size",
]
