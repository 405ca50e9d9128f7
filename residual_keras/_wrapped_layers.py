"""Calling, building and serializing the layers a `Residual` block wraps (its branch, shortcut and post).

A student's branch need not write `build` or `compute_output_shape`, may or
may not take a mask, and may be a Keras layer or an activation (`post`);
these helpers let `Residual` treat them all alike.
"""

import inspect

import keras
from keras import layers


def _accepts(layer, argument):
    """Whether `layer.call` takes a keyword argument `argument` (a mask, say)."""
    try:
        parameters = inspect.signature(layer.call).parameters
    except (TypeError, ValueError):
        return False
    return argument in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())


def _layer_or_activation(name, value):
    """None, a Keras layer (or its serialized config), or an activation (a name or a callable)."""
    if isinstance(value, dict):
        value = _deserialize(value)
    if value is None or isinstance(value, layers.Layer):
        return value
    if isinstance(value, str) or callable(value):
        return keras.activations.get(value)
    raise TypeError(f"{name} must be None, a Keras layer or an activation, got {value!r}.")


def _serialize(value):
    if value is None:
        return None
    if isinstance(value, layers.Layer):
        return keras.saving.serialize_keras_object(value)
    return {"activation": keras.activations.serialize(value)}


def _deserialize(config):
    if config is None:
        return None
    if isinstance(config, dict) and set(config) == {"activation"}:
        return keras.activations.get(config["activation"])
    return keras.saving.deserialize_keras_object(config)


def _overrides(layer, method):
    return getattr(type(layer), method) is not getattr(layers.Layer, method)


def _build(layer, input_shape):
    """Builds `layer` for inputs of `input_shape` and returns its output shape.

    A layer of one's own need not write `build` or `compute_output_shape`
    (sublayers made in `__init__`, as Keras' guide allows): `_output_shape`
    then traces its `call` on a symbolic input, which builds its sublayers, as
    Keras does when such a layer is first called.
    """
    if not layer.built and _overrides(layer, "build"):
        layer.build(input_shape)
    return _output_shape(layer, input_shape)


def _output_shape(layer, input_shape):
    """`layer`'s `compute_output_shape`, or the shape of a symbolic call where it writes none."""
    if _overrides(layer, "compute_output_shape"):
        return tuple(layer.compute_output_shape(input_shape))
    spec = layer.compute_output_spec(keras.KerasTensor(tuple(input_shape), dtype=layer.compute_dtype))
    return tuple(spec.shape)
