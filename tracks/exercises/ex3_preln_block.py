"""Exercise 3: a Pre-LN Transformer block from keras.layers parts (self-test (c), (d)).

The grader draws the width, heads, hidden size, sequence length and inputs
from the run's seed. Every required check reads the block through its
`call`, as a model uses it. The submission's process sends back raw
outputs: of the block on inputs that differ only after a drawn position
(causality); of the block with one sublayer's parts at zero (so the other
sublayer alone writes into the stream), as each weight is changed in turn
(every weight must move one sublayer only: one LayerNorm per sublayer) and
on an input scaled and shifted per position (a sublayer that reads LN(x)
does not move); of the block in training and inference mode, before and
after all its weights change. One optional extra reads `residual_steps()`,
what the package's instruments measure, against the call. Every comparison
is made here.
"""

import numpy as np

from tracks.exercises.exercise import CheckSpec, Exercise, WrongForm, array, close, largest_difference, plain

SKELETON = '''"""Exercise 3: a Pre-LN Transformer block from keras.layers parts.

Pre-LN (Xiong et al. 2020; GPT-2) wraps each of the two sublayers as

    x = x + Attention(LN(x))
    x = x + MLP(LN(x))

so the stream itself is never normalised: x_L = x_0 + (the sum of every
sublayer's output). Post-LN puts the norm after the addition,
x = LN(x + F(x)), and has no clean identity path.

Write `PreLNBlock(num_heads, hidden)`: causal self-attention
(keras.layers.MultiHeadAttention with key_dim = width // num_heads and
use_causal_mask=True), then an MLP Dense(hidden, gelu) -> Dense(width),
each inside its own residual addition with its own LayerNormalization
before it. Build the parts in `build()`, and write the two lines above in
`call()`.

Check your work:  python -m tracks check THIS_FILE

Hints:
- attention(query, value, use_causal_mask=True) with query = value = LN(x);
- two LayerNormalization layers, one per sublayer, applied to the sublayer's
  input, never to the stream after the addition;
- the block behaves the same in training and in inference (it has no dropout).

Optional (its own check, not needed to pass): the package's instruments
(rk.lesion, rk.gradient_norms, ...) measure a block through
`residual_steps()`, the same two additions as a list:
[rk.ResidualStep("attention", branch), rk.ResidualStep("feedforward", branch)],
each branch the function your call adds to the stream (x -> Attention(LN(x)),
x -> MLP(LN(x))), computed with the block's own layers.
"""

import keras

import residual_keras as rk

EXERCISE = 3


@keras.saving.register_keras_serializable(package="exercises")
class PreLNBlock(rk.BlockLayer):
    def __init__(self, num_heads, hidden, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden = hidden

    def build(self, input_shape):
        raise NotImplementedError

    def call(self, x):
        raise NotImplementedError  # x = x + Attention(LN(x)), then x = x + MLP(LN(x))

    def residual_steps(self, training=False):  # optional: for the instruments
        raise NotImplementedError

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "hidden": self.hidden}
'''


def draw(rng):
    width = int(rng.choice([8, 12, 16]))
    heads = int(rng.choice([h for h in (1, 2, 4) if width % h == 0]))
    length = int(rng.integers(4, 9))
    split = int(rng.integers(1, length - 1))
    return {"width": width, "heads": heads, "hidden": int(rng.integers(8, 33)), "split": split,
            "x": rng.standard_normal((2, length, width)).astype("float32").tolist(),
            "later": rng.standard_normal((2, length - split - 1, width)).astype("float32").tolist(),
            "scale": round(float(rng.uniform(2.0, 5.0)), 3), "shift": rng.standard_normal((2, length, 1)).tolist(),
            "noise_seed": int(rng.integers(2**31))}


def _x(inputs):
    return np.asarray(inputs["x"], "float32")


def _block(module, inputs):
    cls = getattr(module, "PreLNBlock", None)
    if cls is None:
        raise AttributeError("no class PreLNBlock in the file")
    block = cls(inputs["heads"], inputs["hidden"])
    block(_x(inputs))
    return block


def _branches(block):
    steps = list(block.residual_steps())
    if len(steps) != 2:
        raise ValueError(f"residual_steps() returned {len(steps)} steps, not 2 (attention, then feedforward)")
    return steps[0].branch, steps[1].branch


def _perturb(block, seed):
    """Adds seeded noise to every weight of the block (the same for every submission of the run)."""
    rng = np.random.default_rng(seed)
    for weight in block.weights:
        value = np.asarray(weight.numpy(), "float32")
        weight.assign(value + rng.standard_normal(value.shape).astype("float32") * (0.2 + 0.5 * np.abs(value).mean()))


def _scale(expected):
    return max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0


# shape and causality --------------------------------------------------------------------------------------


def probe_shape(module, inputs):
    return list(_block(module, inputs)(_x(inputs)).shape)


def judge_shape(inputs, value):
    expected = list(_x(inputs).shape)
    return list(value) == expected, f"{tuple(value)} for {tuple(expected)}", \
        ("both sublayers write vectors of the stream's width: the MLP ends with Dense(width), the attention's output "
         "projection keeps the width")


def probe_causal(module, inputs):
    block, x = _block(module, inputs), _x(inputs)
    changed = x.copy()
    changed[:, inputs["split"] + 1:] = np.asarray(inputs["later"], "float32")
    return [plain(block(x)), plain(block(changed))]


def judge_causal(inputs, value):
    x, split = _x(inputs), inputs["split"]
    first, second = (array(out, x.shape, "the output") for out in value)
    earlier = largest_difference(first[:, :split + 1], second[:, :split + 1])
    ok = earlier <= 1e-5 * _scale(first)
    return ok, f"positions after {split} changed: positions 0..{split} moved by {earlier:.2g}", \
        "call the attention with use_causal_mask=True: position t may read positions <= t only"


# parameters ---------------------------------------------------------------------------------------------------


def probe_parameters(module, inputs):
    return [list(weight.shape) for weight in _block(module, inputs).trainable_weights]


def expected_parameters(width, heads, hidden):
    key = width // heads
    attention = 4 * width * heads * key + 3 * heads * key + width
    return attention + 2 * 2 * width + width * hidden + hidden + hidden * width + width


def judge_parameters(inputs, value):
    width, heads, hidden = inputs["width"], inputs["heads"], inputs["hidden"]
    expected, got = expected_parameters(width, heads, hidden), int(sum(np.prod(shape) for shape in value))
    detail = f"{got:,} trainable parameters (width {width}, {heads} heads, hidden {hidden}: expected {expected:,})"
    if got == expected - 2 * width:
        return False, detail, ("2 x width too few: one LayerNormalization shared by both sublayers? Each sublayer has "
                               "its own (its own gamma and beta), created in build()")
    return got == expected, detail, ("MultiHeadAttention(num_heads, key_dim=width // num_heads), two "
                                     "LayerNormalization, Dense(hidden, gelu) and Dense(width), all with biases")


# each sublayer has its own LayerNorm, and reads a normalised input -------------------------------------------------
#
# Read through call() alone: with one sublayer's parts at zero, that sublayer writes nothing into the stream
# (an MLP of Dense layers with zero kernels and biases writes gelu(0) W2 + b2 = 0; an attention with zero
# projections writes 0), so block(x) - x is what the other sublayer writes: Attention(LN(x)), or MLP(LN(x)).

SUBLAYERS = {"attention": "Dense", "feedforward": "MultiHeadAttention"}  # the sublayer measured: the parts zeroed


def _parts(block, kind):
    """The block's sublayers of the keras.layers class named `kind`, at any depth (a Sequential MLP too)."""
    import keras

    cls = getattr(keras.layers, kind)
    return [layer for layer in block._flatten_layers(include_self=False, recursive=True) if isinstance(layer, cls)]


def _silenced(block, kind):
    """Zeroes the weights of the block's `kind` sublayers: (their ids, a function that restores every weight)."""
    saved = [weight.numpy() for weight in block.weights]
    silent = {id(weight) for layer in _parts(block, kind) for weight in layer.weights}
    for weight in block.weights:
        if id(weight) in silent:
            weight.assign(np.zeros(weight.shape, "float32"))
    return silent, lambda: [weight.assign(value) for weight, value in zip(block.weights, saved)]


def probe_sublayers(module, inputs):
    block, x = _block(module, inputs), _x(inputs)
    moved = x * np.float32(inputs["scale"]) + np.asarray(inputs["shift"], "float32")
    rng = np.random.default_rng(inputs["noise_seed"])
    found = {"names": [str(weight.path) for weight in block.weights]}
    for measured, zeroed in SUBLAYERS.items():
        silent, restore = _silenced(block, zeroed)
        writes = {"parts": len(_parts(block, zeroed)), "base": plain(block(x) - x), "moved": plain(block(moved) - moved),
                  "changed": []}
        for weight in block.weights:  # each weight in turn (not the silenced sublayer's: it stays at zero)
            if id(weight) in silent:
                writes["changed"].append(None)
                continue
            value = weight.numpy()
            weight.assign(value + rng.standard_normal(value.shape).astype(value.dtype))
            writes["changed"].append(plain(block(x) - x))
            weight.assign(value)
        found[measured] = writes
        restore()
    return found


def _writes(inputs, value, measured):
    """What one sublayer writes into the stream, sent back; `WrongForm` when the block has no such parts."""
    writes = value[measured]
    if not writes["parts"]:
        raise WrongForm(f"no keras.layers.{SUBLAYERS[measured]} in the block: build the parts the exercise names "
                        "(MultiHeadAttention, two LayerNormalization, two Dense)")
    return writes


def judge_own_norms(inputs, value):
    shape = _x(inputs).shape
    attention, feedforward = _writes(inputs, value, "attention"), _writes(inputs, value, "feedforward")
    bases = [array(attention["base"], shape, "the output"), array(feedforward["base"], shape, "the output")]
    both, used = [], 0
    for name, *outputs in zip(value["names"], attention["changed"], feedforward["changed"]):
        moved = [out is not None and largest_difference(array(out, shape, "the output"), base) > 1e-6 * _scale(base)
                 for out, base in zip(outputs, bases)]
        used += any(moved)
        if all(moved):
            both.append(str(name))
    if not value["names"] or not used:
        raise WrongForm("no weight of the block changes what its sublayers write")
    if both:
        return False, f"these weights change what both sublayers write: {', '.join(both[:4])}", \
            ("one LayerNormalization shared by both sublayers: give each sublayer its own (attention_norm, mlp_norm), "
             "so that each has its own gamma and beta")
    return True, f"each of the block's {len(value['names'])} weights changes one sublayer at most", ""


def judge_normalised(inputs, value):
    shape, worst = _x(inputs).shape, []
    for measured in SUBLAYERS:
        writes = _writes(inputs, value, measured)
        base = array(writes["base"], shape, "the output")
        worst.append(largest_difference(base, array(writes["moved"], shape, "the output")) / _scale(base))
    ok = max(worst) < 5e-2
    return ok, (f"scaling each position by {inputs['scale']} and shifting it changes what the attention writes by "
                f"{worst[0]:.2g}, what the MLP writes by {worst[1]:.2g} (relative)"), \
        ("each sublayer must start with its LayerNorm, x + F(LN(x)): a normalised input does not change when a "
         "position is scaled or shifted. The norm goes inside the residual, on the sublayer's input.")


# the identity path --------------------------------------------------------------------------------------------


def probe_identity(module, inputs):
    block, x = _block(module, inputs), _x(inputs)
    for weight in block.weights:  # every kernel and bias at 0 (the LayerNorms' gamma, beta kept): F = 0
        if weight.name not in ("gamma", "beta"):
            weight.assign(np.zeros(weight.shape, "float32"))
    return plain(block(x))


def judge_identity(inputs, value):
    x = _x(inputs).astype("float64")
    out = array(value, x.shape, "the output")
    detail = f"the output differs from the input by up to {largest_difference(out, x):.3g}"
    if close(out, x, atol=1e-5):
        return True, "x_L = x_0", ""
    if np.allclose(out, 0.0, atol=1e-5):
        return False, detail, "the block outputs 0 when F = 0: the residual addition is missing (x = x + F(LN(x)))"
    if np.allclose(np.sqrt(np.mean(out**2, axis=-1)), 1.0, atol=0.05) or np.allclose(out.mean(axis=-1), 0, atol=1e-4):
        return False, detail, ("the output is normalised: a LayerNorm sits on the stream after the addition (Post-LN, "
                               "LN(x + F(x)), or one norm around the whole block). In Pre-LN the norm is inside the "
                               "residual, on the sublayer's input only: x + F(LN(x)).")
    return False, detail, "with F = 0 each sublayer must add nothing: x = x + F(LN(x)), twice"


# the MLP reads the stream after the attention's addition ------------------------------------------------------------


def probe_order(module, inputs):
    block, x = _block(module, inputs), _x(inputs)
    _perturb(block, inputs["noise_seed"])  # every weight away from its initial value, the LayerNorms' too
    full = plain(block(x))
    _, restore = _silenced(block, "Dense")  # the attention alone: x + Attention(LN(x))
    attention = np.asarray(block(x)) - x
    restore()
    _, restore = _silenced(block, "MultiHeadAttention")  # the MLP alone, on the stream after the attention
    after = x + attention
    mlp = np.asarray(block(after)) - after
    restore()
    return {"full": full, "attention": plain(attention), "mlp_after": plain(mlp),
            "parts": [len(_parts(block, "Dense")), len(_parts(block, "MultiHeadAttention"))]}


def judge_order(inputs, value):
    x = _x(inputs).astype("float64")
    if not all(value["parts"]):
        raise WrongForm("the block needs its MultiHeadAttention and its Dense layers (the parts the exercise names)")
    full, attention, mlp = (array(value[key], x.shape, "the output") for key in ("full", "attention", "mlp_after"))
    gap = largest_difference(full, x + attention + mlp)
    ok = gap <= 1e-4 * _scale(full)
    return ok, f"block(x) minus x + a + MLP(LN(x + a)), a = Attention(LN(x)): {gap:.2g}", \
        ("the MLP must read the stream after the attention's addition: x = x + Attention(LN(x)), then x = x + "
         "MLP(LN(x)) on that new x (not both sublayers on the same input, side by side)")


# training and inference ----------------------------------------------------------------------------------------


def probe_modes(module, inputs):
    block, x = _block(module, inputs), _x(inputs)
    found = []
    for _ in range(2):  # before and after every weight changes
        found.append({"training": plain(block(x, training=True)), "inference": plain(block(x, training=False))})
        _perturb(block, inputs["noise_seed"])
    return found


def judge_training(inputs, value):
    x = _x(inputs)
    entries = [{key: array(entry[key], x.shape, key) for key in ("training", "inference")} for entry in value]
    gaps = [largest_difference(entry["training"], entry["inference"]) for entry in entries]
    ok = all(gap <= 1e-5 * _scale(entry["inference"]) for gap, entry in zip(gaps, entries))
    return ok, f"training=True and training=False differ by {max(gaps):.2g}", \
        ("the block has no dropout, so it computes the same in both modes: the residual additions (and everything "
         "else) must not depend on `training`")


# optional: the steps the instruments read, after the weights change ------------------------------------------------


def probe_steps(module, inputs):
    block, x = _block(module, inputs), _x(inputs)
    found = []
    for _ in range(2):  # before and after every weight changes
        attention, feedforward = _branches(block)
        update = attention(x)
        found.append({"call": plain(block(x, training=False)), "attention": plain(update),
                      "feedforward": plain(feedforward(x + update))})
        _perturb(block, inputs["noise_seed"])
    return found


def judge_steps(inputs, value):
    x = _x(inputs).astype("float64")
    entries = [{key: array(entry[key], x.shape, key) for key in ("call", "attention", "feedforward")}
               for entry in value]
    gaps = [largest_difference(e["call"], x + e["attention"] + e["feedforward"]) for e in entries]
    moved = largest_difference(entries[0]["call"], entries[1]["call"])
    if moved <= 1e-6:
        raise WrongForm("the block computes the same after all its weights changed")
    ok = all(gap <= 1e-4 * _scale(e["call"]) for gap, e in zip(gaps, entries))
    return ok, f"call() minus x + the steps' branches: {gaps[0]:.2g} before, {gaps[1]:.2g} after the weights change", \
        ("residual_steps() must compute with the block's own layers, each time: [ResidualStep('attention', branch), "
         "ResidualStep('feedforward', branch)] where each branch computes exactly what call() adds to the stream, with "
         "its LayerNorm inside (no copies of the weights)")


# saving -----------------------------------------------------------------------------------------------------


def probe_saving(module, inputs):
    import keras

    block, x = _block(module, inputs), _x(inputs)
    config = block.get_config()
    clone = type(block).from_config(config)
    clone(x)
    clone.set_weights(block.get_weights())
    model_input = keras.Input(x.shape[1:])
    model = keras.Model(model_input, block(model_input))
    model.save("model.keras")  # in the submission's own empty working folder
    loaded = keras.saving.load_model("model.keras")
    return {"config": {key: plain(config.get(key)) for key in ("num_heads", "hidden")}, "output": plain(block(x)),
            "clone": plain(clone(x)), "loaded": plain(loaded(x))}


def judge_saving(inputs, value):
    x = _x(inputs)
    output = array(value["output"], x.shape)
    if value["config"] != {"num_heads": inputs["heads"], "hidden": inputs["hidden"]}:
        return False, f"get_config gives {value['config']}", "keep the skeleton's get_config (num_heads, hidden)"
    for key, what in (("clone", "from_config(get_config())"), ("loaded", "the saved and reloaded model")):
        if not close(array(value[key], x.shape), output, atol=1e-5):
            return False, f"{what} computes something else", "keep the skeleton's decorator and get_config"
    return True, "get_config, from_config and a .keras file give the same block back", ""


EXERCISE = Exercise(
    number=3, title="a Pre-LN Transformer block from keras.layers parts", self_test="(c), (d)",
    filename="ex3_preln_block.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("shape", "the output has the input's shape", probe_shape, judge_shape,
                  "build() makes the parts, call() uses them"),
        CheckSpec("causal", "causal: a later position does not change an earlier one", probe_causal, judge_causal,
                  "self-attention with use_causal_mask=True: position t reads positions <= t only"),
        CheckSpec("parameters", "the parameter count", probe_parameters, judge_parameters,
                  "build every part in build()"),
        CheckSpec("own_norms", "each sublayer has its own LayerNorm (a weight changes one sublayer only)",
                  probe_sublayers, judge_own_norms, "build every part in build(), and write call()"),
        CheckSpec("normalised", "each sublayer reads a normalised input, x + F(LN(x))", probe_sublayers,
                  judge_normalised, "build every part in build(), and write call()"),
        CheckSpec("identity", "with both sublayers writing 0 the block is the identity", probe_identity,
                  judge_identity, "build every part in build(), so that the block has its weights after one call"),
        CheckSpec("order", "the MLP reads the stream after the attention's addition", probe_order, judge_order,
                  "build every part in build(), and write call()"),
        CheckSpec("training", "the same in training and in inference mode", probe_modes, judge_training,
                  "call(x, training=...) must work: keras passes training to call() when it takes it"),
        CheckSpec("saving", "saving: get_config, registration, a .keras file", probe_saving, judge_saving,
                  "keep the skeleton's decorator and get_config; build every part in build()"),
        CheckSpec("steps", "residual_steps() describes call(), also after the weights change",
                  probe_steps, judge_steps, "return [rk.ResidualStep('attention', branch), rk.ResidualStep("
                                            "'feedforward', branch)] where each branch computes exactly what call() "
                                            "adds to the stream", optional=True),
    ))
