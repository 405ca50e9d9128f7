"""Exercise 2: start the block as the identity (zero initialisation) (self-test (a), (c)).

What the exercise asks, each tested in general: at initialisation the block
is exactly the identity (inputs of several scales, both modes, rank 2 and
rank 3); its branch can still learn (a kernel gets a gradient, taken by
autodiff through the block's own call in the submission's process, and
equal to the gradient computed here from the block's initial weights, so
a branch cut from the loss fails); with other weights it computes x + f(x)
(computed here from the grader's weights). The grader draws the widths,
inputs, the upstream gradient and the weights from the run's seed.
"""

import numpy as np

from tracks.exercises.exercise import CheckSpec, Exercise, array, close, find, largest_difference, mlp

SKELETON = '''"""Exercise 2: start the block as the identity.

Zero-gamma BatchNorm, Fixup and ReZero all start every branch at 0: then
each block is y = x + 0 = x, the whole stack is the identity, its Jacobian
is exactly I, and the deep network starts as a shallow one. Training grows
each branch from 0 only as far as it helps.

Write `identity_block(width, hidden)`: a Keras layer (a `keras.Sequential`
branch inside `residual_keras.Residual` will do, or a layer of your own)
computing x + f(x) with f = Dense(hidden, relu) -> Dense(width), such that
at initialisation the block's output equals its input exactly, while f's
weights can still learn (the gradient on f's parameters is not 0).

Check your work:  python -m tracks check THIS_FILE

Hints:
- which of f's layers must start at 0 so that f(x) = 0 for every x, and
  why not both? (If both are 0, what is the gradient on the first one?)
- keras.layers.Dense(..., kernel_initializer="zeros")
- residual_keras.Residual(branch) computes x + branch(x).
"""

import keras

import residual_keras as rk

EXERCISE = 2


def identity_block(width, hidden):
    raise NotImplementedError("return a layer that is exactly the identity at initialisation")
'''


def draw(rng):
    width = int(rng.integers(4, 13))
    hidden = int(rng.choice([h for h in range(8, 25) if h != width]))
    x = rng.standard_normal((5, width)).astype("float32")
    new = [rng.standard_normal(shape).astype("float32") * 0.5 for shape in
           ((width, hidden), (hidden,), (hidden, width), (width,))]
    return {"width": width, "hidden": hidden, "x": x.tolist(), "scales": [1.0, 100.0, -0.01],
            "x3": rng.standard_normal((2, 3, width)).astype("float32").tolist(),
            "upstream": rng.standard_normal((5, width)).astype("float32").tolist(), "new": [w.tolist() for w in new]}


TOLERANCE = 1e-4  # of the largest value: the solution's float32 is off by under 2e-7 of it (10 seeds)


def _x(inputs, key="x"):
    return np.asarray(inputs[key], "float32")


# the identity at initialisation ------------------------------------------------------------------------------


def judge_identity(inputs, value):
    x = _x(inputs).astype("float64")
    cases = [(f"scale {scale}", out, (np.float32(scale) * _x(inputs)).astype("float64"))
             for scale, out in zip(inputs["scales"], value["scaled"])]
    cases += [("training=True", value["training"], x), ("a (batch, seq, width) input", value["x3"],
                                                          _x(inputs, "x3").astype("float64"))]
    errors = {}
    for what, out, expected in cases:
        got = array(out, what=f"block(x) ({what})")
        errors[what] = largest_difference(got, expected) if got.shape == expected.shape else np.inf
    if max(errors.values()) == 0.0:
        return True, f"block(x) == x exactly at input scales {inputs['scales']}, in training mode and on rank 3", ""
    worst = max(errors, key=errors.get)
    detail = f"largest |block(x) - x|: {errors[worst]:.3g} ({worst})"
    if all(not np.any(array(out)) for out in value["scaled"]):  # exactly 0: f(x) alone, with f = 0
        return False, detail, ("the block outputs 0: it is f(x) alone, without the shortcut. Add x back "
                               "(residual_keras.Residual(branch) computes x + branch(x)).")
    if worst == "training=True":
        return False, detail, "in training mode the block must be the identity too: x + f(x) with f(x) = 0"
    return False, detail, ("f(x) is not 0 at initialisation: start the LAST layer of f at 0 "
                           "(kernel_initializer=\"zeros\"; its bias starts at 0 already), then x + f(x) = x")


# the branches can learn: gradients through the block's own call -----------------------------------------------


def expected_gradients(inputs, kernel_in, bias_in, kernel_out):
    """The gradients of sum(upstream * (x + f(x))) on f's four weights, in float64, from the block's weights."""
    x, upstream = _x(inputs).astype("float64"), np.asarray(inputs["upstream"], "float64")
    pre = x @ kernel_in + bias_in
    back = (upstream @ kernel_out.T) * (pre > 0)
    return {"first kernel": x.T @ back, "first bias": back.sum(axis=0),
            "last kernel": np.maximum(pre, 0.0).T @ upstream, "last bias": upstream.sum(axis=0)}


def judge_learns(inputs, value):
    width, hidden = inputs["width"], inputs["hidden"]
    shapes = {"first kernel": (width, hidden), "first bias": (hidden,), "last kernel": (hidden, width),
              "last bias": (width,)}
    weights = {what: find(value, shape, what) for what, shape in shapes.items()}
    gradients = {}
    for what, shape in shapes.items():
        entry = next(e for e in value if isinstance(e, dict) and list(e.get("shape", ())) == list(shape))
        gradients[what] = array(entry.get("gradient"), shape, f"the {what}'s gradient")
    expected = expected_gradients(inputs, weights["first kernel"], weights["first bias"], weights["last kernel"])
    norms = {what: float(np.linalg.norm(expected[what])) for what in ("first kernel", "last kernel")}
    size = max(float(np.max(np.abs(gradient))) for gradient in expected.values())  # a gradient that is 0 at
    wrong = [what for what in shapes  # initialisation (the first kernel's) is compared at the others' size
             if not close(gradients[what], expected[what], TOLERANCE, scale=size)]
    detail = (f"at initialisation x + f(x) gives the kernels gradients of norms {norms['first kernel']:.3g} (first), "
              f"{norms['last kernel']:.3g} (last); through your block's call: "
              f"{np.linalg.norm(gradients['first kernel']):.3g}, {np.linalg.norm(gradients['last kernel']):.3g}")
    if wrong:
        if all(not np.any(gradients[what]) for what in shapes):
            return False, detail, ("no gradient reaches f through your block's call, although x + f(x) with these "
                                   "weights gives one: the branch is cut from the loss (stop_gradient, a constant "
                                   "factor 0, or weights that are not trainable)")
        return False, detail + f" (differ: {', '.join(wrong)})", \
            "the block must compute x + f(x) with f = Dense(hidden, relu) then Dense(width) on the weights it holds"
    if max(norms.values()) > 0:
        return True, detail, ""
    return False, detail, ("no kernel gets a gradient, so the branches stay 0 for ever. Start only the LAST layer of f "
                           "at 0: if the first is 0 too (or instead), the hidden layer outputs 0, the last kernel's "
                           "gradient (hidden output times upstream gradient) is 0, and the first kernel's gradient "
                           "passes through the zero last kernel: 0 as well")


# with other weights, x + f(x) ---------------------------------------------------------------------------------


def judge_other_weights(inputs, value):
    new = [np.asarray(w, "float32").astype("float64") for w in inputs["new"]]
    x, x3 = _x(inputs).astype("float64"), _x(inputs, "x3").astype("float64")
    cases = [("inference", value["inference"], x), ("training=True", value["training"], x),
             ("a (batch, seq, width) input", value["x3"], x3)]
    errors, hint = {}, ""
    for what, out, at in cases:
        got, f = array(out, at.shape, f"block(x) ({what})"), mlp(at, *new)
        errors[what] = largest_difference(got, at + f)
        if not hint and not close(got, at + f, TOLERANCE):
            if close(got, f, TOLERANCE):
                hint = "the block computes f(x) alone: the shortcut is missing (x + f(x))"
            elif what == "training=True":
                hint = "in training mode the block must compute x + f(x) too: nothing in it depends on `training`"
            else:
                hint = ("f must be exactly Dense(hidden, relu) then Dense(width), both with biases, and the block "
                        "x + f(x): the grader gives f other weights and computes x + f(x) itself")
    worst = max(errors, key=errors.get)
    detail = f"with the grader's weights, block(x) differs from x + f(x) by up to {errors[worst]:.3g} ({worst})"
    return not hint, detail, hint


EXERCISE = Exercise(
    number=2, title="start the block as the identity (zero initialisation)", self_test="(a), (c)",
    filename="ex2_identity_init.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("identity", "the block is exactly the identity at initialisation", "identity", judge_identity,
                  "return a Keras layer: residual_keras.Residual(keras.Sequential([...]))"),
        CheckSpec("learns", "the branches can learn: the gradient through the block's call reaches f's kernels",
                  "gradients", judge_learns, "return a Keras layer whose f is Dense(hidden, relu) then Dense(width)"),
        CheckSpec("other_weights", "with other weights the block computes x + f(x), in both modes and on rank 3",
                  "other_weights", judge_other_weights, "return a Keras layer computing x + f(x)"),
    ))
