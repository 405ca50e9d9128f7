"""Exercise 4: the Jacobian of two residual blocks and its four terms, with autodiff (self-test (a)).

The grader draws the two branches, f_i(x) = s tanh(W_i x + b_i), their size
n and the point x from the run's seed, sends their numbers to the
submission's process (harness/ex4.py builds f1 and f2 from them with
keras.ops), and compares what comes back with the closed form computed
here: J_i = s diag(1 - tanh^2(W_i x + b_i)) W_i. The branches are curved
enough (W of spectral radius about 2) that finite differences are visibly
off at the tolerance of float32 autodiff, and they record where they were
evaluated: automatic differentiation evaluates f1 at x and f2 at
y1 = x + f1(x) only, finite differences of any step beside them.
"""

import numpy as np

from tracks.exercises.exercise import CheckSpec, Exercise, WrongForm, array, close, largest_difference, number

SKELETON = '''"""Exercise 4: the Jacobian of two residual blocks, and its four terms.

For y1 = x + f1(x) and y2 = y1 + f2(y1), the chain rule gives

    d y2 / d x = (I + J2)(I + J1) = I + J1 + J2 + J2 J1,

with J1 = d f1 / d x at x and J2 = d f2 / d y1 at y1. The identity term I
survives whatever the J's are; J2 J1 is the only term a plain stack keeps.

Write three functions, for a single input vector x of shape (n,) and
branches f1, f2 that map (n,) to (n,) (Python functions of keras.ops, or
Keras layers called on a batch of one: see the hint):

- `jacobian(f, x)`: the (n, n) matrix J with J[i, j] = d f(x)[i] / d x[j],
  computed with automatic differentiation (any backend), NOT by finite
  differences;
- `two_block_terms(f1, f2, x)`: a dict with "I", "J1", "J2", "J2J1" (each
  (n, n)) and "total" (d y2 / d x, computed with `jacobian` on the whole
  two-block map);
- `identity_term_error(f1, f2, x)`: the spectral norm of total - (I + J1 + J2),
  which the course says is at most ||J2|| ||J1||.

Check your work:  python -m tracks check THIS_FILE

Hints:
- residual_keras.diagnostics has no "full Jacobian" function on purpose;
  write one: row i is the gradient of f(x)[i] (TensorFlow: tf.GradientTape
  with tape.jacobian; JAX: jax.jacobian; PyTorch: torch.autograd.functional.jacobian).
  The checks use the TensorFlow backend.
- the layout: row index = output, column index = input (J @ v is the change
  of f for a change v of x).
- J2 is evaluated at y1 = x + f1(x), not at x.
"""

import numpy as np

EXERCISE = 4


def jacobian(f, x):
    raise NotImplementedError


def two_block_terms(f1, f2, x):
    raise NotImplementedError


def identity_term_error(f1, f2, x):
    raise NotImplementedError
'''


def draw(rng):
    n = int(rng.integers(4, 9))
    matrices = [(2.0 * rng.standard_normal((n, n)) / np.sqrt(n)).astype("float32") for _ in range(2)]
    biases = [(0.1 * rng.standard_normal(n)).astype("float32") for _ in range(2)]
    return {"W1": matrices[0].tolist(), "W2": matrices[1].tolist(), "b1": biases[0].tolist(),
            "b2": biases[1].tolist(), "scale": round(float(rng.uniform(0.2, 0.6)), 3),
            "x": rng.standard_normal(n).astype("float32").tolist()}


def reference(inputs):
    """The closed forms, in float64 (parent side): J1 at x, J2 at y1 = x + f1(x), and J2 at x (a mistake)."""
    W1, W2, b1, b2, x = (np.asarray(inputs[k], "float64") for k in ("W1", "W2", "b1", "b2", "x"))
    scale = inputs["scale"]

    def jacobian(W, b, at):
        return scale * (1 - np.tanh(W @ at + b) ** 2)[:, None] * W

    y1 = x + scale * np.tanh(W1 @ x + b1)
    return jacobian(W1, b1, x), jacobian(W2, b2, y1), jacobian(W2, b2, x)


TOLERANCE = 5e-6  # of each matrix's largest entry: float32 autodiff is off by under 9e-7 of it (12 seeds)


def _value(value):
    if not isinstance(value, dict) or "value" not in value:
        raise WrongForm("the values sent back have the wrong form")
    return value["value"]


# automatic differentiation: where the branches were evaluated --------------------------------------------------


def judge_autodiff(inputs, value):
    """Every evaluation of f1 at x exactly, of f2 at y1 = x + f1(x) (to float32 rounding) or at x."""
    x = np.asarray(inputs["x"], "float32").astype("float64")
    W1, b1 = np.asarray(inputs["W1"], "float64"), np.asarray(inputs["b1"], "float64")
    y1 = x + inputs["scale"] * np.tanh(W1 @ x + b1)
    points = value.get("points") if isinstance(value, dict) else None
    if not isinstance(points, dict):
        raise WrongForm("the values sent back have the wrong form")
    beside, count = [], 0
    for name, allowed, tolerance in (("f1", [x], 0.0), ("f2", [y1, x], 1e-6)):
        for point in list(points.get(name) or [])[:1000]:
            count += 1
            at = array(point, x.shape, f"a point {name} was evaluated at")
            distance = min(float(np.max(np.abs(at - where))) for where in allowed)
            if distance > tolerance * float(np.max(np.abs(y1))):
                beside.append((name, distance))
    if not count:
        return False, "f1 and f2 were never evaluated", "jacobian(f, x) must call f (under a GradientTape)"
    if beside:
        name, distance = beside[0]
        return False, (f"{len(beside)} of {count} evaluations were beside the point: {name} at a distance of "
                       f"{distance:.3g}"), ("finite differences: the Jacobian must come from automatic differentiation "
                                            "(tf.GradientTape and tape.jacobian), which evaluates f at x only, and is "
                                            "exact where a difference quotient is off by its step")
    return True, f"{count} evaluations, every one at x (f1) or at y1 = x + f1(x) (f2)", ""


# jacobian(f, x) -------------------------------------------------------------------------------------------




def judge_layout(inputs, value):
    J1, _, _ = reference(inputs)
    got = array(_value(value), what="jacobian(f1, x)")
    if close(got, J1, TOLERANCE):
        difference = largest_difference(got, J1)
        return True, f"matches the closed form at n = {len(J1)} (largest difference {difference:.2g})", ""
    if close(got, J1.T, TOLERANCE):
        return False, "you return the transpose", ("wrong layout: row i must be the gradient of output i, so that "
                                                   "J @ v is f's change for a change v of x (your matrix is J^T, the "
                                                   "vector-Jacobian layout)")
    return False, (f"shape {got.shape}, largest difference from the closed form {largest_difference(got, J1):.3g}"), \
        "compute row i as the gradient of f(x)[i] with respect to x (tape.jacobian(y, x)), at x itself"


# two_block_terms(f1, f2, x) ----------------------------------------------------------------------------------




def judge_terms(inputs, value):
    J1, J2, J2_at_x = reference(inputs)
    n, value = len(J1), _value(value)
    missing = [key for key in ("I", "J1", "J2", "J2J1", "total") if key not in value]
    if missing:
        return False, f"missing {missing}", "return a dict with I, J1, J2, J2J1 and total"
    found = {key: array(value[key], (n, n), key) for key in ("I", "J1", "J2", "J2J1", "total")}
    expected = {"I": np.eye(n), "J1": J1, "J2": J2, "J2J1": J2 @ J1, "total": (np.eye(n) + J2) @ (np.eye(n) + J1)}
    wrong = [key for key in expected if not close(found[key], expected[key], TOLERANCE)]
    if not wrong:
        return True, "I, J1, J2, J2 J1 and the total match the closed forms", ""
    detail = f"wrong: {', '.join(wrong)}"
    if "J2" in wrong and close(found["J2"], J2_at_x, TOLERANCE):
        return False, detail + " (J2 is evaluated at x)", ("J2 = d f2 / d y1 is taken where the second block reads "
                                                            "its input, at y1 = x + f1(x), not at x")
    if "J2J1" in wrong and close(found["J2J1"], J1 @ J2, TOLERANCE):
        return False, detail + " (J1 J2: the order is swapped)", \
            ("the chain rule applies the second block after the first: (I + J2)(I + J1), so the second-order term "
             "is J2 @ J1 (the later block's Jacobian on the left)")
    if "total" in wrong and close(found["total"], np.eye(n) + J1 + J2, TOLERANCE):
        return False, detail + " (the total lacks J2 J1)", ("the total is the Jacobian of the whole map x -> y2: "
                                                             "(I + J2)(I + J1), which includes J2 J1")
    return False, detail, ("J1 at x, J2 at y1 = x + f1(x), J2J1 = J2 @ J1, total = the Jacobian of x -> y2 = "
                           "y1 + f2(y1)")


# identity_term_error(f1, f2, x) ------------------------------------------------------------------------------




def judge_identity_error(inputs, value):
    J1, J2, _ = reference(inputs)
    error = number(_value(value), "identity_term_error")
    expected = float(np.linalg.norm(J2 @ J1, 2))
    bound = float(np.linalg.norm(J2, 2) * np.linalg.norm(J1, 2))
    detail = f"{error:.5g} (||J2 J1|| = {expected:.5g}, bound ||J2|| ||J1|| = {bound:.5g})"
    if abs(error - expected) <= 1e-4 * expected:  # relative: ||J2 J1|| is small where the branches are
        return True, detail, ""
    if abs(error - np.linalg.norm(J2 @ J1)) <= 1e-4 * expected:
        return False, detail, "that is the Frobenius norm: the course's bound is about the spectral norm, " \
                              "np.linalg.norm(M, 2)"
    return False, detail, ("the spectral norm (np.linalg.norm(M, 2)) of total - (I + J1 + J2): what is left is "
                           "exactly the second-order term J2 J1")


EXERCISE = Exercise(
    number=4, title="the two-block Jacobian and its four terms, with autodiff", self_test="(a)",
    filename="ex4_two_block_jacobian.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("layout", "jacobian(f, x) is d f_i / d x_j (rows: outputs)", "layout", judge_layout,
                  "with TensorFlow: tape.watch(x); y = f(x); tape.jacobian(y, x)"),
        CheckSpec("autodiff", "automatic differentiation: f1 is evaluated at x only, f2 at y1 only", "terms",
                  judge_autodiff, "with TensorFlow: tape.watch(x); y = f(x); tape.jacobian(y, x)"),
        CheckSpec("terms", "the four terms and their sum", "terms", judge_terms,
                  "use jacobian() on each branch and on the two-block map x -> y2"),
        CheckSpec("identity_error", "the identity-path term: ||total - (I + J1 + J2)|| = ||J2 J1||",
                  "identity_error", judge_identity_error, "np.linalg.norm(total - (I + J1 + J2), 2)"),
    ))
