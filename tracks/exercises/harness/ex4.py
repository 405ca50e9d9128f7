"""Exercise 4's probes: the student's Jacobian functions on branches built from the grader's numbers.

The branches record every point they are evaluated at: automatic
differentiation evaluates a function at the point itself, finite
differences at points beside it, which the grader sees.
"""

import numpy as np

from .values import plain


def _record(points, name, x):
    """Appends the point `x` (eagerly, or when a traced function runs) to points[name]."""
    import tensorflow as tf

    def keep(value):
        points[name].append(np.asarray(value, "float64").ravel().tolist())
        return np.float32(0)

    if tf.executing_eagerly():
        keep(x)
    else:
        tf.numpy_function(keep, [x], tf.float32, stateful=True)


def branches(inputs, points):
    """f1, f2 (keras.ops, float32) and x: what the student's functions are called with; evaluations kept."""
    import keras

    ops, scale = keras.ops, inputs["scale"]
    W1, W2 = (ops.convert_to_tensor(np.asarray(inputs[k], "float32")) for k in ("W1", "W2"))
    b1, b2 = (ops.convert_to_tensor(np.asarray(inputs[k], "float32")) for k in ("b1", "b2"))

    def f1(x):
        _record(points, "f1", x)
        return scale * ops.tanh(ops.matmul(W1, x) + b1)

    def f2(x):
        _record(points, "f2", x)
        return scale * ops.tanh(ops.matmul(W2, x) + b2)

    return f1, f2, np.asarray(inputs["x"], "float32")


def probe_layout(module, inputs):
    points = {"f1": [], "f2": []}
    f1, _, x = branches(inputs, points)
    return {"value": plain(module.jacobian(f1, x)), "points": points}


def probe_terms(module, inputs):
    points = {"f1": [], "f2": []}
    f1, f2, x = branches(inputs, points)
    found = module.two_block_terms(f1, f2, x)
    return {"value": {key: plain(found[key]) for key in ("I", "J1", "J2", "J2J1", "total") if key in found},
            "points": points}


def probe_identity_error(module, inputs):
    points = {"f1": [], "f2": []}
    f1, f2, x = branches(inputs, points)
    return {"value": plain(module.identity_term_error(f1, f2, x)), "points": points}


PROBES = {"layout": probe_layout, "terms": probe_terms, "identity_error": probe_identity_error}
