"""Small input checks shared by the layers and builders.

Every public entry point validates its arguments here so that a student gets
one clear `ValueError` naming the bad value and the accepted ones.
"""


def check_choice(name, value, choices):
    """Raises `ValueError` unless `value` is one of `choices`."""
    if value not in choices:
        accepted = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"Unknown {name}={value!r}. Accepted: {accepted}.")
    return value


def check_positive_int(name, value):
    """Raises `ValueError` unless `value` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value


def check_image_input(layer_name, input_shape):
    """Raises `ValueError` unless `input_shape` is (batch, height, width, channels)."""
    if len(input_shape) != 4:
        raise ValueError(
            f"{layer_name} expects 4D image input (batch, height, width, "
            f"channels), got shape {tuple(input_shape)}."
        )
    if input_shape[-1] is None:
        raise ValueError(
            f"{layer_name} needs a known number of channels, got shape "
            f"{tuple(input_shape)}."
        )


def strided_size(size, strides):
    """Spatial size after a 'same'-padded op with `strides`, or None."""
    return None if size is None else -(-size // strides)


def strided_output_shape(input_shape, strides, channels):
    """(batch, height, width, channels) after a 'same'-padded op with `strides`."""
    batch, height, width, _ = input_shape
    return (batch, strided_size(height, strides), strided_size(width, strides), channels)
