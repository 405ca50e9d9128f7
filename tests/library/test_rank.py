"""stream_delta_rank and TrainingDynamics' rank columns: the rank of x_L - x_0 (self-test (c))."""

import numpy as np
import pytest

import keras
import residual_keras as rk
from keras import layers
from residual_keras import Residual, cifar_resnet, transformer_lm
from residual_keras.diagnostics import TrainingDynamics, stream_delta_rank
from residual_keras.diagnostics.rank import effective_rank

TOKENS = np.random.default_rng(0).integers(0, 30, size=(8, 16))
IMAGES = np.random.default_rng(1).normal(size=(8, 16, 16, 3)).astype("float32")
VECTORS = np.random.default_rng(2).normal(size=(64, 12)).astype("float32")


def _dense_stack(rezero, blocks=3, width=12, bottleneck=None):
    """Dense residual blocks on a (B, width) stream; `bottleneck` units make each branch of that rank."""
    inputs = keras.Input((width,))
    x = inputs
    for index in range(blocks):
        branch = keras.Sequential(
            ([layers.Dense(bottleneck, use_bias=False)] if bottleneck else [])
            + [layers.Dense(width, use_bias=False)], name=f"branch{index}")
        x = Residual(branch, rezero=rezero, name=f"block{index}")(x)
    return keras.Model(inputs, layers.Dense(3)(x))


IDENTITY_INITIALISED = {
    "rezero transformer": lambda: (transformer_lm(30, 16, 3, embed_dim=16, rezero=True), TOKENS),
    "fixup resnet": lambda: (cifar_resnet(14, block=rk.blocks.fixup(), width=4, input_shape=(16, 16, 3)), IMAGES),
    "zero-init preact resnet": lambda: (cifar_resnet(14, block=rk.blocks.zero_last_conv_preact(norm="none"), width=4,
                                                     input_shape=(16, 16, 3)), IMAGES),
    "Residual(rezero=True)": lambda: (_dense_stack(True), VECTORS),
}
NOT_IDENTITY_INITIALISED = {
    "pre-LN transformer": lambda: (transformer_lm(30, 16, 3, embed_dim=16), TOKENS),
    "post-LN transformer": lambda: (transformer_lm(30, 16, 3, embed_dim=16, norm_position="post"), TOKENS),
    "resnet": lambda: (cifar_resnet(14, width=4, input_shape=(16, 16, 3)), IMAGES),
    "Residual": lambda: (_dense_stack(False), VECTORS),
}


@pytest.mark.parametrize("name", list(IDENTITY_INITIALISED))
def test_an_rezeroialised_network_has_changed_nothing_rank_0(name):
    keras.utils.set_random_seed(0)
    model, x = IDENTITY_INITIALISED[name]()
    result = stream_delta_rank(model, x)
    assert result["rank"] == 0 and result["effective_rank"] == 0.0 and result["relative_size"] == 0.0
    assert np.all(result["singular_values"] == 0)


@pytest.mark.parametrize("name", list(NOT_IDENTITY_INITIALISED))
def test_a_network_that_is_not_rezeroialised_has_a_change_of_full_rank(name):
    """The check the test above makes fails here: x_L - x_0 is not 0 when the branches are not."""
    keras.utils.set_random_seed(0)
    model, x = NOT_IDENTITY_INITIALISED[name]()
    result = stream_delta_rank(model, x)
    assert result["rank"] > 0 and result["effective_rank"] > 1 and result["relative_size"] > 0.01
    assert result["rank"] <= result["width"]


def test_the_rank_is_the_branches_rank_computed_by_hand():
    """One block whose branch goes through 3 units: x_L - x_0 = f(x_0) has rank 3, its SVD by hand."""
    keras.utils.set_random_seed(0)
    model = _dense_stack(False, blocks=1, bottleneck=3)
    result = stream_delta_rank(model, VECTORS)
    branch = model.get_layer("block0").branch
    delta = keras.ops.convert_to_numpy(branch(VECTORS)).astype("float64")
    singular = np.linalg.svd(delta, compute_uv=False)
    np.testing.assert_allclose(result["singular_values"], singular, rtol=1e-4, atol=1e-6)
    # float32 rounding leaves singular values near 1e-7 of the largest: a float64 rank needs a tolerance
    assert result["rank"] == 3 == np.linalg.matrix_rank(delta, tol=1e-5 * singular[0])
    shares = singular[:3] / singular[:3].sum()
    assert result["effective_rank"] == pytest.approx(np.exp(-np.sum(shares * np.log(shares))), rel=1e-3)
    assert result["relative_size"] == pytest.approx(np.linalg.norm(delta) / np.linalg.norm(VECTORS), rel=1e-4)


def test_the_tolerance_counts_directions_at_the_streams_scale():
    """A change 1e-6 the stream's size counts as rank 0 at tolerance 1e-3, while the effective rank sees it."""
    keras.utils.set_random_seed(0)
    model = _dense_stack(True, blocks=1)
    model.get_layer("block0").rezero_alpha.assign(1e-6)
    result = stream_delta_rank(model, VECTORS)
    assert result["rank"] == 0 and result["effective_rank"] > 1
    assert stream_delta_rank(model, VECTORS, tolerance=1e-9)["rank"] == 12
    with pytest.raises(ValueError, match="tolerance"):
        stream_delta_rank(model, VECTORS, tolerance=0)


def test_a_stream_that_died_has_changed_completely_not_rank_0():
    """x_L = 0 (here x + f(x) with f = -x): the change is all of x_0, of its full rank, and its size is 1."""
    keras.utils.set_random_seed(0)
    model = _dense_stack(True, blocks=1)
    block = model.get_layer("block0")
    block.rezero_alpha.assign(1.0)
    block.branch.layers[0].kernel.assign(-np.eye(12, dtype="float32"))
    result = stream_delta_rank(model, VECTORS)
    assert result["rank"] == 12 and result["relative_size"] == pytest.approx(1.0)


def test_a_stream_that_changes_shape_is_measured_from_the_last_stage():
    keras.utils.set_random_seed(0)
    model = cifar_resnet(14, width=4, input_shape=(16, 16, 3))
    result = stream_delta_rank(model, IMAGES)
    assert result["from_point"] == 5  # 2 blocks a stage: the last stage's shape begins after its first block
    assert result["width"] == 16


def test_padded_positions_are_left_out():
    """With a padding mask, the singular values are those of x_L - x_0 over the real positions only."""
    keras.utils.set_random_seed(0)
    from residual_keras import TokenAndPositionEmbedding, TransformerBlock

    inputs = keras.Input((16,), dtype="int32")
    stream = TokenAndPositionEmbedding(vocab_size=30, sequence_length=16, embed_dim=8, mask_zero=True)(inputs)
    out = TransformerBlock(num_heads=2, intermediate_dim=16, name="block")(stream)
    model = keras.Model(inputs, layers.Dense(30)(out))
    tokens = TOKENS % 29 + 1
    tokens[:, 3:] = 0  # three real positions per example
    result = stream_delta_rank(model, tokens)
    x_0, x_L = (keras.ops.convert_to_numpy(t) for t in keras.Model(inputs, [stream, out])(tokens))
    real = tokens > 0
    by_hand = np.linalg.svd((x_L[real] - x_0[real]).astype("float64"), compute_uv=False)
    np.testing.assert_allclose(result["singular_values"], by_hand, rtol=1e-4, atol=1e-6)
    padded_too = np.linalg.svd((x_L - x_0).reshape(-1, 8).astype("float64"), compute_uv=False)
    assert not np.allclose(padded_too, by_hand, rtol=1e-2)  # the padded positions would have counted


def test_effective_rank_of_equal_singular_values_is_their_count():
    assert effective_rank([2.0, 2.0, 2.0, 0.0]) == pytest.approx(3.0)
    assert effective_rank([0.0, 0.0]) == 0.0


def test_training_dynamics_records_the_rank_rising_from_0(tmp_path):
    """Self-test (c) measured: an identity-initialised net starts at rank 0 and leaves it while training."""
    keras.utils.set_random_seed(0)
    model = _dense_stack(True)
    model.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = np.random.default_rng(3).integers(0, 3, size=len(VECTORS))
    dynamics = TrainingDynamics(VECTORS, labels, path=tmp_path / "dynamics.csv")
    model.fit(VECTORS, labels, epochs=3, batch_size=16, verbose=0, callbacks=[dynamics])
    rows = TrainingDynamics.read_csv(tmp_path / "dynamics.csv")
    first = [row for row in rows if row["epoch"] == 0]
    last = [row for row in rows if row["epoch"] == 3]
    assert all(row["delta_rank"] == 0 and row["delta_size"] == 0 for row in first)
    assert all(row["delta_rank"] > 0 and row["delta_size"] > 0 for row in last)
    assert last[0]["delta_rank"] == stream_delta_rank(model, VECTORS)["rank"]


def _downsampling_last(rezero, width=12):
    """Three same-shape Dense blocks, then a last block that halves the width (a projection shortcut)."""
    inputs = keras.Input((width,))
    x = inputs
    for index in range(3):
        x = Residual(layers.Dense(width, use_bias=False), rezero=rezero, name=f"block{index}")(x)
    x = Residual(layers.Dense(width // 2, use_bias=False), shortcut=layers.Dense(width // 2, use_bias=False),
                 rezero=rezero, name="narrowing")(x)
    return keras.Model(inputs, layers.Dense(3)(x))


def test_a_last_block_that_changes_the_shape_is_measured_over_the_span_before_it():
    """x_L has a shape no other point has: the change is x_3 - x_0, over the three same-shape blocks (by hand)."""
    keras.utils.set_random_seed(0)
    model = _downsampling_last(False)
    result = stream_delta_rank(model, VECTORS)
    assert (result["from_point"], result["to_point"]) == (0, 3)
    x_3 = keras.Model(model.input, model.get_layer("block2").output)(VECTORS)
    delta = keras.ops.convert_to_numpy(x_3).astype("float64") - VECTORS
    np.testing.assert_allclose(result["singular_values"], np.linalg.svd(delta, compute_uv=False),
                               rtol=1e-4, atol=1e-6)
    assert result["rank"] == 12 and result["width"] == 12


def test_the_rank_rises_from_0_in_a_trained_net_whose_last_block_downsamples():
    """Issue 40, case 1: on the old code x_L - x_L was measured, rank 0 at every epoch of training."""
    keras.utils.set_random_seed(0)
    model = _downsampling_last(True)
    model.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = np.random.default_rng(3).integers(0, 3, size=len(VECTORS))
    dynamics = TrainingDynamics(VECTORS, labels)
    assert stream_delta_rank(model, VECTORS)["rank"] == 0
    model.fit(VECTORS, labels, epochs=3, batch_size=16, verbose=0, callbacks=[dynamics])
    first = [row for row in dynamics.rows if row["epoch"] == 0]
    last = [row for row in dynamics.rows if row["epoch"] == 3]
    assert all(row["delta_rank"] == 0 and row["delta_size"] == 0 for row in first)
    assert all(row["delta_rank"] > 0 and row["delta_size"] > 0 for row in last)
    assert stream_delta_rank(model, VECTORS)["rank"] == last[0]["delta_rank"] > 0


def test_a_depth_8_cifar_resnet_is_measured_over_its_first_stage():
    """The quick preset's depth-8 net: one block a stage, the last two downsample; the span is stage 1."""
    keras.utils.set_random_seed(0)
    model = cifar_resnet(8, width=4, input_shape=(16, 16, 3))
    result = stream_delta_rank(model, IMAGES)
    assert (result["from_point"], result["to_point"]) == (0, 1) and result["rank"] > 0


def test_a_net_whose_every_block_changes_the_shape_is_refused():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((12,))
    x = Residual(layers.Dense(6), shortcut=layers.Dense(6), name="first")(inputs)
    x = Residual(layers.Dense(3), shortcut=layers.Dense(3), name="second")(x)
    model = keras.Model(inputs, x)
    with pytest.raises(ValueError, match="Every block of model .* changes the stream's shape"):
        stream_delta_rank(model, VECTORS)
    dynamics = TrainingDynamics(VECTORS)
    dynamics.set_model(model)
    dynamics.on_epoch_begin(0)  # records epoch 0
    assert all(row["delta_rank"] is None for row in dynamics.rows)
