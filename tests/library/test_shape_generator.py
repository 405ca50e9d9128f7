"""Every instrument on 42 generated model shapes: a number checked independently, or a refusal.

The shapes (tests/model_shapes.py, `generated_shapes`) cross the data
(images, sequences, tabular), the heads (logits, probabilities, one and
several sigmoids, several outputs, regression), the structures (flat, nested
stages, a first or a last block that changes the shape) and the precision
(float32, mixed_bfloat16), with padding masks on sequences. For each shape
and each instrument, either the result matches what is computed here without
the instruments: by calling the stem, the blocks and the head as layers,
with Keras' own losses, the backend's autodiff (tests/autodiff.py), numpy's
SVD, and hand lesions (the branch's weights set to 0 while Keras runs the
model), or the instrument refuses with a message naming what it does not
support (`REFUSALS`). A wrong number is never returned silently.

Six more shapes (`PER_TOKEN_SHAPES`, built here: tests/model_shapes.py pools
every sequence) keep one output per token after `mask_zero=True`, padded at
the end or at the start, so that the output carries the padding mask: there
the losses, the accuracy and the stream's RMS are over the real positions,
as Keras' own losses average a masked output.

Slow (about 42 x 14 pairs); run on TensorFlow and JAX:
    pytest -q -n 2 -m slow tests/library/test_shape_generator.py
    KERAS_BACKEND=jax pytest -q -n 2 -m slow tests/library/test_shape_generator.py
"""

import functools
import re

import numpy as np
import pytest

import keras
import residual_keras as rk
from autodiff import gradient
from keras import ops
from model_shapes import SEQUENCE_LENGTH, SEQUENCE_VOCAB, Generated, generate, generated_shapes
from residual_keras import diagnostics as d

SHAPES = generated_shapes()
CHANGES = ("first block changes shape", "last block changes shape")
PER_TOKEN_HEADS = ("per-token logits", "per-token probabilities")


def _numpy(tensor):
    return np.asarray(ops.convert_to_numpy(ops.cast(tensor, "float32")), dtype="float64")


def _tolerance(g, exact=False):
    """Relative tolerance: float32 runs agree closely; bfloat16 keeps about 3 digits."""
    if g.precision == "mixed":
        return 2e-3 if exact else 5e-2
    return 1e-5 if exact else 2e-3


def _close(got, want, g, what, exact=False, atol=1e-6):
    got, want = np.asarray(got, dtype="float64"), np.asarray(want, dtype="float64")
    rtol = _tolerance(g, exact)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.allclose(got, want, rtol=rtol, atol=atol + rtol * float(np.max(np.abs(want), initial=0))), (
        f"{what}: {got} != {want} (rtol {rtol})")


def _chosen(outputs):
    return outputs[0] if isinstance(outputs, (list, tuple)) else outputs


def _model_loss(g):
    return g.keras_loss(_chosen(g.model(g.x, training=False)))


def _loss_from(g, start, mask):
    return lambda z: g.loss(g.targets(), ops.cast(g.from_point(start, z, mask), "float32"))


def _grad(function, point):
    return gradient(function, _numpy(point).astype("float32")).astype("float64")


def _masked(array, mask):
    if mask is None:
        return array
    mask = _numpy(mask).astype(bool)
    return array * mask.reshape(mask.shape + (1,) * (array.ndim - 2))


def _norms(array):
    return np.sqrt(np.sum(np.square(array.reshape(len(array), -1)), axis=1))


def _steps_by_hand(g, block, z, mask):
    """[(step name, what its branch wrote, the stream it was added to)] for block at z (numpy)."""
    if isinstance(block, rk.TransformerBlock):
        weights = g.step_weights(block)
        with g.zeroed(weights["feedforward"]):
            h = _numpy(g.call_block(block, z, mask))
        out = _numpy(g.call_block(block, z, mask))
        return [("attention", h - _numpy(z), _numpy(z)), ("feedforward", out - h, h)]
    shortcut = z if block.shortcut is None else block.shortcut(z)
    return [("branch", _numpy(block.branch(z)), _numpy(shortcut))]


def _default_metric(g):
    output = _numpy(_chosen(g.model(g.x, training=False)))
    y = np.asarray(g.targets())
    if g.head_kind in PER_TOKEN_HEADS:  # accuracy over the real positions only
        _, mask = g.points()
        return float(np.mean((np.argmax(output, axis=-1) == y)[_numpy(mask).astype(bool)]))
    if g.head_kind in ("logits", "probabilities", "several outputs"):
        return float(np.mean(np.argmax(output, axis=-1) == y))
    if g.head_kind in ("one sigmoid", "several sigmoids"):
        return float(np.mean((output.reshape(len(y), -1) > 0.5) == y.reshape(len(y), -1)))
    return _model_loss(g)


# --------------------------------------------------------------------------
# One check per instrument
# --------------------------------------------------------------------------


def check_gradient_norms(g):
    result = d.gradient_norms(g.model, g.x, g.y, training=False, output_index=g.output_index)
    _close(result["loss"], _model_loss(g), g, "loss", exact=True)
    points, mask = g.points()
    for depth, point in enumerate(points):
        hand = np.linalg.norm(_grad(_loss_from(g, depth, mask), point))
        _close(result["stream_grad_norms"][depth], hand, g, f"||dLoss/dx_{depth}||")


def check_jacobian_norm(g):
    result = d.jacobian_norm(g.model, g.x[:1], num_iterations=500, tolerance=1e-8, per_block=False)
    z, mask = g.stem(g.x[:1])
    size = int(np.prod(_run_blocks(g, z, mask).shape[1:]))
    # The exact Jacobian of example 0 in one gradient: `size` copies of it, copy i read at output i
    # (inference mode: the copies do not interact), so row i of the gradient is J^T e_i.
    copies = np.repeat(_numpy(z), size, axis=0)
    copies_mask = None if mask is None else ops.repeat(mask, size, axis=0)
    eye = ops.convert_to_tensor(np.eye(size, dtype="float32"))

    def diagonal(u):
        outputs = ops.reshape(ops.cast(_run_blocks(g, u, copies_mask), "float32"), (size, size))
        return ops.sum(outputs * eye)

    jacobian = _grad(diagonal, copies).reshape(size, -1)
    exact = np.linalg.svd(jacobian, compute_uv=False)[0]
    _close(result["total"], [exact], g, "||dx_L/dx_0|| (SVD of the Jacobian)")


def _run_blocks(g, z, mask):
    for block in g.blocks:
        z = g.call_block(block, z, mask)
    return z


def check_activation_norms(g):
    """RMS per example over its real positions (all of them without a mask), all channels."""
    result = d.activation_norms(g.model, g.x, training=False)  # the recipe runs in inference mode
    points, mask = g.points()
    hand = []
    for point in points:
        real = np.ones(tuple(point.shape[:2])) if mask is None else _numpy(mask)
        entries = np.square(_numpy(point)).reshape(len(g.x), real.shape[1], -1)
        hand.append(np.sqrt(np.sum(entries * real[:, :, None], axis=(1, 2))
                            / (np.sum(real, axis=1) * entries.shape[-1])))
    _close(result["rms"], np.stack(hand), g, "stream RMS", exact=True)


def _lesioned_loss(g, positions, step=None):
    variables = [v for position in positions
                 for name, weights in g.step_weights(g.blocks[position]).items()
                 if step is None or name == step for v in weights]
    with g.zeroed(variables):
        return _model_loss(g)


def check_lesion(g):
    result = d.lesion(g.model, g.x, g.y, metric="loss", output_index=g.output_index)
    _close(result["intact"], _model_loss(g), g, "intact loss", exact=True)
    for position, value in enumerate(result["lesioned"]):
        _close(value, _lesioned_loss(g, [position]), g, f"loss without block {position + 1}", exact=True)
    default = d.lesion(g.model, g.x, g.y, output_index=g.output_index)
    _close(default["intact"], _default_metric(g), g, f"default metric ({default['metric']})", exact=True)


def check_delete_blocks(g):
    result = d.delete_blocks(g.model, g.x, g.y, metric="loss", draws=2, output_index=g.output_index)
    names = [block.name for block in g.blocks]
    for removed_sets, values in zip(result["removed"], result["values"]):
        for removed, value in zip(removed_sets, values):
            positions = [names.index(name.split("/")[-1]) for name in removed]
            _close(value, _lesioned_loss(g, positions), g, f"loss without {removed}", exact=True)


def check_swap_blocks(g):
    result = d.swap_blocks(g.model, g.x, g.y, metric="loss", output_index=g.output_index)
    names = [block.name for block in g.blocks]
    points, mask = g.points()
    same_shape = [p for p in range(len(names) - 1) if len({tuple(points[i].shape) for i in (p, p + 1, p + 2)}) == 1]
    assert [[names[p], names[p + 1]] for p in same_shape] == [[a.split("/")[-1], b.split("/")[-1]]
                                                              for a, b in result["pairs"]]
    for position, value in zip(same_shape, result["swapped"]):
        order = list(range(len(names)))
        order[position], order[position + 1] = order[position + 1], order[position]
        hand = g.keras_loss(g.from_point(0, points[0], mask, order=order))
        _close(value, hand, g, f"loss with blocks {position + 1} and {position + 2} swapped", exact=True)


def check_lesion_sublayers(g):
    result = d.lesion_sublayers(g.model, g.x, g.y, metric="loss", output_index=g.output_index)
    for step in result["steps"]:
        for position, value in enumerate(result[step]):
            _close(value, _lesioned_loss(g, [position], step), g, f"loss without {step} of block {position + 1}",
                   exact=True)


def _vjp(function, at, cotangent):
    cotangent = ops.convert_to_tensor(cotangent.astype("float32"))
    return _grad(lambda z: ops.sum(ops.cast(function(z), "float32") * cotangent), at)


def check_path_gradients(g):
    result = d.path_gradients(g.model, g.x, g.y, samples=2, output_index=g.output_index)
    points, mask = g.points()
    upstream = _grad(_loss_from(g, len(g.blocks), mask), points[-1])
    _close(result["full_gradient"], np.linalg.norm(_grad(_loss_from(g, 0, mask), points[0])), g,
           "the full gradient at x_0")
    # The two paths of one member each: every shortcut (length 0) and every branch (length n).
    for length, through_branch in ((0, False), (len(result["names"]), True)):
        gradient_now = upstream
        for position in reversed(range(len(g.blocks))):
            block, z = g.blocks[position], points[position]
            if isinstance(block, rk.TransformerBlock):
                weights = g.step_weights(block)
                with g.zeroed(weights["feedforward"]):
                    h = g.call_block(block, z, mask)
                for step, at in (("feedforward", h), ("attention", z)):
                    if not through_branch:
                        continue  # the identity shortcut passes the gradient on unchanged
                    other = "attention" if step == "feedforward" else "feedforward"
                    with g.zeroed(weights[other]):
                        gradient_now = _vjp(lambda u, b=block: ops.cast(g.call_block(b, u, mask), "float32") - u, _numpy(at),
                                            gradient_now)
                continue
            branch, shortcut = block.branch(z), (z if block.shortcut is None else block.shortcut(z))
            if block.post is not None:
                post = block.post if callable(block.post) else None
                gradient_now = _vjp(post, _numpy(ops.cast(shortcut, "float32") + ops.cast(branch, "float32")),
                                    gradient_now)
            if through_branch:
                gradient_now = _vjp(block.branch, z, gradient_now)
            elif block.shortcut is not None:
                gradient_now = _vjp(block.shortcut, z, gradient_now)
        _close(result["gradient_per_path"][length], np.linalg.norm(gradient_now), g,
               f"the gradient of the path of length {length}")


def _hand_contributions(g):
    points, mask = g.points()
    ratios = {}
    updates = []
    for position, block in enumerate(g.blocks):
        for name, update, base in _steps_by_hand(g, block, points[position], mask):
            sizes, bases = _norms(_masked(update, mask)), _norms(_masked(base, mask))
            with np.errstate(divide="ignore", invalid="ignore"):  # a stream that is exactly 0 (a ReLU killed it)
                ratios.setdefault(name, []).append(np.where(bases > 0, sizes / bases,
                                                            np.where(sizes > 0, np.inf, np.nan)))
            updates.append(update)
    return ratios, updates, points, mask


def _close_ratios(got, want, g, what):
    """Ratios: equal where the stream is not 0; where it is, NaN for a branch that writes 0 too (0 / 0), else inf."""
    got, want = np.asarray(got, dtype="float64"), np.asarray(want, dtype="float64")
    finite = np.isfinite(want)
    _close(got[finite], want[finite], g, what)
    assert np.all(np.isnan(got[np.isnan(want)])) and np.all(got[np.isinf(want)] > 1e20), (what, got, want)


def check_stream_contributions(g):
    result = d.stream_contributions(g.model, g.x)
    ratios, _, _, _ = _hand_contributions(g)
    assert result["steps"] == list(ratios)
    for name, rows in ratios.items():
        _close_ratios(result[name], np.stack(rows), g, f"{name} / stream")


def check_stream_decomposition(g):
    result = d.stream_decomposition(g.model, g.x)
    _, updates, points, mask = _hand_contributions(g)
    rms = [float(np.sqrt(np.mean(np.square(_masked(update, mask))))) for update in updates]
    _close(result["update_rms"], rms, g, "update RMS")
    total = _numpy(points[0]) + sum(updates)
    error = float(np.max(np.abs(_masked(_numpy(points[-1]), mask) - _masked(total, mask))))
    scale = float(np.max(np.abs(_numpy(points[-1]))))
    assert abs(result["max_error"] - error) <= _tolerance(g) * scale + 1e-5, (result["max_error"], error)


def check_logit_lens(g):
    result = d.logit_lens(g.model, g.x, g.y, output_index=g.output_index)
    points, mask = g.points()
    hand = [g.keras_loss(g.head(point, mask)) for point in points]
    _close(result["loss"], hand, g, "loss read at each depth")


def _span(points):
    shapes = [tuple(point.shape) for point in points]
    end = max(p for p in range(1, len(shapes)) if shapes[p] == shapes[p - 1])
    start = end
    while start > 0 and shapes[start - 1] == shapes[end]:
        start -= 1
    return start, end


def _hand_rank(g, tolerance=1e-3):
    points, mask = g.points()
    start, end = _span(points)
    final, first = _numpy(points[end]), _numpy(points[start])
    if mask is not None:
        keep = _numpy(mask).astype(bool)
        final, first = final[keep], first[keep]
    final, first = final.reshape(-1, final.shape[-1]), first.reshape(-1, first.shape[-1])
    singular = np.linalg.svd(final - first, compute_uv=False)
    return singular, int(np.sum(singular > tolerance * np.linalg.norm(final, 2)))


def check_stream_delta_rank(g):
    result = d.stream_delta_rank(g.model, g.x)
    singular, rank = _hand_rank(g)
    _close(result["singular_values"], singular, g, "singular values of x_e - x_s", exact=True)
    assert result["rank"] == rank


def check_training_dynamics(g):
    callback = d.TrainingDynamics(g.x, g.y, output_index=g.output_index)
    callback.set_model(g.model)
    callback.on_epoch_begin(0)
    rows = callback.rows
    points, mask = g.points()
    gains = [np.linalg.norm(_grad(_loss_from(g, depth, mask), points[depth])) for depth in (0, len(g.blocks))]
    _close(rows[0]["gradient_gain"], gains[0] / gains[1], g, "gradient gain")
    ratios, _, _, _ = _hand_contributions(g)
    per_block = np.mean(np.stack([np.stack(rows_) for rows_ in ratios.values()]), axis=(0, 2)) if len(
        {len(r) for r in ratios.values()}) == 1 else None
    if per_block is not None and np.all(np.isfinite(per_block)):
        _close([row["branch_ratio"] for row in rows], per_block, g, "branch ratio per block")
    assert rows[0]["delta_rank"] == _hand_rank(g)[1]


def check_loss_landscape(g):
    result = d.loss_landscape(g.model, g.x, g.y, steps=3, span=0.5, output_index=g.output_index)
    _close(result["center_loss"], _model_loss(g), g, "loss at the centre", exact=True)
    _close(result["grid"][1, 1], result["center_loss"], g, "grid centre", exact=True)


def check_calibrate_batchnorm(g):
    """After it, inference mode computes on the batch what training mode computes; only the statistics change."""
    norms = [layer for layer in g.model._flatten_layers() if isinstance(layer, keras.layers.BatchNormalization)]
    statistics = [variable for layer in norms for variable in (layer.moving_mean, layer.moving_variance)]
    saved = [keras.ops.convert_to_numpy(variable) for variable in statistics]
    others = [v for v in g.model.variables if all(v is not s for s in statistics)]
    before = [np.array(keras.ops.convert_to_numpy(v), copy=True) for v in others]
    try:
        assert d.calibrate_batchnorm(g.model, g.x) == len(norms)
        after = [keras.ops.convert_to_numpy(v) for v in others]
        assert all(np.array_equal(a, b) for a, b in zip(before, after)), "a variable other than the statistics changed"
        if norms:
            inference = _numpy(_chosen(g.model(g.x, training=False)))
            training = _numpy(_chosen(g.model(g.x, training=True)))
            _close(inference, training, g, "inference after calibration against training mode")
    finally:
        for variable, value in zip(statistics, saved):
            variable.assign(value)


CHECKS = {
    "gradient_norms": check_gradient_norms,
    "jacobian_norm": check_jacobian_norm,
    "activation_norms": check_activation_norms,
    "lesion": check_lesion,
    "delete_blocks": check_delete_blocks,
    "swap_blocks": check_swap_blocks,
    "lesion_sublayers": check_lesion_sublayers,
    "path_gradients": check_path_gradients,
    "stream_contributions": check_stream_contributions,
    "stream_decomposition": check_stream_decomposition,
    "logit_lens": check_logit_lens,
    "TrainingDynamics": check_training_dynamics,
    "stream_delta_rank": check_stream_delta_rank,
    "loss_landscape": check_loss_landscape,
    "calibrate_batchnorm": check_calibrate_batchnorm,
}


def refusal(g, instrument):
    """The message (a regular expression) with which `instrument` must refuse shape `g`, or None."""
    if g.structure in CHANGES:
        if instrument == "logit_lens":
            return "must keep the stream's shape"
        if instrument == "stream_decomposition":
            return "needs blocks that keep the stream's shape"
    if g.data == "sequences" and g.structure == "last block changes shape":  # Transformer blocks, then a Residual
        if instrument == "lesion_sublayers":
            return "compares one kind of block"
        if instrument == "stream_contributions":
            return "have different steps"
    return None


def _variables(model):
    return [np.array(ops.convert_to_numpy(v), copy=True) for v in model.variables]


@pytest.mark.slow
@pytest.mark.parametrize("spec", SHAPES, ids=["/".join(map(str, spec)) for spec in SHAPES])
def test_every_instrument_on_a_generated_shape(spec):
    g = generate(*spec)
    before = _variables(g.model)
    problems = _problems(g)
    assert all(np.array_equal(a, b) for a, b in zip(before, _variables(g.model))), "the model changed"
    assert not problems, problems


def _problems(g):
    """{instrument: what went wrong} for every instrument on shape `g` (empty when all are right)."""
    problems = {}
    for instrument, check in CHECKS.items():
        expected = refusal(g, instrument)
        try:
            check(g)
        except (ValueError, TypeError) as error:
            if expected is None or not re.search(expected, str(error)):
                problems[instrument] = f"refused: {error}"
        except AssertionError as error:
            problems[instrument] = f"wrong number: {error}"
        else:
            if expected is not None:
                problems[instrument] = f"expected to refuse with {expected!r}"
    return problems


# --------------------------------------------------------------------------
# Per-token outputs with padding masks (tests/model_shapes.py pools every sequence)
# --------------------------------------------------------------------------


class _MaskedMean:
    """Keras' loss averaged over the real positions, by hand: its sum over them (reduction "sum",
    the mask as sample weights) divided by their number."""

    def __init__(self, loss, mask):
        self.summed = loss(reduction="sum")
        self.mask = np.asarray(mask, dtype="float32")

    def __call__(self, y_true, y_pred):
        return self.summed(y_true, y_pred, sample_weight=self.mask) / float(self.mask.sum())


def _per_token_blocks(structure):
    """Three blocks on an 8-wide stream: Transformer blocks, or Residual(Dense) where the width becomes 12."""
    def transformer(name):
        return rk.TransformerBlock(num_heads=2, intermediate_dim=16, causal=False, name=name)

    def widening(name):
        return rk.Residual(keras.layers.Dense(12), shortcut=keras.layers.Dense(12, use_bias=False), name=name)

    if structure == "first block changes shape":
        return [widening("block1")] + [rk.Residual(keras.layers.Dense(12), name=f"block{n}") for n in (2, 3)]
    if structure == "last block changes shape":
        return [transformer("block1"), transformer("block2"), widening("block3")]
    return [transformer(f"block{n}") for n in (1, 2, 3)]


def generate_per_token(head_kind, structure, precision="float32", padding="end", seed=0):
    """A token model with `mask_zero=True` and a per-token head: its output carries the padding mask."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16" if precision == "mixed" else "float32")
    try:
        ids = rng.integers(1, SEQUENCE_VOCAB, size=(8, SEQUENCE_LENGTH)).astype("int32")
        for row, length in enumerate([6, 4, 2, 5, 3, 6, 1, 4]):
            if padding == "start":
                ids[row, : SEQUENCE_LENGTH - length] = 0
            else:
                ids[row, length:] = 0
        inputs = keras.Input((SEQUENCE_LENGTH,), dtype="int32")
        stem_layer = rk.TokenAndPositionEmbedding(vocab_size=SEQUENCE_VOCAB, sequence_length=SEQUENCE_LENGTH,
                                                  embed_dim=8, mask_zero=True, name="stem")
        blocks = _per_token_blocks(structure)
        head_layer = keras.layers.Dense(SEQUENCE_VOCAB, name="out",
                                        activation="softmax" if head_kind == "per-token probabilities" else None)
        z = stem_layer(inputs)
        if structure == "nested stages":
            stage_inputs = keras.Input(tuple(z.shape[1:]))
            second_stage = keras.Model(stage_inputs, blocks[2](blocks[1](stage_inputs)), name="stage2")
            z = second_stage(keras.Sequential(blocks[:1], name="stage1")(z))
        else:
            for block in blocks:
                z = block(z)
        model = keras.Model(inputs, head_layer(z), name=f"per_token_{structure}".replace(" ", "_"))
    finally:
        keras.config.set_dtype_policy(policy)

    def stem(batch):
        batch = keras.ops.convert_to_tensor(batch)
        return stem_layer(batch), stem_layer.compute_mask(batch)

    def head(x_last, mask):
        return head_layer(x_last)

    targets = rng.integers(0, SEQUENCE_VOCAB, size=ids.shape)
    loss = _MaskedMean(functools.partial(keras.losses.SparseCategoricalCrossentropy,
                                         from_logits=head_kind == "per-token logits"), ids != 0)
    name = f"sequences/{head_kind}/{structure}/{precision}/padded at the {padding}"
    return Generated(name, "sequences", head_kind, structure, precision, True, model, ids, targets,
                     stem, blocks, head, loss)


PER_TOKEN_SHAPES = [  # (head, structure, precision, padding): every structure, both heads, both ends
    ("per-token logits", "flat", "float32", "end"),
    ("per-token probabilities", "nested stages", "float32", "start"),
    ("per-token logits", "first block changes shape", "mixed", "end"),
    ("per-token probabilities", "last block changes shape", "float32", "end"),
    ("per-token logits", "last block changes shape", "float32", "start"),
    ("per-token probabilities", "flat", "mixed", "start"),
]


@pytest.mark.slow
@pytest.mark.parametrize("spec", PER_TOKEN_SHAPES, ids=["/".join(spec) for spec in PER_TOKEN_SHAPES])
def test_every_instrument_on_a_masked_per_token_shape(spec):
    """The losses, accuracy and norms over the real positions: the mean Keras' losses take of a masked output."""
    g = generate_per_token(*spec)
    before = _variables(g.model)
    problems = _problems(g)
    assert all(np.array_equal(a, b) for a, b in zip(before, _variables(g.model))), "the model changed"
    assert not problems, problems


def test_the_generator_covers_every_axis():
    """At least 30 shapes, every data x head, every structure, both precisions, masks."""
    assert len(SHAPES) >= 30 and len(set(SHAPES)) == len(SHAPES)
    assert {(data, head) for data, head, *_ in SHAPES} == {(a, b) for a in
                                                           ("images", "sequences", "tabular") for b in
                                                           ("logits", "probabilities", "one sigmoid",
                                                            "several sigmoids", "several outputs", "regression")}
    assert {spec[2] for spec in SHAPES} == {"flat", "nested stages", *CHANGES}
    assert {spec[3] for spec in SHAPES} == {"float32", "mixed"} and any(spec[4] for spec in SHAPES)
