"""Exercise 2: start the block as the identity (zero initialisation) (self-test (a), (c)).

The grader draws the widths, inputs of several scales and a second set of
weights from the run's seed. The submission's process sends back the
block's outputs and its initial weights; the gradient the branches get at
initialisation is computed here, from those weights, and the weights are
shown to be the ones the block uses by giving it the grader's own and
comparing its output with x + f(x) computed here.
"""

import numpy as np

from tracks.exercises.exercise import (CheckSpec, Exercise, array, assign_by_shape, close, find, largest_difference,
                                       mlp, plain, weights_of)

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
            "upstream": rng.standard_normal((5, width)).tolist(), "new": [w.tolist() for w in new]}


def _x(inputs):
    return np.asarray(inputs["x"], "float32")


# the identity at initialisation ------------------------------------------------------------------------------


def probe_identity(module, inputs):
    block = module.identity_block(inputs["width"], inputs["hidden"])
    return [plain(block(np.float32(scale) * _x(inputs))) for scale in inputs["scales"]]


def judge_identity(inputs, value):
    errors = []
    for scale, out in zip(inputs["scales"], value):
        got, expected = array(out, what="block(x)"), (np.float32(scale) * _x(inputs)).astype("float64")
        errors.append(largest_difference(got, expected) if got.shape == expected.shape else np.inf)
    detail = f"largest |block(x) - x| at input scales {inputs['scales']}: {max(errors):.3g}"
    if max(errors) == 0.0:
        return True, f"block(x) == x exactly at input scales {inputs['scales']}", ""
    if all(np.allclose(array(out), 0.0) for out in value):
        return False, detail, ("the block outputs 0: it is f(x) alone, without the shortcut. Add x back "
                               "(residual_keras.Residual(branch) computes x + branch(x)).")
    return False, detail, ("f(x) is not 0 at initialisation: start the LAST layer of f at 0 "
                           "(kernel_initializer=\"zeros\"; its bias starts at 0 already), then x + f(x) = x")


# the branches can learn ----------------------------------------------------------------------------------------


def probe_weights(module, inputs):
    block = module.identity_block(inputs["width"], inputs["hidden"])
    block(_x(inputs))
    return weights_of(block)


def judge_learns(inputs, value):
    width, hidden = inputs["width"], inputs["hidden"]
    x, upstream = _x(inputs).astype("float64"), np.asarray(inputs["upstream"])
    kernel_in, kernel_out = find(value, (width, hidden), "first kernel"), find(value, (hidden, width), "last kernel")
    bias_in = find(value, (hidden,), "first bias")
    pre = x @ kernel_in + bias_in
    hidden_out = np.maximum(pre, 0.0)
    # The gradients of the loss sum(upstream * block(x)) on f's kernels, from the block's initial weights.
    grad_out = hidden_out.T @ upstream
    grad_in = x.T @ ((upstream @ kernel_out.T) * (pre > 0))
    norms = float(np.linalg.norm(grad_in)), float(np.linalg.norm(grad_out))
    detail = f"at initialisation the kernels' gradients have norms {norms[0]:.3g} (first), {norms[1]:.3g} (last)"
    if max(norms) > 0:
        return True, detail, ""
    return False, detail, ("no kernel gets a gradient, so the branches stay 0 for ever. Start only the LAST layer of f "
                           "at 0: if the first is 0 too (or instead), the hidden layer outputs 0, the last kernel's "
                           "gradient (hidden output times upstream gradient) is 0, and the first kernel's gradient "
                           "passes through the zero last kernel: 0 as well")


# with other weights, x + f(x) ---------------------------------------------------------------------------------


def probe_other_weights(module, inputs):
    block = module.identity_block(inputs["width"], inputs["hidden"])
    block(_x(inputs))
    assigned = assign_by_shape(block, inputs["new"])
    return {"assigned": assigned, "output": plain(block(_x(inputs)))}


def judge_other_weights(inputs, value):
    x = _x(inputs).astype("float64")
    f = mlp(x, *(np.asarray(w, "float32").astype("float64") for w in inputs["new"]))
    got = array(value["output"], x.shape, "block(x)")
    detail = f"with the grader's weights, block(x) differs from x + f(x) by up to {largest_difference(got, x + f):.3g}"
    if close(got, x + f, rtol=1e-4, atol=1e-4):
        return True, detail, ""
    if close(got, f, rtol=1e-4, atol=1e-4):
        return False, detail, "the block computes f(x) alone: the shortcut is missing (x + f(x))"
    return False, detail, ("f must be exactly Dense(hidden, relu) then Dense(width), both with biases, and the block "
                           "x + f(x): the grader gives f other weights and computes x + f(x) itself")


EXERCISE = Exercise(
    number=2, title="start the block as the identity (zero initialisation)", self_test="(a), (c)",
    filename="ex2_identity_init.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("identity", "the block is exactly the identity at initialisation", probe_identity, judge_identity,
                  "return a Keras layer: residual_keras.Residual(keras.Sequential([...]))"),
        CheckSpec("learns", "the branches can learn (a kernel gets a gradient at initialisation)", probe_weights,
                  judge_learns, "return a Keras layer whose f is Dense(hidden, relu) then Dense(width)"),
        CheckSpec("other_weights", "with other weights the block computes x + f(x)", probe_other_weights,
                  judge_other_weights, "return a Keras layer computing x + f(x)"),
    ))
