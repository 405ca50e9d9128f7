"""Exercise 1: y = x + f(x) as a Keras layer, with a plain twin (self-test (a), and the core skill).

The grader draws the widths, the input, a second set of weights and a stack
depth from the run's seed. The submission's process calls the student's
layer (which builds it, so Dense layers made in build() have their weights)
and sends back its outputs and weights; x + f(x) is computed here from those
weights, and again from the grader's own weights after the process has
given them to the layer, to the saved and reloaded layer and to a stack.
"""

import numpy as np

from tracks.exercises.exercise import (CheckSpec, Exercise, array, assign_by_shape, close, find,
                                       largest_difference, mlp, plain, weights_of)

SKELETON = '''"""Exercise 1: y = x + f(x) as a Keras layer, with a plain twin.

The course's first line: a residual block learns a function f and adds its
input back, y = x + f(x). Its Jacobian is I + df/dx, so the gradient keeps
an identity path through any depth; the plain twin y = f(x) keeps only
df/dx, and a stack of them multiplies one Jacobian per block.

Write `ResidualMLP`: f is Dense(hidden, activation="relu") followed by
Dense(width of the input). With `residual=True` the layer computes
x + f(x); with `residual=False`, f(x) alone (the plain twin, with exactly the
same weights). Register it for saving and give it a complete get_config.

Check your work:  python -m tracks check THIS_FILE

Hints:
- keras.saving.register_keras_serializable(package="exercises") above the class;
- create the two Dense layers in build(input_shape): the output width is input_shape[-1];
- get_config must return every constructor argument, so that
  ResidualMLP.from_config(layer.get_config()) builds the same layer.
"""

import keras

EXERCISE = 1


class ResidualMLP(keras.layers.Layer):
    def __init__(self, hidden, residual=True, **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden
        self.residual = residual

    def build(self, input_shape):
        raise NotImplementedError("create the two Dense layers of f here")

    def call(self, x):
        raise NotImplementedError("x + f(x), or f(x) for the plain twin")

    def get_config(self):
        return super().get_config()
'''


def draw(rng):
    width = int(rng.integers(4, 13))
    hidden = int(rng.choice([h for h in range(8, 25) if h != width]))
    depth = int(rng.integers(6, 13))

    def weights(scale):
        return [(rng.standard_normal(shape) * scale).astype("float32").tolist()
                for shape in ((width, hidden), (hidden,), (hidden, width), (width,))]

    return {"width": width, "hidden": hidden, "x": rng.standard_normal((4, width)).astype("float32").tolist(),
            "new": weights(0.5), "stack": [weights(0.3) for _ in range(depth)]}


def _x(inputs):
    return np.asarray(inputs["x"], "float32")


def _f(inputs, weights):
    return mlp(_x(inputs).astype("float64"), *(np.asarray(w, "float32").astype("float64") for w in weights))


def _layer(module):
    cls = getattr(module, "ResidualMLP", None)
    if cls is None:
        raise AttributeError("no class ResidualMLP in the file")
    return cls


# the shape --------------------------------------------------------------------------------------------------


def probe_shape(module, inputs):
    return list(_layer(module)(inputs["hidden"])(_x(inputs)).shape)


def judge_shape(inputs, value):
    expected = list(_x(inputs).shape)
    ok = list(value) == expected
    return ok, f"{tuple(value)} for an input {tuple(expected)}", \
        "f must end with Dense(input_shape[-1]): y = x + f(x) needs f(x) of x's shape"


# y = x + f(x), and the plain twin ----------------------------------------------------------------------------


def probe_equation(module, inputs):
    cls, x = _layer(module), _x(inputs)
    residual, plain_twin = cls(inputs["hidden"]), cls(inputs["hidden"], residual=False)
    residual(x), plain_twin(x)  # builds both, whether the Dense layers are made in __init__ or build()
    plain_twin.set_weights(residual.get_weights())
    return {"residual": plain(residual(x)), "plain": plain(plain_twin(x)), "weights": weights_of(residual)}


def _classify(x, residual, plain_out, f):
    """The hint for a layer whose outputs are not x + f(x) and f(x)."""
    difference = residual - plain_out
    if close(residual, f, atol=1e-4) or np.allclose(difference, 0.0, atol=1e-6):
        return ("residual=True computes the same as the plain twin: the shortcut is missing. Return x + f(x), so "
                "that the Jacobian is I + df/dx, not df/dx alone.")
    if close(difference, np.maximum(x, 0), atol=1e-4):
        return ("you add ReLU(x), not x: a ReLU before the addition cuts the identity path's negative half (its "
                "Jacobian is a 0/1 mask). The shortcut carries x itself.")
    if np.all(residual >= 0):
        return ("the output is never negative: something follows the addition (ReLU(x + f(x)), He et al.'s original "
                "block). This exercise asks for x + f(x), nothing after the addition.")
    return ("residual minus its plain twin should be exactly x, and the plain twin f(x) = Dense(width)(Dense(hidden, "
            "relu)(x)): check that residual=True only adds x, and residual=False only leaves it out")


def judge_equation(inputs, value):
    width, hidden, x = inputs["width"], inputs["hidden"], _x(inputs).astype("float64")
    residual, plain_out = array(value["residual"], x.shape, "the output"), array(value["plain"], x.shape, "the twin")
    weights = [find(value["weights"], shape, what) for shape, what in
               (((width, hidden), "first kernel"), ((hidden,), "first bias"), ((hidden, width), "last kernel"),
                ((width,), "last bias"))]
    f = mlp(x, *weights)
    detail = (f"from your layer's weights: residual differs from x + f(x) by "
              f"{largest_difference(residual, x + f):.3g}, "
              f"the plain twin from f(x) by {largest_difference(plain_out, f):.3g}")
    if close(residual, x + f, atol=1e-4) and close(plain_out, f, atol=1e-4):
        return True, detail, ""
    return False, detail, _classify(x, residual, plain_out, f)


# with other weights ---------------------------------------------------------------------------------------


def probe_other_weights(module, inputs):
    cls, x = _layer(module), _x(inputs)
    layers = cls(inputs["hidden"]), cls(inputs["hidden"], residual=False)
    outputs = []
    for layer in layers:
        layer(x)
        assign_by_shape(layer, inputs["new"])
        outputs.append(plain(layer(x)))
    return outputs


def judge_other_weights(inputs, value):
    x, f = _x(inputs).astype("float64"), _f(inputs, inputs["new"])
    residual, plain_out = (array(out, x.shape, "the output") for out in value)
    detail = (f"with the grader's weights: residual differs from x + f(x) by "
              f"{largest_difference(residual, x + f):.3g}, "
              f"the plain twin from f(x) by {largest_difference(plain_out, f):.3g}")
    if close(residual, x + f, atol=1e-4) and close(plain_out, f, atol=1e-4):
        return True, detail, ""
    return False, detail, ("with new weights the layer must compute with them: call() reads the Dense layers "
                           "made in build() every time (no value computed once and kept). " +
                           _classify(x, residual, plain_out, f))


# the parameter count ----------------------------------------------------------------------------------------


def probe_parameters(module, inputs):
    layer = _layer(module)(inputs["hidden"])
    layer(_x(inputs))  # built by its first call: weights made in build() exist from here on
    return [list(weight.shape) for weight in layer.trainable_weights]


def judge_parameters(inputs, value):
    width, hidden = inputs["width"], inputs["hidden"]
    expected = width * hidden + hidden + hidden * width + width
    got = int(sum(np.prod(shape) for shape in value))
    return got == expected, f"{got:,} trainable parameters after the first call (expected {expected:,})", \
        (f"f is exactly Dense(hidden, relu) then Dense(width), both with biases: {width}x{hidden} + {hidden} + "
         f"{hidden}x{width} + {width}; the shortcut has no weights")


# saving -----------------------------------------------------------------------------------------------------


def probe_saving(module, inputs):
    import keras

    cls, x = _layer(module), _x(inputs)
    found = {}
    for residual in (True, False):
        layer = cls(inputs["hidden"], residual=residual, name="block")
        layer(x)
        assign_by_shape(layer, inputs["new"])
        config = layer.get_config()
        clone = cls.from_config(config)
        clone(x)
        assign_by_shape(clone, inputs["new"])
        revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        model_input = keras.Input((inputs["width"],))
        model = keras.Model(model_input, layer(model_input))
        model.save("model.keras")  # in the submission's own empty working folder
        loaded = keras.saving.load_model("model.keras")
        found[str(residual)] = {"config": {key: plain(config.get(key)) for key in ("hidden", "residual")},
                                "keys": sorted(map(str, config)), "clone": plain(clone(x)),
                                "revived": type(revived).__name__, "loaded": plain(loaded(x))}
    return found


def judge_saving(inputs, value):
    x, f = _x(inputs).astype("float64"), _f(inputs, inputs["new"])
    for residual, expected in (("True", x + f), ("False", f)):
        entry = value[residual]
        twin = "the layer" if residual == "True" else "the plain twin (residual=False)"
        missing = [key for key in ("hidden", "residual") if key not in entry["keys"]]
        if missing or entry["config"] != {"hidden": inputs["hidden"], "residual": residual == "True"}:
            return False, f"{twin}: get_config gives {entry['config']} (missing: {missing or 'none'})", \
                ("get_config must return every constructor argument: {**super().get_config(), 'hidden': ..., "
                 "'residual': ...}; without residual a plain twin comes back from its config as a residual layer")
        if not close(array(entry["clone"], x.shape), expected, atol=1e-4):
            return False, f"{twin}: from_config(get_config()) computes something else", \
                "from_config(get_config()) must give the same layer: return hidden and residual from get_config"
        if entry["revived"] != "ResidualMLP":
            return False, f"{twin}: deserialized as {entry['revived']}", \
                "decorate the class with @keras.saving.register_keras_serializable(package=\"exercises\")"
        if not close(array(entry["loaded"], x.shape), expected, atol=1e-4):
            return False, f"{twin}: the saved and reloaded model computes something else", \
                "a .keras file stores get_config and the weights: both must give the layer back"
    return True, "get_config (hidden, residual), from_config, registration and a .keras file, for both twins", ""


# a stack ----------------------------------------------------------------------------------------------------


def probe_stack(module, inputs):
    import keras

    cls = _layer(module)
    model = keras.Sequential([keras.Input((inputs["width"],)),
                              *(cls(inputs["hidden"], name=f"block{i}") for i in range(len(inputs["stack"])))])
    for layer, weights in zip(model.layers, inputs["stack"]):
        assign_by_shape(layer, weights)
    return plain(model(_x(inputs)))


def judge_stack(inputs, value):
    stream = _x(inputs).astype("float64")
    for weights in inputs["stack"]:
        stream = stream + mlp(stream, *(np.asarray(w, "float32").astype("float64") for w in weights))
    got = array(value, stream.shape, "the stack's output")
    scale = max(1.0, float(np.max(np.abs(stream))))
    ok = close(got, stream, rtol=1e-4, atol=1e-4 * scale)
    return ok, f"{len(inputs['stack'])} blocks: differs from x_0 + the sum of the f's by " \
               f"{largest_difference(got, stream):.3g}", \
        "the layer must work on the output of another one, inside a keras.Model (built from a symbolic input)"


EXERCISE = Exercise(
    number=1, title="y = x + f(x) as a Keras layer, with a plain twin", self_test="(a), and the core skill",
    filename="ex1_residual_layer.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("shape", "the output has the input's shape", probe_shape, judge_shape,
                  "build() creates f's two Dense layers, call() returns x + f(x)"),
        CheckSpec("equation", "y = x + f(x), and the plain twin f(x) with the same weights", probe_equation,
                  judge_equation, "call() returns x + f(x) when residual is True and f(x) when it is False"),
        CheckSpec("other_weights", "with other weights, still x + f(x) and f(x)", probe_other_weights,
                  judge_other_weights, "call() uses the weights of the Dense layers made in build()"),
        CheckSpec("parameters", "the parameter count of f", probe_parameters, judge_parameters,
                  "build() creates the two Dense layers"),
        CheckSpec("saving", "saving: get_config with hidden and residual, registration, a .keras file",
                  probe_saving, judge_saving,
                  "get_config returns {**super().get_config(), 'hidden': ..., 'residual': ...}"),
        CheckSpec("stack", "a stack of blocks in a keras.Model computes x_0 + every block's f", probe_stack,
                  judge_stack, "the layer must work when called on the output of another one"),
    ))
