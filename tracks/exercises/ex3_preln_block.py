"""Exercise 3: a Pre-LN Transformer block from keras.layers parts (self-test (c), (d)).

What the exercise asks, each tested in general, through `call` as a model
uses it: x = x + Attention(LN(x)) with causal self-attention, then
x = x + MLP(LN(x)) with Dense(hidden, gelu) -> Dense(width), each sublayer
with a LayerNorm of its own, in training and in inference mode, on inputs of
any length; the parameter count; saving. The submission's process
(harness/ex3.py) gives the student's block weights drawn from a seed of the
grader's, and sends back its outputs with one sublayer's parts at zero (so
the other one alone writes into the stream), the whole block's, and where
each part's weights are. Here the same weights are drawn again and every
block the grader knows is computed from them (transformer_reference.py): a
check passes when the block's output is the exercise's form, and a known
mistake gets its own hint. One optional extra reads `residual_steps()`,
what the package's instruments measure, against the same references.
"""

import numpy as np

from tracks.exercises.exercise import CheckSpec, Exercise, WrongForm, array, close, largest_difference
from tracks.exercises.harness.ex3 import changed_input
from tracks.exercises.transformer_reference import (GELU, TOLERANCE, BlockWeights, Variants, layer_norm, matching,
                                                    nearest, scale)

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
    """The sizes of a run, told apart in every draw: the number of heads is never the key size (heads^2 != width:
    a block with the two swapped computes another attention), the length never the width, hidden neither the width
    nor the key size."""
    width = int(rng.choice([8, 12, 16]))
    heads = int(rng.choice([h for h in (1, 2, 4) if width % h == 0 and h * h != width]))
    length = int(rng.integers(4, 8))  # below every width: a block that reads its width off the length axis is seen
    split = int(rng.integers(1, length - 1))
    return {"width": width, "heads": heads,
            "hidden": int(rng.choice([h for h in range(8, 33) if h not in (width, width // heads)])),
            "split": split, "x": rng.standard_normal((2, length, width)).astype("float32").tolist(),
            "later": rng.standard_normal((2, length - split - 1, width)).astype("float32").tolist(),
            "other": rng.standard_normal((1, length + 3, width)).astype("float32").tolist(),
            "weights_seed": int(rng.integers(2**31))}


def _x(inputs, key="x"):
    return np.asarray(inputs[key], "float32").astype("float64")


def _variants(inputs, value, x, zeroed=()):
    block = BlockWeights(value["weights"], value["parts"], inputs["weights_seed"], zeroed)
    return Variants(block, x, inputs["width"], inputs["hidden"])


def _measured(value, key, like):
    return array(value, like.shape, f"the output ({key})")


# shape and the parameter count -----------------------------------------------------------------------------


def judge_shape(inputs, value):
    expected = [list(_x(inputs).shape), list(_x(inputs, "other").shape)]
    for key, shape in zip(("full", "other"), expected):
        if isinstance(value[key], dict):
            return False, f"on an input {tuple(shape)} the block raised {str(value[key].get('error'))[:200]}", \
                "the block takes any sequence length: nothing in it may be fixed to the length build() saw"
    got = [list(np.shape(value["full"])), list(np.shape(value["other"]))]
    return got == expected, f"{tuple(got[0])} for {tuple(expected[0])}, {tuple(got[1])} for {tuple(expected[1])}", \
        ("both sublayers write vectors of the stream's width: the MLP ends with Dense(width), the attention's output "
         "projection keeps the width; the block takes any sequence length")


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


# each sublayer alone: the attention with the MLP's parts at zero, the MLP with the attention's ------------------------


def _attention_fit(inputs, value):
    """(the keys of the attention-alone variants the block matches on x and on the changed input, the gap)."""
    entry, x, changed = value["attention"], _x(inputs), changed_input(inputs).astype("float64")
    if not entry.get("parts"):
        raise WrongForm("no keras.layers.Dense in the block: build the parts the exercise names")
    found = []
    for at, key in ((x, "x"), (changed, "changed")):
        variants = _variants(inputs, value, at, entry["zeroed"]).attention_alone()
        measured = _measured(entry[key], key, at)
        keys = matching(variants, measured)
        found.append(set(keys))
        if key == "x":
            gap = nearest(variants, measured, [k for k in variants if k[0] == "pre" and k[1] is not None and k[2]])
    return found[0] & found[1], gap


def judge_attention(inputs, value):
    keys, gap = _attention_fit(inputs, value)
    detail = (f"with the MLP's parts at zero, block(x) minus x + Attention(LN(x)) computed here from the block's "
              f"weights: {gap:.2g}")
    block = BlockWeights(value["weights"], value["parts"], inputs["weights_seed"])
    heads, key = inputs["heads"], inputs["width"] // inputs["heads"]
    if (block.heads, block.key_dim) != (heads, key):  # the draw makes heads != key size: a swap is seen
        return False, (f"the attention has {block.heads} heads of size {block.key_dim}; the block was given "
                       f"num_heads = {heads} at width {inputs['width']}: {heads} heads of size {key}"), \
            ("MultiHeadAttention(num_heads=self.num_heads, key_dim=width // self.num_heads): the number of heads "
             "first, then each head's size (the two swapped, or a size of your own, is another attention)")
    if any(form == "pre" and norm is not None for form, norm, _ in keys):
        return True, detail, ""
    forms = {form for form, _, _ in keys}
    if "pre" in forms:
        return False, detail, ("the attention reads x itself: it must read LN(x), x = x + Attention(LN(x)), with the "
                               "LayerNorm inside the residual, on the sublayer's input")
    if "no shortcut" in forms:
        return False, detail, "the block outputs Attention(LN(x)) alone: the residual addition is missing"
    if "post" in forms:
        return False, detail, ("the output is normalised: a LayerNorm sits on the stream after the addition (Post-LN, "
                               "LN(x + F(x))). In Pre-LN the norm is inside the residual: x + F(LN(x)).")
    return False, detail, ("with the MLP writing 0 the block must be x + MultiHeadAttention(h, h, "
                           "use_causal_mask=True) with h = LN(x), computed with the block's own weights")


def judge_causal(inputs, value):
    keys, _ = _attention_fit(inputs, value)
    split = inputs["split"]
    if any(causal for _, _, causal in keys):
        return True, f"the attention is causal: changing positions after {split} changes no earlier one", ""
    if keys:
        return False, (f"the attention is not causal: changing positions after {split} changes earlier ones"), \
            "call the attention with use_causal_mask=True: position t may read positions <= t only"
    return False, "the attention's write is no attention the grader computes from the block's weights", \
        "self-attention with use_causal_mask=True on LN(x): attention(h, h, use_causal_mask=True)"


def _mlp_fit(inputs, value):
    entry, x = value["mlp"], _x(inputs)
    if not entry.get("parts"):
        raise WrongForm("no keras.layers.MultiHeadAttention in the block: build the parts the exercise names")
    variants = _variants(inputs, value, x, entry["zeroed"]).mlp_alone()
    measured = _measured(entry["x"], "x", x)
    gap = nearest(variants, measured, [k for k in variants if k[0] == "pre" and k[1] is not None and k[2] in GELU])
    return set(matching(variants, measured)), gap


def judge_mlp(inputs, value):
    keys, gap = _mlp_fit(inputs, value)
    detail = (f"with the attention's parts at zero, block(x) minus x + MLP(LN(x)) computed here from the block's "
              f"weights (GELU): {gap:.2g}")
    if any(form == "pre" and norm is not None and act in GELU for form, norm, act in keys):
        return True, detail, ""
    acts = {act for form, norm, act in keys if form == "pre" and norm is not None}
    if "relu" in acts:
        return False, detail + " (it computes ReLU)", ("the MLP is Dense(hidden, activation=\"gelu\") then "
                                                       "Dense(width): GELU, as the exercise says, not ReLU")
    if "none" in acts:
        return False, detail + " (no activation)", "the first Dense of the MLP needs activation=\"gelu\""
    forms = {form for form, _, _ in keys}
    if "pre" in forms:
        return False, detail, ("the MLP reads x itself: it must read LN(x), x = x + MLP(LN(x)), with its own "
                               "LayerNorm inside the residual")
    if "no shortcut" in forms:
        return False, detail, "the block outputs MLP(LN(x)) alone: the residual addition is missing"
    return False, detail, ("with the attention writing 0 the block must be x + Dense(width)(Dense(hidden, gelu)(LN(x))), "
                           "computed with the block's own weights")


def judge_own_norms(inputs, value):
    attention_keys, _ = _attention_fit(inputs, value)
    mlp_keys, _ = _mlp_fit(inputs, value)
    count = len(value["parts"]["norms"])
    # which LayerNorm each sublayer reads, whether or not its shortcut is right (the identity check says that)
    read_by_attention = {norm for form, norm, _ in attention_keys if form in ("pre", "no shortcut") and norm is not None}
    read_by_mlp = {norm for form, norm, _ in mlp_keys if form in ("pre", "no shortcut") and norm is not None}
    if not read_by_attention or not read_by_mlp:
        return False, (f"{count} LayerNormalization in the block; which one each sublayer reads could not be told: "
                       "a sublayer is not x + F(LN(x)) of the block's weights (see the attention and MLP checks)"), \
            "each sublayer reads its own LayerNormalization: x + Attention(LN1(x)), then x + MLP(LN2(x))"
    if read_by_attention.isdisjoint(read_by_mlp):
        return True, f"the attention reads LayerNorm {min(read_by_attention)}, the MLP LayerNorm {min(read_by_mlp)}", ""
    return False, f"both sublayers read the same LayerNormalization (of {count} in the block)", \
        ("one LayerNormalization shared by both sublayers: give each sublayer its own (attention_norm, mlp_norm), "
         "so that each has its own gamma and beta")


# the identity path ----------------------------------------------------------------------------------------


def judge_identity(inputs, value):
    x = _x(inputs)
    out = array(value["identity"], x.shape, "the output")
    detail = f"with every kernel and bias at 0, the output differs from the input by up to {largest_difference(out, x):.3g}"
    if close(out, x, TOLERANCE):
        return True, "x_L = x_0", ""
    if close(out, np.zeros_like(x), TOLERANCE, scale=scale(x)):
        return False, detail, "the block outputs 0 when F = 0: the residual addition is missing (x = x + F(LN(x)))"
    block = BlockWeights(value["weights"], value["parts"], inputs["weights_seed"])
    if any(close(out, layer_norm(x, norm), TOLERANCE) or close(out, layer_norm(layer_norm(x, norm), other), TOLERANCE)
           for norm in block.norms for other in block.norms):
        return False, detail, ("the output is normalised: a LayerNorm sits on the stream after the addition (Post-LN, "
                               "LN(x + F(x)), or one norm around the whole block). In Pre-LN the norm is inside the "
                               "residual, on the sublayer's input only: x + F(LN(x)).")
    return False, detail, "with F = 0 each sublayer must add nothing: x = x + F(LN(x)), twice"


# the whole block: the order of the sublayers, both modes, any length -----------------------------------------------


def _whole_fit(inputs, value, key="full", at="x"):
    x = _x(inputs, at)
    variants = _variants(inputs, value, x).whole()
    return variants, set(matching(variants, _measured(value[key], key, x)))


def judge_order(inputs, value):
    variants, keys = _whole_fit(inputs, value)
    _, other = _whole_fit(inputs, value, "other", "other")
    target = [k for k in variants if k[0] == "sequential" and k[1] is not None and k[2] is not None and k[4]
              and k[3] in GELU]
    gap = nearest(variants, _measured(value["full"], "full", _x(inputs)), target)
    detail = f"block(x) minus x + a + MLP(LN(x + a)), a = Attention(LN(x)), computed here: {gap:.2g}"
    arrangements = {k[0] for k in keys & other}
    if arrangements & {"sequential", "post"}:
        return True, detail, ""
    if "side by side" in arrangements:
        return False, detail, ("the MLP must read the stream after the attention's addition: x = x + Attention(LN(x)), "
                               "then x = x + MLP(LN(x)) on that new x (not both sublayers on the same input, side by "
                               "side)")
    if "MLP first" in arrangements:
        return False, detail, ("the MLP must read the stream after the attention's addition: the attention comes "
                               "first, x = x + Attention(LN(x)), then x = x + MLP(LN(x))")
    if keys and not other:
        return False, detail + " (right on x, not on a longer input)", \
            "the block must work on inputs of any length: nothing in it may depend on the sequence length of build()"
    return False, detail, ("x = x + Attention(LN(x)), then x = x + MLP(LN(x)) on that new x: the grader computes this "
                           "from the block's weights")


def judge_training(inputs, value):
    variants, keys = _whole_fit(inputs, value)
    x = _x(inputs)
    training = _measured(value["training"], "training", x)
    inference = _measured(value["full"], "full", x)
    gap = largest_difference(training, inference)
    if not keys:
        return False, "in inference mode the block is none the grader computes from its weights (see the order check)", \
            "x = x + Attention(LN(x)), then x = x + MLP(LN(x)), in both modes"
    same = [key for key in keys if close(training, variants[key], TOLERANCE)]
    detail = f"training=True and training=False differ by {gap:.2g}"
    return bool(same), detail, ("the block has no dropout, so it computes the same in both modes: the residual "
                                "additions (and everything else) must not depend on `training`")


# saving -----------------------------------------------------------------------------------------------------


def judge_saving(inputs, value):
    x = _x(inputs)
    if value["config"] != {"num_heads": inputs["heads"], "hidden": inputs["hidden"]}:
        return False, f"get_config gives {value['config']}", "keep the skeleton's get_config (num_heads, hidden)"
    if value.get("name") != "block":
        return False, f"a block named 'block' comes back from its config named {value.get('name')!r}", \
            ("keep the skeleton's __init__: super().__init__(**kwargs) passes on what Keras gives it, so that "
             "from_config(get_config()) gives the block back with its name (and dtype)")
    variants, keys = _whole_fit(inputs, value, "output")
    if not keys:
        return False, "the block is none the grader computes from its weights (see the order check)", \
            "x = x + Attention(LN(x)), then x = x + MLP(LN(x))"
    expected = variants[sorted(keys, key=str)[0]]
    for key, what in (("clone", "from_config(get_config())"), ("loaded", "the saved and reloaded model")):
        if not close(array(value[key], x.shape), expected, TOLERANCE):
            return False, f"{what} computes something else than the block from its weights", \
                "keep the skeleton's decorator and get_config"
    return True, "get_config, from_config and a .keras file give the same block back", ""


# optional: the steps the instruments read ----------------------------------------------------------------------


def judge_steps(inputs, value):
    x, gaps = _x(inputs), []
    for entry, seed in zip(value, (inputs["weights_seed"], inputs["weights_seed"] + 1)):
        block = BlockWeights(entry["weights"], entry["parts"], seed)
        variants = Variants(block, x, inputs["width"], inputs["hidden"])
        call = _measured(entry["call"], "call", x)
        keys = [k for k in matching(variants.whole(), call) if k[0] == "sequential"]
        if not keys:
            raise WrongForm("call() is not the Pre-LN block of its weights (see the required checks)")
        _, i, j, act, causal = keys[0]
        attention = variants.attend(x, i, causal, "x")
        feedforward = variants.mlp(x + attention, j, act, ("after", i, causal))
        gaps.append(max(largest_difference(_measured(entry["attention"], "attention", x), attention),
                        largest_difference(_measured(entry["feedforward"], "feedforward", x), feedforward)))
    ok = all(gap <= 10 * TOLERANCE * scale(x) for gap in gaps)
    return ok, f"the steps' branches minus what call() adds, computed here: {gaps[0]:.2g} before, {gaps[1]:.2g} " \
               "after the weights change", \
        ("residual_steps() must compute with the block's own layers, each time: [ResidualStep('attention', branch), "
         "ResidualStep('feedforward', branch)] where each branch computes exactly what call() adds to the stream, with "
         "its LayerNorm inside (no copies of the weights)")


EXERCISE = Exercise(
    number=3, title="a Pre-LN Transformer block from keras.layers parts", self_test="(c), (d)",
    filename="ex3_preln_block.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("shape", "the output has the input's shape, at any length", "block", judge_shape,
                  "build() makes the parts, call() uses them"),
        CheckSpec("causal", "causal: a later position does not change an earlier one", "block", judge_causal,
                  "self-attention with use_causal_mask=True: position t reads positions <= t only"),
        CheckSpec("parameters", "the parameter count", "parameters", judge_parameters,
                  "build every part in build()"),
        CheckSpec("attention", "the attention: x + Attention(LN(x)), from the block's weights", "block",
                  judge_attention, "build every part in build(), and write call()"),
        CheckSpec("mlp", "the MLP: x + MLP(LN(x)) with GELU, from the block's weights", "block", judge_mlp,
                  "build every part in build(), and write call()"),
        CheckSpec("own_norms", "each sublayer has its own LayerNorm", "block", judge_own_norms,
                  "build every part in build(), and write call()"),
        CheckSpec("identity", "with both sublayers writing 0 the block is the identity", "block",
                  judge_identity, "build every part in build(), so that the block has its weights after one call"),
        CheckSpec("order", "the MLP reads the stream after the attention's addition", "block", judge_order,
                  "build every part in build(), and write call()"),
        CheckSpec("training", "the same in training and in inference mode", "block", judge_training,
                  "call(x, training=...) must work: keras passes training to call() when it takes it"),
        CheckSpec("saving", "saving: get_config, registration, a .keras file", "saving", judge_saving,
                  "keep the skeleton's decorator and get_config; build every part in build()"),
        CheckSpec("steps", "residual_steps() describes call(), also after the weights change", "steps", judge_steps,
                  "return [rk.ResidualStep('attention', branch), rk.ResidualStep('feedforward', branch)] where each "
                  "branch computes exactly what call() adds to the stream", optional=True),
    ))
