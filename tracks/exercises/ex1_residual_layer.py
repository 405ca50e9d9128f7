"""Exercise 1: y = x + f(x) as a Keras layer, with a plain twin (self-test (a), and the core skill).

What the exercise asks, each tested in general: the layer computes x + f(x)
(and its twin f(x)) with f = Dense(hidden, relu) -> Dense(width of the
input), for any leading batch shape (rank 2 and rank 3 inputs, the layer
built on each), in training and in inference mode, with the weights it is
given; it saves and loads; it stacks. The grader draws the widths, the
inputs and the weights from the run's seed; the submission's process
(harness/ex1.py) gives the grader's weights to the student's layer and sends
back its outputs; x + f(x) is computed here, in float64, from those weights.
"""

import numpy as np

from tracks.exercises.exercise import CheckSpec, Exercise, array, close, find, largest_difference, mlp

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
    # the width is never another size of the inputs (the batches 4 and 2, seq 2 or 3, hidden): a layer that reads
    # its width off another axis (input_shape[0], input_shape[1]) gets a wrong one in every draw
    width = int(rng.integers(5, 13))
    hidden = int(rng.choice([h for h in range(8, 25) if h != width]))
    depth = int(rng.integers(6, 13))
    seq = int(rng.integers(2, 4))

    def weights(scale):
        return [(rng.standard_normal(shape) * scale).astype("float32").tolist()
                for shape in ((width, hidden), (hidden,), (hidden, width), (width,))]

    return {"width": width, "hidden": hidden, "x": rng.standard_normal((4, width)).astype("float32").tolist(),
            "x3": rng.standard_normal((2, seq, width)).astype("float32").tolist(),
            "new": weights(0.5), "stack": [weights(0.3) for _ in range(depth)]}


TOLERANCE = 1e-4  # of the largest value: the solution's float32 is off by under 4e-7 of it (10 seeds)


def _size(*arrays):
    """The size of a computation: its largest value (a difference that should be 0 is measured against it)."""
    return max(float(np.max(np.abs(a))) for a in arrays)


def _x(inputs, rank="2"):
    return np.asarray(inputs["x" if rank == "2" else "x3"], "float32").astype("float64")


def _f(x, weights):
    return mlp(x, *(np.asarray(w, "float32").astype("float64") for w in weights))


def _own_weights(inputs, weights):
    """The layer's own initial weights read back, in f's order, or None when they are not f's four."""
    width, hidden = inputs["width"], inputs["hidden"]
    try:
        return [find(weights, shape, "weight") for shape in ((width, hidden), (hidden,), (hidden, width), (width,))]
    except Exception:  # noqa: BLE001  (the submission's values)
        return None


# the shape --------------------------------------------------------------------------------------------------


def judge_shape(inputs, value):
    expected = {rank: list(_x(inputs, rank).shape) for rank in ("2", "3")}
    for rank in ("2", "3"):
        if isinstance(value[rank], dict):
            return False, f"on an input {tuple(expected[rank])} the layer raised {str(value[rank].get('error'))[:200]}", \
                ("f must end with Dense(input_shape[-1]), the last axis: y = x + f(x) needs f(x) of x's shape for "
                 "(batch, width) and (batch, seq, width) inputs alike")
    got = {rank: list(value[rank]) for rank in ("2", "3")}
    detail = f"{tuple(got['2'])} for an input {tuple(expected['2'])}, {tuple(got['3'])} for {tuple(expected['3'])}"
    return got == expected, detail, ("f must end with Dense(input_shape[-1]), the last axis: y = x + f(x) needs "
                                     "f(x) of x's shape for (batch, width) and (batch, seq, width) inputs alike")


# y = x + f(x), and the plain twin, with the grader's weights -----------------------------------------------------


def _classify(x, residual, plain_out, f, own=None):
    """The hint for a layer whose outputs are not x + f(x) and f(x)."""
    difference = residual - plain_out
    if own is not None and close(residual, x + _f(x, own), TOLERANCE):
        return ("the output is x + f(x) with the layer's first weights, not with the weights it holds now: call() "
                "must read the Dense layers made in build() every time (no copy of their values kept)")
    if close(residual, f, TOLERANCE) or close(difference, np.zeros_like(x), TOLERANCE, scale=_size(x, f)):
        return ("residual=True computes the same as the plain twin: the shortcut is missing. Return x + f(x), so "
                "that the Jacobian is I + df/dx, not df/dx alone.")
    if close(difference, np.maximum(x, 0), TOLERANCE, scale=_size(x, f)):
        return ("you add ReLU(x), not x: a ReLU before the addition cuts the identity path's negative half (its "
                "Jacobian is a 0/1 mask). The shortcut carries x itself.")
    if np.all(residual >= 0):
        return ("the output is never negative: something follows the addition (ReLU(x + f(x)), He et al.'s original "
                "block). This exercise asks for x + f(x), nothing after the addition.")
    return ("residual minus its plain twin should be exactly x, and the plain twin f(x) = Dense(width)(Dense(hidden, "
            "relu)(x)): check that residual=True only adds x, and residual=False only leaves it out")


def _forms(x, f, own):
    """What a layer of this exercise may compute, right or a known mistake, from weights known here."""
    forms = {"x + f(x)": x + f, "f(x)": f, "relu(x + f(x))": np.maximum(x + f, 0.0), "relu(x) + f(x)": np.maximum(x, 0.0) + f}
    if own is not None:
        forms["x + f(x) with the first weights"] = x + _f(x, own)
        forms["f(x) with the first weights"] = _f(x, own)
    return forms


def _form(out, forms):
    return next((name for name, expected in forms.items() if close(out, expected, TOLERANCE)), None)


def _twins(inputs, value, rank, mode):
    """(the residual twin's form, the plain twin's form, their largest difference from x + f(x) and f(x))."""
    x = _x(inputs, rank)
    f = _f(x, inputs["new"])
    residual_entry, plain_entry = value[f"True/{rank}"], value[f"False/{rank}"]
    residual = array(residual_entry.get(mode, residual_entry), x.shape, "the output")
    plain_out = array(plain_entry.get(mode, plain_entry), x.shape, "the plain twin's output")
    own = [_own_weights(inputs, entry.get("initial") or []) for entry in (residual_entry, plain_entry)]
    found = (_form(residual, _forms(x, f, own[0])), _form(plain_out, _forms(x, f, own[1])))
    gap = max(largest_difference(residual, x + f), largest_difference(plain_out, f))
    hint = "" if found == ("x + f(x)", "f(x)") else _classify(x, residual, plain_out, f, own[0])
    return found, gap, hint


def judge_equation(inputs, value):
    _, gap, hint = _twins(inputs, value, "2", "inference")
    return not hint, f"x + f(x) and f(x), computed here from the grader's weights, differ from the twins by {gap:.3g}", \
        hint


def judge_batch_shapes(inputs, value):
    """On a (batch, seq, width) input the layer computes what it computes on a (batch, width) one, in the forms
    computed here: right if it is right there, and not blamed here for a mistake the equation check names."""
    (forms2, _, _), (forms3, gap, hint) = _twins(inputs, value, "2", "inference"), _twins(inputs, value, "3", "inference")
    detail = f"on (batch, seq, width), x + f(x) and f(x) computed here differ from the twins by {gap:.3g}"
    if forms3 == forms2 and None not in forms3 or not hint:
        return True, detail, ""
    return False, detail, ("on a (batch, seq, width) input the layer (built on it) must compute x + f(x) on the last "
                           "axis, as on (batch, width): Dense acts on the last axis, and f's output width is "
                           "input_shape[-1], not input_shape[1]")


def judge_training(inputs, value):
    """In training mode the layer computes what it computes in inference, in the forms computed here."""
    worst = 0.0
    for rank in ("2", "3"):
        inference, _, _ = _twins(inputs, value, rank, "inference")
        training, gap, hint = _twins(inputs, value, rank, "training")
        worst = max(worst, gap)
        if hint and (training != inference or None in training):
            return False, f"training=True: x + f(x) and f(x) computed here differ from the twins by {gap:.3g}", \
                ("in training mode the layer computes something else than in inference: y = x + f(x) holds in both "
                 "(the residual is not a test-time trick), so call() must not depend on `training`")
    return True, f"training=True: the same forms as in inference (largest difference from x + f(x): {worst:.3g})", ""


# the parameter count ----------------------------------------------------------------------------------------


def judge_parameters(inputs, value):
    width, hidden = inputs["width"], inputs["hidden"]
    expected = width * hidden + hidden + hidden * width + width
    got = int(sum(np.prod(shape) for shape in value))
    return got == expected, f"{got:,} trainable parameters after the first call (expected {expected:,})", \
        (f"f is exactly Dense(hidden, relu) then Dense(width), both with biases: {width}x{hidden} + {hidden} + "
         f"{hidden}x{width} + {width}; the shortcut has no weights")


# saving -----------------------------------------------------------------------------------------------------


def judge_saving(inputs, value):
    x = _x(inputs)
    f = _f(x, inputs["new"])
    for residual, expected in (("True", x + f), ("False", f)):
        entry = value[residual]
        twin = "the layer" if residual == "True" else "the plain twin (residual=False)"
        missing = [key for key in ("hidden", "residual") if key not in entry["keys"]]
        if missing or entry["config"] != {"hidden": inputs["hidden"], "residual": residual == "True"}:
            return False, f"{twin}: get_config gives {entry['config']} (missing: {missing or 'none'})", \
                ("get_config must return every constructor argument: {**super().get_config(), 'hidden': ..., "
                 "'residual': ...}; without residual a plain twin comes back from its config as a residual layer")
        if entry.get("name") != "block":
            return False, f"{twin}: a layer named 'block' comes back from its config named {entry.get('name')!r}", \
                ("__init__ must pass what Keras gives it on: super().__init__(**kwargs), so that "
                 "from_config(get_config()) gives the layer back with its name (and dtype)")
        if not close(array(entry["clone"], x.shape), expected, TOLERANCE):
            return False, f"{twin}: from_config(get_config()) computes something else", \
                "from_config(get_config()) must give the same layer: return hidden and residual from get_config"
        if entry["revived"] != "ResidualMLP":
            return False, f"{twin}: deserialized as {entry['revived']}", \
                "decorate the class with @keras.saving.register_keras_serializable(package=\"exercises\")"
        if not close(array(entry["loaded"], x.shape), expected, TOLERANCE):
            return False, f"{twin}: the saved and reloaded model computes something else", \
                "a .keras file stores get_config and the weights: both must give the layer back"
    return True, "get_config (hidden, residual), from_config, registration and a .keras file, for both twins", ""


# a stack ----------------------------------------------------------------------------------------------------


def judge_stack(inputs, value):
    stream = _x(inputs)
    for weights in inputs["stack"]:
        stream = stream + _f(stream, weights)
    got = array(value, stream.shape, "the stack's output")
    ok = close(got, stream, TOLERANCE)
    return ok, f"{len(inputs['stack'])} blocks: differs from x_0 + the sum of the f's by " \
               f"{largest_difference(got, stream):.3g}", \
        "the layer must work on the output of another one, inside a keras.Model (built from a symbolic input)"


EXERCISE = Exercise(
    number=1, title="y = x + f(x) as a Keras layer, with a plain twin", self_test="(a), and the core skill",
    filename="ex1_residual_layer.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("shape", "the output has the input's shape, (batch, width) and (batch, seq, width)", "shapes",
                  judge_shape, "build() creates f's two Dense layers with the output width input_shape[-1]"),
        CheckSpec("equation", "y = x + f(x), and the plain twin f(x), with the grader's weights", "outputs",
                  judge_equation, "call() returns x + f(x) when residual is True and f(x) when it is False"),
        CheckSpec("batch_shapes", "the same on (batch, seq, width) inputs", "outputs", judge_batch_shapes,
                  "f's output width is input_shape[-1], whatever the rank of the input"),
        CheckSpec("training", "the same in training mode (training=True)", "outputs", judge_training,
                  "call() computes x + f(x) whatever `training` is"),
        CheckSpec("parameters", "the parameter count of f", "parameters", judge_parameters,
                  "build() creates the two Dense layers"),
        CheckSpec("saving", "saving: get_config with hidden and residual, registration, a .keras file",
                  "saving", judge_saving,
                  "get_config returns {**super().get_config(), 'hidden': ..., 'residual': ...}"),
        CheckSpec("stack", "a stack of blocks in a keras.Model computes x_0 + every block's f", "stack",
                  judge_stack, "the layer must work when called on the output of another one"),
    ))
