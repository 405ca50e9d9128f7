"""What the harness sends back, and how it hands the grader's weights to a student's layer.

Nothing here decides anything: `plain` turns what the student's code
computed into JSON-ready values, `weights_of` reads a layer's weights back,
`assign_by_shape` and `set_drawn_weights` give a layer the values the grader
chose (by shape, or drawn from a seed the grader can draw again).
"""

import numpy as np


def plain(value):
    """`value` as JSON-ready data: arrays and tensors as nested lists, numpy scalars as Python ones.

    Integers stay Python integers (exact however large), so an overflow in the
    student's code shows as the wrong number it produced.
    """
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    return np.asarray(_to_numpy(value)).tolist()


def _to_numpy(value):
    if isinstance(value, np.ndarray):
        return value
    import keras

    return keras.ops.convert_to_numpy(value)


def attempt(compute):
    """`plain(compute())`, or {"error": "Type: message"} when the student's code raised (an `Exception`):
    one failing case leaves the others of a probe their values."""
    try:
        return plain(compute())
    except Exception as error:  # noqa: BLE001  (the student's code may raise anything)
        message = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return {"error": f"{type(error).__name__}{': ' + message if message else ''}"}


def numpy(value):
    """A Keras tensor (or anything array-like) as a float64 numpy array."""
    return np.asarray(_to_numpy(value), dtype="float64")


def weights_of(layer):
    """[{name, shape, value}] of a layer's trainable weights, read after it has been called (so built)."""
    return [{"name": str(weight.path), "shape": list(weight.shape), "value": numpy(weight).tolist()}
            for weight in layer.trainable_weights]


def assign_by_shape(layer, arrays):
    """Gives each weight of `layer` the first unused array of its shape among `arrays` (the grader's choice).

    The grader picks shapes that tell the weights apart (a kernel (width,
    hidden), a bias (hidden,), ...), so no name or order of the student's is
    needed. Returns how many weights were assigned.
    """
    free = [np.asarray(item, "float32") for item in arrays]
    assigned = 0
    for weight in layer.trainable_weights:
        match = next((i for i, item in enumerate(free) if item.shape == tuple(weight.shape)), None)
        if match is not None:
            weight.assign(free.pop(match))
            assigned += 1
    return assigned


def drawn_weight(rng, name, shape):
    """The value `set_drawn_weights` gives one weight: the grader draws the same from the same seed.

    Kernels get a spread of 1 / sqrt(their fan-in), vectors 0.3 around 0, a
    LayerNorm's gamma 0.3 around 1: far from any initial value, and no two alike.
    """
    shape = tuple(int(size) for size in shape)
    noise = rng.standard_normal(shape)
    if len(shape) >= 2:
        return (noise / np.sqrt(max(1, int(np.prod(shape[:-1]))))).astype("float32")
    return (0.3 * noise + (1.0 if name.endswith("gamma") else 0.0)).astype("float32")


def set_drawn_weights(layer, seed):
    """Gives every weight of `layer`, in its order, a value drawn from `seed`; returns [{name, shape}]."""
    rng = np.random.default_rng(seed)
    found = []
    for weight in layer.weights:
        name, shape = str(weight.path), [int(size) for size in weight.shape]
        weight.assign(drawn_weight(rng, name, shape))
        found.append({"name": name, "shape": shape})
    return found


__all__ = ["assign_by_shape", "attempt", "drawn_weight", "numpy", "plain", "set_drawn_weights", "weights_of"]
