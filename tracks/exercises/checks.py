"""What the grader checks in each exercise, with the package's own instruments.

Every check returns `Check(name, passed, detail, hint)`. A hint teaches: it
names the likely mistake from what was measured (the shortcut forgotten, a
ReLU before the addition, the norm outside the residual, a Jacobian in the
wrong layout, a path count off by one) and what to do, not just "wrong".
"""

import dataclasses
import math
import tempfile
import traceback

import numpy as np

# Sizes small enough for a laptop: every exercise is graded in seconds.
WIDTH, HIDDEN, DEPTH = 8, 16, 20


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str = ""
    hint: str = ""


GAINS_CHECK = "the gradient through 20 blocks: residual within a factor 100 of 1, plain 10 times farther"


def _attempt(name, function, hint_on_error):
    """Runs one check; an exception becomes a failed check that says what was raised, and where."""
    try:
        return function()
    except NotImplementedError:
        return Check(name, False, "not written yet (NotImplementedError)", hint_on_error)
    except Exception as error:  # noqa: BLE001  (a student's code may raise anything)
        frames = traceback.extract_tb(error.__traceback__)
        theirs = [frame for frame in frames if frame.filename == SOLUTION_FILE.get("path")]
        where = f" (line {theirs[-1].lineno} of your file)" if theirs else ""
        message = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return Check(name, False, f"raised {type(error).__name__}{': ' + message if message else ''}{where}",
                     hint_on_error)


# The file being graded, so that an error is reported at its own line (set by the grader).
SOLUTION_FILE = {}


def _numpy(tensor):
    import keras

    return np.asarray(keras.ops.convert_to_numpy(tensor))


def _batch(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _labels(count, classes=3, seed=1):
    return np.random.default_rng(seed).integers(0, classes, size=count)


def _round_trip(layer, x, cls_name):
    """Config, registered serialization and a .keras file: the same layer comes back."""
    import keras

    config = layer.get_config()
    clone = type(layer).from_config(config)
    if clone.get_config() != config:
        return False, "from_config(get_config()) gives another config"
    serialized = keras.saving.serialize_keras_object(layer)
    if type(keras.saving.deserialize_keras_object(serialized)) is not type(layer):
        return False, f"{cls_name} is not registered (keras.saving.register_keras_serializable)"
    inputs = keras.Input(x.shape[1:])
    model = keras.Model(inputs, type(layer).from_config(config)(inputs))
    with tempfile.TemporaryDirectory() as folder:
        model.save(f"{folder}/model.keras")
        loaded = keras.saving.load_model(f"{folder}/model.keras")
    if not np.allclose(_numpy(loaded(x)), _numpy(model(x)), atol=1e-6):
        return False, "the saved and reloaded model computes something else"
    return True, "get_config, from_config, registered serialization and a .keras file round-trip"


def _stack(make, depth, width=WIDTH):
    """A Dense model of `depth` blocks made by `make(index)`, their names, and a batch."""
    import keras

    inputs = keras.Input((width,))
    x = inputs
    names = []
    for index in range(depth):
        block = make(index)
        x = block(x)
        names.append(block.name)
    outputs = keras.layers.Dense(3, name="head")(x)
    return keras.Model(inputs, outputs), names


# Exercise 1 ----------------------------------------------------------------------------------------


def exercise_1(module):
    import keras

    import residual_keras as rk

    checks = []
    cls = getattr(module, "ResidualMLP", None)
    if cls is None:
        return [Check("defines ResidualMLP", False, "no class ResidualMLP in the file",
                      "keep the skeleton's class name: the grader looks for ResidualMLP")]
    x = _batch((4, WIDTH))

    def shape():
        out = cls(HIDDEN)(x)
        ok = tuple(out.shape) == x.shape
        return Check("the output has the input's shape", ok, f"{tuple(out.shape)} for {x.shape}",
                     "" if ok else "f must end with Dense(input_shape[-1]): y = x + f(x) needs f(x) of x's shape")

    checks.append(_attempt("the output has the input's shape", shape,
                           "build() creates f's two Dense layers, call() returns x + f(x)"))

    def equation():
        residual, plain = cls(HIDDEN), cls(HIDDEN, residual=False)
        residual.build(x.shape)
        plain.build(x.shape)
        plain.set_weights(residual.get_weights())
        difference = _numpy(residual(x)) - _numpy(plain(x))
        if np.allclose(difference, x, atol=1e-5):
            return Check("y = x + f(x), and the plain twin f(x) with the same weights", True,
                         "residual minus plain is exactly x")
        if np.allclose(difference, 0.0, atol=1e-6):
            hint = ("residual=True computes the same as the plain twin: the shortcut is missing. "
                    "Return x + f(x), so that the Jacobian is I + df/dx, not df/dx alone.")
        elif np.allclose(difference, np.maximum(x, 0), atol=1e-5):
            hint = ("you add ReLU(x), not x: a ReLU before the addition cuts the identity path's "
                    "negative half (its Jacobian is a 0/1 mask). The shortcut carries x itself.")
        elif np.all(_numpy(residual(x)) >= 0):
            hint = ("the output is never negative: something follows the addition (ReLU(x + f(x)), He "
                    "et al.'s original block). This exercise asks for x + f(x), nothing after the addition.")
        else:
            hint = ("residual minus its plain twin should be exactly x: check that both compute the same "
                    "f and that residual=True only adds x, and residual=False only leaves it out")
        return Check("y = x + f(x), and the plain twin f(x) with the same weights", False,
                     f"residual minus plain differs from x by up to {np.max(np.abs(difference - x)):.3g}", hint)

    checks.append(_attempt("y = x + f(x), and the plain twin f(x) with the same weights", equation,
                           "call() returns x + f(x) when residual is True and f(x) when it is False"))

    def parameters():
        layer = cls(HIDDEN)
        layer.build(x.shape)
        expected = WIDTH * HIDDEN + HIDDEN + HIDDEN * WIDTH + WIDTH
        got = int(sum(np.prod(w.shape) for w in layer.trainable_weights))
        ok = got == expected
        return Check("the parameter count of f", ok, f"{got:,} trainable parameters (expected {expected:,})",
                     "" if ok else "f is exactly Dense(hidden, relu) then Dense(width), both with biases: "
                                   f"{WIDTH}x{HIDDEN} + {HIDDEN} + {HIDDEN}x{WIDTH} + {WIDTH}; the shortcut has no "
                                   "weights")

    checks.append(_attempt("the parameter count of f", parameters, "build() creates the two Dense layers"))

    def serialisation():
        ok, detail = _round_trip(cls(HIDDEN, name="block"), x, "ResidualMLP")
        return Check("saving: get_config, registration, a .keras file", ok, detail,
                     "" if ok else "decorate the class with @keras.saving.register_keras_serializable("
                                   "package=\"exercises\") and return hidden and residual from get_config "
                                   "(with super().get_config())")

    checks.append(_attempt("saving: get_config, registration, a .keras file", serialisation,
                           "get_config returns {**super().get_config(), 'hidden': ..., 'residual': ...}"))

    def gains():
        keras.utils.set_random_seed(0)
        residual, names = _stack(lambda i: cls(HIDDEN, name=f"res{i}"), DEPTH)
        keras.utils.set_random_seed(0)
        plain, plain_names = _stack(lambda i: cls(HIDDEN, residual=False, name=f"plain{i}"), DEPTH)
        batch, labels = _batch((16, WIDTH), seed=2), _labels(16)
        gain = rk.gradient_norms(residual, batch, labels, blocks=names)["gain"]
        plain_gain = rk.gradient_norms(plain, batch, labels, blocks=plain_names)["gain"]
        distance = abs(math.log10(gain)) if gain > 0 else math.inf
        plain_distance = abs(math.log10(plain_gain)) if plain_gain > 0 else math.inf
        ok = distance < 2 and plain_distance > distance + 1
        detail = (f"{DEPTH} blocks: gradient gain {gain:.3g} residual, {plain_gain:.3g} plain "
                  f"(1 = the gradient arrives unchanged; {distance:.2g} and {plain_distance:.2g} "
                  "orders of magnitude from it)")
        return Check(GAINS_CHECK, ok, detail,
                     "" if ok else "the residual stack's gain should stay within a factor 100 of 1 and the plain "
                                   "stack's be at least 10 times farther: each residual block multiplies the "
                                   "gradient by I + df/dx, each plain one by df/dx alone")

    checks.append(_attempt(GAINS_CHECK, gains,
                           "the layer must work when called on the output of another one"))
    return checks


# Exercise 2 ----------------------------------------------------------------------------------------


def exercise_2(module):
    import keras

    import residual_keras as rk

    make = getattr(module, "identity_block", None)
    if make is None:
        return [Check("defines identity_block", False, "no function identity_block in the file",
                      "keep the skeleton's function name")]
    x = _batch((4, WIDTH))
    checks = []

    def identity():
        block = make(WIDTH, HIDDEN)
        out = _numpy(block(x))
        error = float(np.max(np.abs(out - x)))
        if error == 0.0:
            return Check("the block is exactly the identity at initialisation", True, "block(x) == x")
        if np.allclose(out, 0.0):
            hint = ("the block outputs 0: it is f(x) alone, without the shortcut. Add x back "
                    "(residual_keras.Residual(branch) computes x + branch(x)).")
        else:
            hint = ("f(x) is not 0 at initialisation: start the LAST layer of f at 0 "
                    "(kernel_initializer=\"zeros\"; its bias starts at 0 already), then x + f(x) = x")
        return Check("the block is exactly the identity at initialisation", False,
                     f"block(x) differs from x by up to {error:.3g}", hint)

    checks.append(_attempt("the block is exactly the identity at initialisation", identity,
                           "return a Keras layer: residual_keras.Residual(keras.Sequential([...]))"))

    def jacobian():
        keras.utils.set_random_seed(0)
        model, names = _stack(lambda i: make(WIDTH, HIDDEN), 10)
        total = rk.jacobian_norm(model, x, blocks=names, num_iterations=5)["total"]
        ok = bool(np.allclose(total, 1.0, atol=1e-5))
        return Check("the Jacobian of 10 such blocks is exactly 1", ok, f"||d x_L / d x_0|| = {np.mean(total):.6g}",
                     "" if ok else "every block must be the identity at initialisation: (I + 0)^10 = I")

    checks.append(_attempt("the Jacobian of 10 such blocks is exactly 1", jacobian, "return a Keras layer"))

    def learns():
        keras.utils.set_random_seed(0)
        model, names = _stack(lambda i: make(WIDTH, HIDDEN), 3)
        flow = rk.gradient_norms(model, x, _labels(4), blocks=names)
        kernels = [norm for name, norm in zip(flow["weight_names"], flow["weight_grad_norms"])
                   if "kernel" in name and not name.startswith("head")]
        moving = sum(norm > 0 for norm in kernels)
        ok = len(kernels) >= 2 and moving >= len(kernels) // 2
        detail = f"{moving} of the branches' {len(kernels)} kernels get a gradient"
        if ok:
            return Check("the branches can learn (their kernels get a gradient)", True, detail)
        if not kernels:
            hint = "the blocks have no trainable kernels: f is Dense(hidden, relu) then Dense(width)"
        else:
            hint = ("no kernel gets a gradient, so the branches stay 0 for ever. Start only the LAST layer of "
                    "f at 0: if the first is 0 too (or instead), the hidden layer outputs 0, the last "
                    "kernel's gradient (hidden output times upstream gradient) is 0, and the first kernel's "
                    "gradient passes through the zero last kernel: 0 as well")
        return Check("the branches can learn (their kernels get a gradient)", False, detail, hint)

    checks.append(_attempt("the branches can learn (their kernels get a gradient)", learns, "return a Keras layer"))
    return checks


# Exercise 3 ----------------------------------------------------------------------------------------


def exercise_3(module):
    import keras

    import residual_keras as rk

    cls = getattr(module, "PreLNBlock", None)
    if cls is None:
        return [Check("defines PreLNBlock", False, "no class PreLNBlock in the file", "keep the skeleton's class name")]
    x = _batch((2, 6, WIDTH))
    checks = []

    def shape():
        out = cls(2, HIDDEN)(x)
        ok = tuple(out.shape) == x.shape
        return Check("the output has the input's shape", ok, f"{tuple(out.shape)}",
                     "" if ok else "both sublayers write vectors of the stream's width: the MLP ends with "
                                   "Dense(width), the attention's output projection keeps the width")

    checks.append(_attempt("the output has the input's shape", shape, "build() makes the parts, call() uses them"))

    def causal():
        block = cls(2, HIDDEN)
        changed = x.copy()
        changed[:, -1] = _batch(changed[:, -1].shape, seed=9)  # another last position (not a shift: LN hides it)
        ok = np.allclose(_numpy(block(x))[:, :-1], _numpy(block(changed))[:, :-1], atol=1e-5)
        return Check("causal: a later position does not change an earlier one", bool(ok), "",
                     "" if ok else "call the attention with use_causal_mask=True")

    checks.append(_attempt("causal: a later position does not change an earlier one", causal,
                           "self-attention with use_causal_mask=True: position t reads positions <= t only"))

    def identity_path():
        block = cls(2, HIDDEN)
        block(x)
        for weight in block.weights:  # every kernel and bias at 0 (the LayerNorms' gamma, beta kept): F = 0
            if weight.name not in ("gamma", "beta"):
                weight.assign(np.zeros(weight.shape, "float32"))
        out = _numpy(block(x))
        if np.allclose(out, x, atol=1e-5):
            return Check("with both sublayers writing 0 the block is the identity", True, "x_L = x_0")
        rms = np.sqrt(np.mean(out**2, axis=-1))
        if np.allclose(out, 0.0, atol=1e-5):
            hint = "the block outputs 0 when F = 0: the residual addition is missing (x = x + F(LN(x)))"
        elif np.allclose(rms, 1.0, atol=0.05) or np.allclose(out.mean(axis=-1), 0.0, atol=1e-4):
            hint = ("the output is normalised: a LayerNorm sits on the stream after the addition (Post-LN, "
                    "LN(x + F(x)), or one norm around the whole block). In Pre-LN the norm is inside the "
                    "residual, on the sublayer's input only: x + F(LN(x)).")
        else:
            hint = "with F = 0 each sublayer must add nothing: x = x + F(LN(x)), twice"
        return Check("with both sublayers writing 0 the block is the identity", False,
                     f"output differs from the input by up to {np.max(np.abs(out - x)):.3g}", hint)

    checks.append(_attempt("with both sublayers writing 0 the block is the identity", identity_path,
                           "build every part in build(), so that the block has its weights after one call"))

    def protocol():
        block = cls(2, HIDDEN)
        block(x)
        error = rk.check_residual_steps(block, x)
        return Check("residual_steps() describes call() (the residual protocol)", True, f"largest difference {error:.2g}")

    checks.append(_attempt("residual_steps() describes call() (the residual protocol)", protocol,
                           "return [rk.ResidualStep('attention', branch), rk.ResidualStep('feedforward', branch)] "
                           "where each branch computes exactly what call() adds to the stream, with its "
                           "LayerNorm inside"))

    def decomposition():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6, WIDTH))
        h = cls(2, HIDDEN, name="block1")(inputs)
        h = cls(2, HIDDEN, name="block2")(h)
        model = keras.Model(inputs, keras.layers.Dense(3)(h))
        result = rk.stream_decomposition(model, x)
        ok = result["relative_error"] < 1e-5
        return Check("the stream is x_0 plus every sublayer's output (stream_decomposition)", ok,
                     f"relative error {result['relative_error']:.2g}",
                     "" if ok else "nothing but additions may touch the stream in Pre-LN: no norm after an addition")

    checks.append(_attempt("the stream is x_0 plus every sublayer's output (stream_decomposition)",
                           decomposition, "implement residual_steps() first"))

    def serialisation():
        ok, detail = _round_trip(cls(2, HIDDEN, name="block"), x, "PreLNBlock")
        return Check("saving: get_config, registration, a .keras file", ok, detail,
                     "" if ok else "keep the skeleton's decorator and get_config")

    checks.append(_attempt("saving: get_config, registration, a .keras file", serialisation,
                           "keep the skeleton's decorator and get_config; build every part in build()"))
    return checks


# Exercise 4 ----------------------------------------------------------------------------------------


def _branches(n=6, seed=3):
    """Two small branches with closed-form Jacobians: f(x) = 0.3 tanh(W x + b)."""
    import keras

    rng = np.random.default_rng(seed)
    W1, W2 = ((rng.standard_normal((n, n)) / np.sqrt(n)).astype("float32") for _ in range(2))
    b1, b2 = (rng.standard_normal(n).astype("float32") * 0.1 for _ in range(2))

    def f1(x):
        return 0.3 * keras.ops.tanh(keras.ops.matmul(keras.ops.convert_to_tensor(W1), x) + b1)

    def f2(x):
        return 0.3 * keras.ops.tanh(keras.ops.matmul(keras.ops.convert_to_tensor(W2), x) + b2)

    def exact(W, b, at):
        return 0.3 * (1 - np.tanh(W @ at + b) ** 2)[:, None] * W

    x = rng.standard_normal(n).astype("float32")
    J1 = exact(W1, b1, x)
    y1 = x + 0.3 * np.tanh(W1 @ x + b1)
    J2 = exact(W2, b2, y1)
    J2_at_x = exact(W2, b2, x)
    return f1, f2, x, J1, J2, J2_at_x


def exercise_4(module):
    checks = []
    f1, f2, x, J1, J2, J2_at_x = _branches()
    I = np.eye(len(x))

    def layout():
        got = np.asarray(module.jacobian(f1, x))
        if got.shape == J1.shape and np.allclose(got, J1, atol=1e-5):
            return Check("jacobian(f, x) is d f_i / d x_j (rows: outputs)", True, "matches the closed form")
        if got.shape == J1.shape and np.allclose(got, J1.T, atol=1e-5):
            return Check("jacobian(f, x) is d f_i / d x_j (rows: outputs)", False, "you return the transpose",
                         "wrong layout: row i must be the gradient of output i, so that J @ v is f's change for "
                         "a change v of x (your matrix is J^T, the vector-Jacobian layout)")
        return Check("jacobian(f, x) is d f_i / d x_j (rows: outputs)", False,
                     f"shape {got.shape}, largest difference from the closed form "
                     f"{np.max(np.abs(got - J1)) if got.shape == J1.shape else float('nan'):.3g}",
                     "compute row i as the gradient of f(x)[i] with respect to x (tape.jacobian(y, x))")

    checks.append(_attempt("jacobian(f, x) is d f_i / d x_j (rows: outputs)", layout,
                           "with TensorFlow: tape.watch(x); y = f(x); tape.jacobian(y, x)"))

    def terms():
        found = module.two_block_terms(f1, f2, x)
        missing = [key for key in ("I", "J1", "J2", "J2J1", "total") if key not in found]
        if missing:
            return Check("the four terms and their sum", False, f"missing {missing}",
                         "return a dict with I, J1, J2, J2J1 and total")
        problems = []
        if not np.allclose(found["J1"], J1, atol=1e-5):
            problems.append("J1")
        if not np.allclose(found["J2"], J2, atol=1e-5):
            if np.allclose(found["J2"], J2_at_x, atol=1e-5):
                return Check("the four terms and their sum", False, "J2 is evaluated at x",
                             "J2 = d f2 / d y1 is taken where the second block reads its input, at "
                             "y1 = x + f1(x), not at x")
            problems.append("J2")
        if not np.allclose(found["J2J1"], J2 @ J1, atol=1e-5):
            problems.append("J2J1" + (" (J1 J2: the order is swapped)" if np.allclose(found["J2J1"], J1 @ J2,
                                                                                      atol=1e-5) else ""))
        expected_total = (I + J2) @ (I + J1)
        if not np.allclose(found["total"], expected_total, atol=1e-5):
            problems.append("total")
        if problems:
            return Check("the four terms and their sum", False, f"wrong: {', '.join(problems)}",
                         "the chain rule applies the second block after the first: (I + J2)(I + J1), so the "
                         "second-order term is J2 @ J1 (the later block's Jacobian on the left)")
        ok = np.allclose(found["I"] + found["J1"] + found["J2"] + found["J2J1"], found["total"], atol=1e-5)
        return Check("the four terms and their sum", bool(ok), "I + J1 + J2 + J2 J1 equals the total" if ok else
                     "the terms do not add up to the total", "" if ok else "total = (I + J2)(I + J1)")

    checks.append(_attempt("the four terms and their sum", terms, "use jacobian() on each branch and on the "
                                                                   "two-block map x -> y2"))

    def identity_error():
        error = float(module.identity_term_error(f1, f2, x))
        expected = float(np.linalg.norm(J2 @ J1, 2))
        bound = float(np.linalg.norm(J2, 2) * np.linalg.norm(J1, 2))
        ok = abs(error - expected) <= 1e-4 * max(1.0, expected) and error <= bound + 1e-6
        return Check("the identity-path term: ||total - (I + J1 + J2)|| = ||J2 J1|| <= ||J2|| ||J1||", ok,
                     f"{error:.4g} (||J2 J1|| = {expected:.4g}, bound {bound:.4g})",
                     "" if ok else "the spectral norm (np.linalg.norm(M, 2)) of total minus I + J1 + J2: what is "
                                   "left is exactly the second-order term J2 J1")

    checks.append(_attempt("the identity-path term: ||total - (I + J1 + J2)|| = ||J2 J1|| <= ||J2|| ||J1||",
                           identity_error, "np.linalg.norm(total - (I + J1 + J2), 2)"))
    return checks


# Exercise 5 ----------------------------------------------------------------------------------------


def exercise_5(module):
    checks = []

    def bounds():
        low, high = module.residual_bounds(0.2, 50)
        plain = module.plain_bound(0.2, 50)
        expected = (0.8**50, 1.2**50, 0.2**50)
        got = (float(low), float(high), float(plain))
        if np.allclose(got, expected, rtol=1e-9):
            return Check("the bounds at eps = 0.2, L = 50", True,
                         f"residual in [{low:.4g}, {high:.4g}], plain at most {plain:.4g}")
        if np.allclose(got[:2], (1 - 0.2 * 50, 1 + 0.2 * 50), rtol=1e-9):
            hint = ("the bounds multiply, they do not add: each of the 50 factors stretches by at most 1 + eps, "
                    "so the product by at most (1 + eps)^50")
        elif np.allclose(got[:2], (0.8**49, 1.2**49), rtol=1e-9) or np.allclose(got[:2], (0.8**51, 1.2**51),
                                                                               rtol=1e-9):
            hint = "off by one: L = 50 blocks give 50 factors, (1 - eps)^50 and (1 + eps)^50"
        elif np.isclose(got[2], 0.8**50, rtol=1e-9) or np.isclose(got[2], 1.2**50, rtol=1e-9):
            hint = ("the plain stack has no identity term: its factors are the J's alone, each of norm at most "
                    "eps, so the product is at most eps^L")
        else:
            hint = "each residual factor I + J stretches a vector by a factor in [1 - eps, 1 + eps]; a plain one by at most eps"
        return Check("the bounds at eps = 0.2, L = 50", False,
                     f"got residual [{got[0]:.4g}, {got[1]:.4g}], plain {got[2]:.4g}", hint)

    checks.append(_attempt("the bounds at eps = 0.2, L = 50", bounds,
                           "a factor I + J with ||J|| <= eps stretches a vector by at least 1 - eps and at most "
                           "1 + eps, and L factors in a row combine by multiplication; a plain factor J alone "
                           "stretches by at most eps"))

    def random_products():
        eps, L, n = 0.2, 50, 16
        product = np.asarray(module.random_residual_product(eps, L, n, seed=4), dtype="float64")
        one = np.asarray(module.random_residual_product(eps, 1, n, seed=4), dtype="float64")
        factor_norm = float(np.linalg.norm(one - np.eye(n), 2))
        if not np.isclose(factor_norm, eps, rtol=1e-6):
            return Check("random products lie within the bounds", False,
                         f"one factor I + J has ||J|| = {factor_norm:.4g}, not {eps}",
                         "scale each random matrix to spectral norm exactly eps: J * eps / np.linalg.norm(J, 2)")
        singular = np.linalg.svd(product, compute_uv=False)
        low, high = (1 - eps) ** L, (1 + eps) ** L
        ok = low * (1 - 1e-9) <= singular.min() and singular.max() <= high * (1 + 1e-9)
        return Check("random products lie within the bounds", bool(ok),
                     f"singular values of the product of 50 factors: {singular.min():.3g} to {singular.max():.3g}, "
                     f"bounds {low:.3g} to {high:.3g}",
                     "" if ok else "multiply the factors (I + J_l) in order, each a new random J of norm eps")

    checks.append(_attempt("random products lie within the bounds", random_products,
                           "build the product with numpy: product = (I + J) @ product, L times"))

    def answers():
        answers = getattr(module, "ANSWERS", {}) or {}
        expected = {"residual_lower": 0.8**50, "residual_upper": 1.2**50, "plain_upper": 0.2**50}
        wrong = [key for key, value in expected.items()
                 if answers.get(key) is None or not np.isclose(float(answers[key]), value, rtol=1e-6)]
        ok = not wrong
        return Check("ANSWERS: the three numbers", ok, "all three right" if ok else f"wrong or missing: {wrong}",
                     "" if ok else "ANSWERS holds the bounds' values at eps = 0.2, L = 50: what "
                                   "residual_bounds(0.2, 50) and plain_bound(0.2, 50) return when they are right")

    checks.append(_attempt("ANSWERS: the three numbers", answers, "fill in ANSWERS"))
    return checks


# Exercise 6 ----------------------------------------------------------------------------------------


def exercise_6(module):
    import keras

    import residual_keras as rk

    checks = []

    def resnet():
        got = [int(module.resnet_paths(L)) for L in (1, 3, 15)]
        ok = got == [2, 8, 32768]
        hint = ""
        if not ok:
            hint = ("each block doubles the number of paths (skip it, or take its branch): 2^L"
                    + ("; yours is off by one block (2^(L+1) or 2^(L-1))" if got in ([4, 16, 65536], [1, 4, 16384])
                       else ""))
        return Check("paths through L ResNet blocks", ok, f"L = 1, 3, 15: {got}", hint)

    checks.append(_attempt("paths through L ResNet blocks", resnet,
                           "at each block a path takes the branch or the shortcut: two choices per block, "
                           "and the choices of different blocks multiply"))

    def transformer():
        got = [int(module.transformer_paths(L)) for L in (1, 6)]
        ok = got == [4, 4096]
        hint = "" if ok else ("a Transformer block has two residual additions (attention, then feed-forward), so "
                              "L blocks are 2L steps: 2^(2L) paths" + (" (yours counts one addition per block)"
                                                                     if got == [2, 64] else ""))
        return Check("paths through L Transformer blocks", ok, f"L = 1, 6: {got}", hint)

    checks.append(_attempt("paths through L Transformer blocks", transformer,
                           "count the residual additions: each one is a choice between its sublayer and the "
                           "stream, and a Transformer block has more than one"))

    def lengths():
        got = [int(module.paths_of_length(15, k)) for k in range(16)]
        expected = [math.comb(15, k) for k in range(16)]
        ok = got == expected and sum(got) == 2**15
        hint = ""
        if not ok:
            hint = "choose which k of the L branches the path takes: C(L, k) = math.comb(L, k); they add up to 2^L"
            if got == [math.comb(15, k - 1) if k else 0 for k in range(16)]:
                hint += " (yours is C(L, k - 1): off by one)"
        return Check("paths through exactly k of L branches", ok, f"L = 15: {got[:4]}...", hint)

    checks.append(_attempt("paths through exactly k of L branches", lengths,
                           "a path through exactly k branches is a choice of which k of the L blocks it "
                           "enters (math has a function for that count)"))

    def instrument():
        keras.utils.set_random_seed(0)
        model = rk.cifar_resnet(8, width=4, input_shape=(8, 8, 3))  # 3 blocks
        x, y = _batch((4, 8, 8, 3)), _labels(4, classes=10)
        counted = int(module.path_count_from_the_instrument(model, x, y))
        ok = counted == 8 == int(module.resnet_paths(3))
        return Check("path_gradients counts your number on a 3-block ResNet", ok,
                     f"the instrument: {counted}, your formula: {module.resnet_paths(3)}",
                     "" if ok else "sum path_gradients(model, x, y)['num_paths'] over the lengths")

    checks.append(_attempt("path_gradients counts your number on a 3-block ResNet", instrument,
                           "diagnostics.path_gradients(model, x, y)['num_paths']"))
    return checks


CHECKS = {1: exercise_1, 2: exercise_2, 3: exercise_3, 4: exercise_4, 5: exercise_5, 6: exercise_6}

__all__ = ["CHECKS", "Check"]
