"""Padded positions are left out of the instruments' losses, accuracies and norms, as Keras leaves them out.

Keras masks a per-position output whose layers carry a mask
(`Embedding(mask_zero=True)`, `Masking`): its losses average over the real
positions only, `keras.losses.SparseCategoricalCrossentropy()(y, model(x))`
as `fit` and `evaluate` do. The instruments must give the same numbers on an
uncompiled model: the default loss equals Keras' own loss on the model's
output, the default accuracy counts the real positions only (computed here
by hand from the data), and the stream's RMS (`activation_norms`) is over
the positions the blocks treat as real (here again from the data).

Six model shapes, each a two-block stack: a GPT padded at the end and one
padded at the start, a Sequential of `Residual` blocks after
`keras.layers.Embedding`, `Masking` on float inputs before Dense branches, a
subclassed model with a softmax head, and an explicit `padding_mask=` input
(no Keras mask: Keras' loss counts every position there, and so do the
instruments'); and a compiled model, scored as `model.evaluate` scores it.
"""

import dataclasses
from typing import Callable

import numpy as np
import pytest

import keras
import residual_keras as rk
from keras import layers
from autodiff import gradient
from residual_keras import diagnostics as d

BATCH, LENGTH, VOCAB, WIDTH, FEATURES = 4, 6, 11, 8, 3
REAL_LENGTHS = (6, 4, 2, 5)


@dataclasses.dataclass
class MaskedShape:
    model: keras.Model
    x: object
    y: np.ndarray
    from_logits: bool
    real: np.ndarray  # (B, T) bool: the positions the blocks treat as real
    points: Callable  # x -> [x_0, x_1, x_2], by calling the model's layers as Keras does


def _numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")), dtype="float64")


def _token_ids(padding_at_start=False, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, size=(BATCH, LENGTH)).astype("int32")
    for row, length in enumerate(REAL_LENGTHS):
        if padding_at_start:
            ids[row, : LENGTH - length] = 0
        else:
            ids[row, length:] = 0
    return ids


def _targets(classes=VOCAB, seed=1):
    return np.random.default_rng(seed).integers(0, classes, size=(BATCH, LENGTH))


def _gpt(padding_at_start):
    tokens = keras.Input((LENGTH,), dtype="int32", name="tokens")
    x_0 = rk.TokenAndPositionEmbedding(vocab_size=VOCAB, sequence_length=LENGTH, embed_dim=WIDTH,
                                       mask_zero=True, name="embedding")(tokens)
    x_1 = rk.TransformerBlock(num_heads=2, intermediate_dim=16, causal=not padding_at_start, name="block1")(x_0)
    x_2 = rk.TransformerBlock(num_heads=2, intermediate_dim=16, causal=not padding_at_start, name="block2")(x_1)
    logits = layers.Dense(VOCAB, name="lm_head")(layers.LayerNormalization(name="final_norm")(x_2))
    model = keras.Model(tokens, logits, name="gpt")
    probe = keras.Model(tokens, [x_0, x_1, x_2])
    ids = _token_ids(padding_at_start)
    return MaskedShape(model, ids, _targets(), True, ids != 0, probe)


def gpt_padded_at_end():
    return _gpt(padding_at_start=False)


def gpt_padded_at_start():
    return _gpt(padding_at_start=True)


def sequential_after_embedding():
    """keras.layers.Embedding(mask_zero=True), two Residual(Dense) blocks, a per-token head."""
    # N(0, 1) embeddings (Keras' default is U(-0.05, 0.05)): logits far enough from uniform that padding counts.
    embedding = layers.Embedding(VOCAB, WIDTH, mask_zero=True, embeddings_initializer=keras.initializers.RandomNormal(
        stddev=1.0), name="embedding")
    blocks = [rk.Residual(layers.Dense(WIDTH, activation="tanh"), name=f"block{n}") for n in (1, 2)]
    model = keras.Sequential([keras.Input((LENGTH,), dtype="int32"), embedding, *blocks,
                              layers.Dense(VOCAB, name="head")], name="sequential")
    tokens = keras.Input((LENGTH,), dtype="int32")
    x_0 = embedding(tokens)
    probe = keras.Model(tokens, [x_0, blocks[0](x_0), blocks[1](blocks[0](x_0))])
    ids = _token_ids(seed=2)
    return MaskedShape(model, ids, _targets(), True, ids != 0, probe)


def masking_on_float_inputs():
    """keras.layers.Masking on float features (all-zero rows are padding), Dense branches, 5 classes per position."""
    inputs = keras.Input((LENGTH, FEATURES), name="features")
    masked = layers.Masking(0.0, name="masking")(inputs)
    x_0 = layers.Dense(WIDTH, name="stem")(masked)
    x_1 = rk.Residual(layers.Dense(WIDTH, activation="relu"), name="block1")(x_0)
    x_2 = rk.Residual(layers.Dense(WIDTH, activation="tanh"), post="relu", name="block2")(x_1)
    outputs = layers.Dense(5, name="head")(x_2)
    model = keras.Model(inputs, outputs, name="masking")
    features = np.random.default_rng(3).normal(size=(BATCH, LENGTH, FEATURES)).astype("float32")
    for row, length in enumerate(REAL_LENGTHS):
        features[row, length:] = 0.0
    return MaskedShape(model, features, _targets(classes=5), True, np.any(features != 0, axis=-1),
                       keras.Model(inputs, [x_0, x_1, x_2]))


def explicit_padding_mask():
    """An explicit padding_mask= input: the blocks leave padding out, but it is no Keras mask, so Keras'
    loss (and fit's) counts every position of the output; the instruments' loss does too."""
    tokens = keras.Input((LENGTH,), dtype="int32", name="tokens")
    padding = keras.Input((LENGTH,), dtype="int32", name="padding_mask")
    x_0 = rk.TokenAndPositionEmbedding(vocab_size=VOCAB, sequence_length=LENGTH, embed_dim=WIDTH,
                                       name="embedding")(tokens)
    x_1 = rk.TransformerBlock(num_heads=2, intermediate_dim=16, name="block1")(x_0, padding_mask=padding)
    x_2 = rk.TransformerBlock(num_heads=2, intermediate_dim=16, name="block2")(x_1, padding_mask=padding)
    logits = layers.Dense(VOCAB, name="lm_head")(x_2)
    model = keras.Model([tokens, padding], logits, name="explicit")
    ids = _token_ids(seed=4)
    real = ids != 0
    return MaskedShape(model, [ids, real.astype("int32")], _targets(), True, real,
                       keras.Model([tokens, padding], [x_0, x_1, x_2]))


class SubclassedLanguageModel(keras.Model):
    """Embedding(mask_zero=True), two Transformer blocks and a softmax head, in `call`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embedding = layers.Embedding(VOCAB, WIDTH, mask_zero=True, name="embedding")
        self.block1 = rk.TransformerBlock(num_heads=2, intermediate_dim=16, name="block1")
        self.block2 = rk.TransformerBlock(num_heads=2, intermediate_dim=16, name="block2")
        self.head = layers.Dense(VOCAB, activation="softmax", name="probabilities")

    def stream(self, tokens):
        x_0 = self.embedding(tokens)  # (B, T, C), with a Keras mask (B, T)
        x_1 = self.block1(x_0)
        return [x_0, x_1, self.block2(x_1)]

    def call(self, tokens):
        return self.head(self.stream(tokens)[-1])


def subclassed_probabilities():
    model = SubclassedLanguageModel(name="subclassed")
    ids = _token_ids(seed=5)
    model(ids)
    return MaskedShape(model, ids, _targets(), False, ids != 0, model.stream)


KERAS_MASKED = {  # the output carries a Keras mask
    "GPT padded at the end": gpt_padded_at_end,
    "GPT padded at the start": gpt_padded_at_start,
    "Sequential after keras Embedding": sequential_after_embedding,
    "Masking on float inputs": masking_on_float_inputs,
    "subclassed with a softmax head": subclassed_probabilities,
}
SHAPES = {**KERAS_MASKED, "explicit padding_mask input": explicit_padding_mask}


@pytest.fixture(params=list(KERAS_MASKED), ids=list(KERAS_MASKED))
def masked_output(request):
    return KERAS_MASKED[request.param]()


@pytest.fixture(params=list(SHAPES), ids=list(SHAPES))
def shape(request):
    return SHAPES[request.param]()


def _keras_loss(shape):
    """Keras' own loss on the model's output: the mean over the positions its mask keeps."""
    output = shape.model(shape.x, training=False)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=shape.from_logits)
    masked, every_position = loss(shape.y, output), loss(shape.y, _numpy(output))  # _numpy: no mask
    return float(_numpy(masked)), float(_numpy(every_position))


def _losses_measured(shape):
    """{instrument: its default loss on the whole batch}."""
    return {
        "gradient_norms": d.gradient_norms(shape.model, shape.x, shape.y, training=False)["loss"],
        "lesion(metric='loss')": d.lesion(shape.model, shape.x, shape.y, metric="loss")["intact"],
        "lesion(metric='crossentropy')": d.lesion(shape.model, shape.x, shape.y, metric="crossentropy")["intact"],
        "logit_lens (last depth)": d.logit_lens(shape.model, shape.x, shape.y)["loss"][-1],
        "loss_landscape (centre)": d.loss_landscape(shape.model, shape.x, shape.y, steps=3, span=0.1)[
            "center_loss"],
    }


def _partly_right(shape):
    """`shape` with targets the model gets right at every padded position and at every other real one."""
    output = _numpy(shape.model(shape.x, training=False))
    predicted = np.argmax(output, axis=-1)
    wrong = shape.real & (np.arange(LENGTH) % 2 == 1)
    y = np.where(wrong, (predicted + 1) % output.shape[-1], predicted)
    return dataclasses.replace(shape, y=y), predicted


def _accuracy_by_hand(shape, predicted, kept):
    return float(np.mean((predicted == shape.y)[kept]))


def _accuracies_measured(shape):
    """{how the metric was asked for: the accuracy `lesion` reports for the intact model}."""
    return {
        "default": d.lesion(shape.model, shape.x, shape.y),
        "accuracy": d.lesion(shape.model, shape.x, shape.y, metric="accuracy"),
        "Keras metric": d.lesion(shape.model, shape.x, shape.y, metric=keras.metrics.SparseCategoricalAccuracy()),
    }


def test_the_loss_is_keras_own_loss_on_the_masked_output(masked_output):
    shape = masked_output
    keras_loss, every_position = _keras_loss(shape)
    assert abs(keras_loss - every_position) > 1e-3  # padding would change the number
    for instrument, value in _losses_measured(shape).items():
        assert value == pytest.approx(keras_loss, rel=1e-5), instrument


def test_the_accuracy_counts_the_real_positions(masked_output):
    shape, predicted = _partly_right(masked_output)
    by_hand = _accuracy_by_hand(shape, predicted, shape.real)
    assert abs(by_hand - _accuracy_by_hand(shape, predicted, np.ones_like(shape.real))) > 0.1
    measured = _accuracies_measured(shape)
    assert measured["default"]["metric"] == "accuracy"
    for asked, result in measured.items():
        assert result["intact"] == pytest.approx(by_hand, rel=1e-6), asked


def test_an_explicit_padding_mask_is_no_keras_mask():
    """A guard: `padding_mask=` is not a Keras mask, so Keras' loss counts every position of the output;
    the instruments' loss and accuracy do too (their norms leave the padding out, as the blocks do)."""
    shape = explicit_padding_mask()
    keras_loss, every_position = _keras_loss(shape)
    assert keras_loss == pytest.approx(every_position, rel=1e-6)
    for instrument, value in _losses_measured(shape).items():
        assert value == pytest.approx(keras_loss, rel=1e-5), instrument
    shape, predicted = _partly_right(shape)
    by_hand = _accuracy_by_hand(shape, predicted, np.ones_like(shape.real))
    for asked, result in _accuracies_measured(shape).items():
        assert result["intact"] == pytest.approx(by_hand, rel=1e-6), asked


def test_activation_norms_are_over_the_real_positions(shape):
    points = [_numpy(point) for point in shape.points(shape.x)]
    kept = shape.real[:, :, None]
    by_hand = np.stack([np.sqrt(np.sum(np.square(point * kept), axis=(1, 2))
                                / (kept.sum(axis=(1, 2)) * point.shape[-1])) for point in points])
    every_position = np.stack([np.sqrt(np.mean(np.square(point), axis=(1, 2))) for point in points])
    assert np.max(np.abs(by_hand - every_position)) > 1e-3  # padding would change the number
    result = d.activation_norms(shape.model, shape.x, training=False)
    np.testing.assert_allclose(result["rms"], by_hand, rtol=1e-5)


def test_the_gradient_at_the_output_is_that_of_the_masked_mean():
    """||dLoss/dx_L|| is the gradient of the mean over the real positions (no gradient reaches the padding)."""
    shape = gpt_padded_at_end()
    x_last = shape.points(shape.x)[-1]
    head = [shape.model.get_layer("final_norm"), shape.model.get_layer("lm_head")]
    weights = shape.real.astype("float32")
    summed = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    def masked_mean(z):
        return summed(shape.y, head[1](head[0](z)), sample_weight=weights) / float(weights.sum())

    by_hand = gradient(masked_mean, _numpy(x_last))
    assert np.all(by_hand[~shape.real] == 0)
    flow = d.gradient_norms(shape.model, shape.x, shape.y, training=False)
    assert flow["stream_grad_norms"][-1] == pytest.approx(np.linalg.norm(by_hand), rel=1e-4)


@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", "loss object"])
def test_a_compiled_model_is_scored_as_evaluate_scores_it(loss):
    """With model.compile, the instruments' loss and metric are `evaluate`'s, masks and all."""
    shape = subclassed_probabilities()
    compiled_loss = keras.losses.SparseCategoricalCrossentropy() if loss == "loss object" else loss
    shape.model.compile(loss=compiled_loss, metrics=["accuracy"])
    evaluated = shape.model.evaluate(shape.x, shape.y, batch_size=BATCH, verbose=0, return_dict=True)
    assert d.gradient_norms(shape.model, shape.x, shape.y, training=False)["loss"] == pytest.approx(
        evaluated["loss"], rel=1e-5)
    assert d.lesion(shape.model, shape.x, shape.y, metric="loss")["intact"] == pytest.approx(
        evaluated["loss"], rel=1e-5)
    assert d.logit_lens(shape.model, shape.x, shape.y)["loss"][-1] == pytest.approx(evaluated["loss"], rel=1e-5)
    default = d.lesion(shape.model, shape.x, shape.y)
    assert default["intact"] == pytest.approx(evaluated["accuracy"], rel=1e-5)


def _stream_jacobians(function, x_0):
    """The per-example Jacobians (B, T*C, T*C) of a position-stacked map `function`, one gradient per output entry."""
    x_0 = _numpy(x_0).astype("float32")
    batch, entries = x_0.shape[0], int(np.prod(x_0.shape[1:]))
    rows = []
    for k in range(entries):
        def entry_k(z, k=k):
            flat = keras.ops.reshape(function(z), (batch, entries))
            return keras.ops.sum(flat[:, k])

        rows.append(gradient(entry_k, x_0).reshape(batch, entries))
    return np.stack(rows, axis=1)  # [b, out, in]


def _largest_singular_values(jacobians, keep=None):
    if keep is not None:
        jacobians = [j[np.ix_(k, k)] for j, k in zip(jacobians, keep)]
    return np.array([np.linalg.norm(j, ord=2) for j in jacobians])


def test_jacobian_norm_is_over_the_real_positions():
    """||d x_L / d x_0|| restricted to the real positions: padding is neither perturbed nor measured.

    Causal blocks padded at the end: the padded outputs read the real inputs, so
    the whole Jacobian's norm is larger than the real positions' one.
    """
    shape = gpt_padded_at_end()
    blocks = [shape.model.get_layer(name) for name in ("block1", "block2")]
    mask = shape.real

    def stream(z):
        for block in blocks:
            z = block(z, training=False, mask=mask)
        return z

    x_0 = shape.points(shape.x)[0]
    jacobians = _stream_jacobians(stream, x_0)
    keep = np.repeat(shape.real, WIDTH, axis=1)  # (B, T*C), positions major as reshape lays them out
    real, whole = _largest_singular_values(jacobians, keep), _largest_singular_values(jacobians)
    assert np.max(np.abs(real - whole) / whole) > 1e-2  # padding would change the number
    measured = d.jacobian_norm(shape.model, shape.x, num_iterations=300, tolerance=1e-7, per_branch=True)
    assert measured["converged"]
    np.testing.assert_allclose(measured["total"], real, rtol=1e-3)
    first_block = _stream_jacobians(lambda z: blocks[0](z, training=False, mask=mask), x_0)
    np.testing.assert_allclose(measured["per_block"][0], _largest_singular_values(first_block, keep), rtol=1e-3)
