"""Exercise 3's references, in float64 in the grader's process: a Transformer block computed from its weights.

The submission's process gives the student's block weights drawn from a
seed of the grader's (harness/values.py `set_drawn_weights`) and sends back
where each part's weights are and what the block computed. Here the same
values are drawn again from the same seed, so a block's weights are known
without trusting a number it sent, and every way of arranging its parts that
the grader knows is computed from them: the exercise's Pre-LN block and the
mistakes students make (a sublayer without its LayerNorm, without its
shortcut, side by side, in the wrong order, Post-LN, ReLU for GELU, no
causal mask). A block's output is matched against them: the exercise's form
passes, a known mistake gets its hint, and anything else fails.
"""

import itertools
import math

import numpy as np

from tracks.exercises.exercise import WrongForm
from tracks.exercises.harness.values import drawn_weight

MAX_VALUES = 200_000  # weights the grader draws again for one block: the exercise's blocks have a few thousand
MAX_NORMS, MAX_DENSE = 4, 8  # parts the grader arranges: every arrangement of 4 norms is 2,000 blocks
ATTENTION_KEYS = [f"{name}_{kind}" for name in ("query", "key", "value", "output") for kind in ("kernel", "bias")]


def _erf(z):
    return np.vectorize(math.erf, otypes=[float])(z)


ACTIVATIONS = {
    "gelu": lambda z: 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0))),
    "gelu (tanh)": lambda z: 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3))),
    "relu": lambda z: np.maximum(z, 0.0),
    "none": lambda z: z,
}
GELU = ("gelu", "gelu (tanh)")  # either form of GELU is the exercise's


def _index(value, count):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise WrongForm(f"a part names weight {value!r} of {count}")
    return value


class BlockWeights:
    """A block's weights, drawn again here from the seed, and its parts (from a probe's `weights`, `parts`)."""

    def __init__(self, weights, parts, seed, zeroed=()):
        if not isinstance(weights, list) or not isinstance(parts, dict):
            raise WrongForm("the block's weights and parts have the wrong form")
        shapes = []
        for weight in weights:
            shape = weight.get("shape") if isinstance(weight, dict) else None
            if (not isinstance(shape, list) or not 1 <= len(shape) <= 4
                    or not all(isinstance(s, int) and not isinstance(s, bool) and 0 < s <= 4096 for s in shape)):
                raise WrongForm("a weight's shape has the wrong form")
            shapes.append((str(weight.get("name", "")), tuple(shape)))
        if sum(math.prod(shape) for _, shape in shapes) > MAX_VALUES:
            raise WrongForm(f"more than {MAX_VALUES:,} weights")
        rng = np.random.default_rng(seed)
        self.values = [drawn_weight(rng, name, shape).astype("float64") for name, shape in shapes]
        count = len(self.values)
        for i in zeroed if isinstance(zeroed, list) else ():
            i = _index(i, count)
            self.values[i] = np.zeros_like(self.values[i])

        def get(i, shape=None):
            i = _index(i, count)
            if i is None:
                return None
            if shape is not None and self.values[i].shape != shape:
                raise WrongForm(f"weight {i} has shape {self.values[i].shape}, not {shape}")
            return self.values[i]

        attentions = parts.get("attention") or []
        if not attentions or not isinstance(attentions[0], dict):
            raise WrongForm("no keras.layers.MultiHeadAttention in the block: build the parts the exercise names")
        self.attention = {key: get(attentions[0].get(key)) for key in ATTENTION_KEYS}
        if any(self.attention[f"{name}_kernel"] is None for name in ("query", "key", "value", "output")):
            raise WrongForm("the MultiHeadAttention's kernels were not found")
        if any(self.attention[f"{name}_kernel"].ndim != 3 for name in ("query", "key", "value", "output")):
            raise WrongForm("the MultiHeadAttention's kernels are not (width, heads, size) and (heads, size, width)")
        # what the block's attention is, read off its query and key kernels: (width, heads, key size)
        self.heads, self.key_dim = self.attention["query_kernel"].shape[1:]
        if self.attention["key_kernel"].shape[1:] != (self.heads, self.key_dim):
            raise WrongForm("the MultiHeadAttention's query and key kernels differ in their heads or key size")
        if len(parts.get("norms") or []) > MAX_NORMS or len(parts.get("dense") or []) > MAX_DENSE:
            raise WrongForm(f"more than {MAX_NORMS} LayerNormalization or {MAX_DENSE} Dense layers: the exercise's "
                            "block has 2 of each")
        self.norms = []
        for norm in parts.get("norms") or []:
            epsilon = norm.get("epsilon") if isinstance(norm, dict) else None
            if not isinstance(epsilon, (int, float)) or not 0 <= epsilon < 1:
                raise WrongForm("a LayerNormalization's epsilon has the wrong form")
            self.norms.append((get(norm.get("gamma")), get(norm.get("beta")), float(epsilon), bool(norm.get("rms"))))
        self.dense = [(get(d.get("kernel")), get(d.get("bias"))) for d in parts.get("dense") or [] if isinstance(d, dict)]

    def mlp_parts(self, width, hidden):
        """(Dense(hidden), Dense(width)) by their kernels' shapes, or `WrongForm`."""
        first = [d for d in self.dense if d[0] is not None and d[0].shape == (width, hidden)]
        last = [d for d in self.dense if d[0] is not None and d[0].shape == (hidden, width)]
        if not first or not last:
            raise WrongForm(f"the MLP needs Dense({hidden}) then Dense({width}) (keras.layers.Dense, found "
                            f"{len(self.dense)} Dense layers)")
        return first[0], last[0]


def layer_norm(z, norm):
    gamma, beta, epsilon, rms = norm
    if rms:
        out = z / np.sqrt(np.mean(z**2, axis=-1, keepdims=True) + epsilon)
    else:
        mean = z.mean(axis=-1, keepdims=True)
        out = (z - mean) / np.sqrt(((z - mean) ** 2).mean(axis=-1, keepdims=True) + epsilon)
    return out * (1.0 if gamma is None else gamma) + (0.0 if beta is None or rms else beta)


def attention(z, weights, causal):
    """keras.layers.MultiHeadAttention(z, z) from its weights, with or without the causal mask."""
    def project(name):
        out = np.einsum("btd,dhk->bthk", z, weights[f"{name}_kernel"])
        return out if weights[f"{name}_bias"] is None else out + weights[f"{name}_bias"]

    query, key, value = project("query"), project("key"), project("value")
    scores = np.einsum("bshk,bthk->bhts", key, query) / math.sqrt(query.shape[-1])
    if causal:
        length = z.shape[1]
        scores = np.where(np.tril(np.ones((length, length), bool)), scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    mixed = np.einsum("bhts,bshk->bthk", scores / scores.sum(axis=-1, keepdims=True), value)
    out = np.einsum("bthk,hkd->btd", mixed, weights["output_kernel"])
    return out if weights["output_bias"] is None else out + weights["output_bias"]


class Variants:
    """Every block the grader knows, computed from one `BlockWeights` on one input, memoised."""

    def __init__(self, block, x, width, hidden):
        self.block, self.x = block, np.asarray(x, "float64")
        self.first, self.last = block.mlp_parts(width, hidden)
        self.norm_choices = [None, *range(len(block.norms))]
        self.memo = {}

    def norm(self, z, i):
        return z if i is None else layer_norm(z, self.block.norms[i])

    def attend(self, z, i, causal, tag):
        key = ("a", tag, i, causal)
        if key not in self.memo:
            self.memo[key] = attention(self.norm(z, i), self.block.attention, causal)
        return self.memo[key]

    def mlp(self, z, j, act, tag):
        key = ("m", tag, j, act)
        if key not in self.memo:
            kernel_in, bias_in = self.first
            kernel_out, bias_out = self.last
            h = self.norm(z, j) @ kernel_in + (0.0 if bias_in is None else bias_in)
            self.memo[key] = ACTIVATIONS[act](h) @ kernel_out + (0.0 if bias_out is None else bias_out)
        return self.memo[key]

    def attention_alone(self):
        """{(form, norm, causal): output} of the block with the MLP writing 0."""
        x, found = self.x, {}
        for i, causal in itertools.product(self.norm_choices, (True, False)):
            a = self.attend(x, i, causal, "x")
            found["pre", i, causal] = x + a
            found["no shortcut", i, causal] = a
        for causal in (True, False):
            summed = x + self.attend(x, None, causal, "x")
            for k in range(len(self.block.norms)):
                found["post", k, causal] = self.norm(summed, k)
                for k2 in range(len(self.block.norms)):
                    found["post", (k, k2), causal] = self.norm(self.norm(summed, k), k2)
        return found

    def mlp_alone(self):
        """{(form, norm, activation): output} of the block with the attention writing 0."""
        x, found = self.x, {}
        for j, act in itertools.product(self.norm_choices, ACTIVATIONS):
            m = self.mlp(x, j, act, "x")
            found["pre", j, act] = x + m
            found["no shortcut", j, act] = m
        return found

    def whole(self):
        """{(arrangement, attention's norm, MLP's norm, activation, causal): output} of the whole block."""
        x, found = self.x, {}
        for i, j, act, causal in itertools.product(self.norm_choices, self.norm_choices, ACTIVATIONS, (True, False)):
            a = self.attend(x, i, causal, "x")
            after = x + a
            found["sequential", i, j, act, causal] = after + self.mlp(after, j, act, ("after", i, causal))
            found["side by side", i, j, act, causal] = after + self.mlp(x, j, act, "x")
            first = x + self.mlp(x, j, act, "x")
            found["MLP first", i, j, act, causal] = first + attention(self.norm(first, i), self.block.attention,
                                                                      causal)
            if i is not None and j is not None:
                summed = self.norm(x + self.attend(x, None, causal, "x"), i)
                found["post", i, j, act, causal] = self.norm(summed + self.mlp(summed, None, act, ("post", i, causal)),
                                                             j)
        return found


TOLERANCE = 1e-4  # of the largest value: the solution's float32 is off by under 3e-7 of it (10 seeds)


def scale(array):
    """The size of an output: its largest value (a tolerance is this times a relative one)."""
    return float(np.max(np.abs(array))) if array.size else 0.0


def matching(variants, measured, tolerance=TOLERANCE):
    """The keys of `variants` whose output is `measured`: float32 against float64, to `tolerance` of the
    variant's own size (the grader's value, never the file's, sets the scale)."""
    return [key for key, out in variants.items()
            if out.shape == measured.shape and float(np.max(np.abs(out - measured))) <= tolerance * scale(out)]


def nearest(variants, measured, keys):
    """The smallest largest-difference between `measured` and the variants `keys`."""
    gaps = [float(np.max(np.abs(variants[key] - measured))) for key in keys
            if key in variants and variants[key].shape == measured.shape]
    return min(gaps) if gaps else math.inf


__all__ = ["ACTIVATIONS", "BlockWeights", "GELU", "Variants", "attention", "layer_norm", "matching", "nearest"]
