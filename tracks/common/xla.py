"""Checking that XLA really compiled a model's step.

Keras silently turns `jit_compile=True` off when a layer does not support it
(`supports_jit = False`), when op determinism is enabled, or on a Mac GPU: it
warns and sets the public `model.jit_compile` to False. With the TensorFlow
backend, a step compiled while `model.jit_compile` is True is a
`tf.function(jit_compile=True)`, which XLA compiles or fails loudly. So the
public flag, read after the step ran, tells whether XLA ran
(tests/tracks/test_xla.py checks it on a model where Keras does fall back).
"""


def xla_step_ran(model, function="train"):
    """True when the model's `function` step ran with XLA.

    Args:
        model: a compiled `keras.Model` that has run `fit` (or `evaluate` /
            `predict` for function="test" / "predict") at least once.
        function: "train", "test" or "predict".
    """
    step = getattr(model, f"{function}_function", None)
    return step is not None and bool(model.jit_compile)
