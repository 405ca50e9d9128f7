"""Checking that XLA really compiled a model's training step.

Keras silently turns `jit_compile=True` off when a layer does not support it
(a warning, then `model.jit_compile == False`), and `jit_compile="auto"` means
"off" on a CPU. This module looks inside the compiled Keras train function for
the `tf.function` that ran the step and reports whether it was traced with
`jit_compile=True`: such a function is compiled by XLA or fails loudly, so a
traced one proves XLA ran.
"""

import tensorflow as tf


def _tf_functions(obj, seen):
    """Yields every `tf.function` reachable from `obj` through closures and wrappers."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, tf.types.experimental.PolymorphicFunction):
        yield obj
        obj = getattr(obj, "python_function", None)
        if obj is None:
            return
    wrapped = getattr(obj, "__wrapped__", None)
    if wrapped is not None:
        yield from _tf_functions(wrapped, seen)
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(contents):
            yield from _tf_functions(contents, seen)


def xla_step_ran(model, function="train"):
    """True when the model's `function` step ran as an XLA-compiled `tf.function`.

    Args:
        model: a compiled `keras.Model` that has run `fit` (or `evaluate` /
            `predict` for function="test" / "predict") at least once.
        function: "train", "test" or "predict".
    """
    step = getattr(model, f"{function}_function", None)
    if step is None or not model.jit_compile:
        return False
    for tf_function in _tf_functions(step, set()):
        if getattr(tf_function, "_jit_compile", False) and (
            tf_function.experimental_get_tracing_count() > 0
        ):
            return True
    return False
