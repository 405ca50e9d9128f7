"""Veit et al. 2016 in full: delete k blocks, swap adjacent blocks, gradient by path length."""

import math

import numpy as np
import pytest

import keras
from residual_keras import (
    BasicBlock,
    PreActBasicBlock,
    delete_blocks,
    gradient_norms,
    path_gradients,
    plots,
    swap_blocks,
)

RNG = np.random.default_rng(0)
IMAGES = RNG.normal(size=(16, 8, 8, 4)).astype("float32")
LABELS = RNG.integers(0, 10, size=16)


def _model(make_block, channels=(4, 4, 4, 8, 8)):
    """images -> blocks (the 4th doubles the channels with stride 2) -> pool -> dense."""
    keras.utils.set_random_seed(3)
    inputs = keras.Input((8, 8, 4))
    x = inputs
    previous = 4
    for index, filters in enumerate(channels):
        x = make_block(filters, 2 if filters != previous else 1, f"block{index + 1}")(x)
        previous = filters
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x))


def _identity_start(filters, strides, name):
    return PreActBasicBlock(filters, strides, zero_last_conv=True, name=name)


def _preact(filters, strides, name):
    return PreActBasicBlock(filters, strides, name=name)


def _plain(filters, strides, name):
    return BasicBlock(filters, strides, residual=False, name=name)


def test_delete_blocks_changes_nothing_when_every_branch_is_zero():
    result = delete_blocks(_model(_identity_start), (IMAGES, LABELS), metric="crossentropy", draws=3)
    assert result["candidates"] == ["block1", "block2", "block3", "block5"]  # block4 changes shape
    assert result["num_removed"] == [1, 2, 3, 4]
    assert [len(values) for values in result["values"]] == [3, 3, 3, 1]  # only one set of all 4
    for values in result["values"]:
        np.testing.assert_allclose(values, result["intact"], rtol=1e-5)
    removed = result["removed"][1]
    assert len({tuple(names) for names in removed}) == 3 and all(len(names) == 2 for names in removed)


def test_delete_blocks_of_a_trained_like_network_moves_the_metric():
    # Guard for the test above: with non-zero branches, removing blocks changes the output.
    for make_block in (_preact, _plain):
        result = delete_blocks(_model(make_block), (IMAGES, LABELS), metric="crossentropy",
                               num_removed=[1, 4], draws=2, seed=1)
        assert result["num_removed"] == [1, 4]
        assert all(abs(value - result["intact"]) > 1e-4 for values in result["values"] for value in values)


def test_delete_blocks_refuses_impossible_k():
    with pytest.raises(ValueError, match="between 1 and 4"):
        delete_blocks(_model(_plain), (IMAGES, LABELS), num_removed=[5])


def test_swap_blocks_only_swaps_same_shape_neighbours():
    identity = swap_blocks(_model(_identity_start), (IMAGES, LABELS), metric="crossentropy")
    assert identity["pairs"] == [["block1", "block2"], ["block2", "block3"]]
    np.testing.assert_allclose(identity["swapped"], identity["intact"], rtol=1e-5)
    swapped = swap_blocks(_model(_preact), (IMAGES, LABELS), metric="crossentropy")
    assert all(abs(value - swapped["intact"]) > 1e-5 for value in swapped["swapped"])
    lonely = swap_blocks(_model(_plain, channels=(4, 8)), (IMAGES, LABELS))
    assert lonely["pairs"] == [] and lonely["swapped"] == []


def test_path_gradients_add_up_to_the_true_gradient():
    model = _model(_preact)
    result = path_gradients(model, IMAGES, LABELS, samples=2)
    flow = gradient_norms(model, IMAGES, LABELS, training=False)
    assert result["full_gradient"] == pytest.approx(flow["stream_grad_norms"][0], rel=1e-4)
    n = 5
    assert list(result["lengths"]) == list(range(n + 1))
    assert list(result["num_paths"]) == [math.comb(n, k) for k in range(n + 1)]
    assert result["path_fraction"].sum() == pytest.approx(1.0)
    assert result["gradient_share"].sum() == pytest.approx(1.0)
    assert np.all(result["gradient_per_path"] > 0)


def test_with_zero_branches_only_the_shortcut_path_carries_gradient():
    result = path_gradients(_model(_identity_start), IMAGES, LABELS, samples=2)
    assert result["gradient_per_path"][0] == pytest.approx(result["full_gradient"], rel=1e-5)
    np.testing.assert_array_equal(result["gradient_per_path"][1:], 0.0)


def test_path_gradients_needs_residual_blocks():
    with pytest.raises(ValueError, match="no branch/shortcut pair"):
        path_gradients(_model(_plain), IMAGES, LABELS)


def test_plots_of_the_ensemble_instruments(tmp_path):
    residual, plain = _model(_preact), _model(_plain)
    deletions = [delete_blocks(m, (IMAGES, LABELS), draws=2) for m in (residual, plain)]
    swaps = [swap_blocks(m, (IMAGES, LABELS)) for m in (residual, plain)]
    figure = plots.block_deletion(deletions, swaps, ["residual", "plain"], path=tmp_path / "deletion.png")
    assert len(figure.axes) == 2 and (tmp_path / "deletion.png").stat().st_size > 10_000
    figure = plots.path_gradients(path_gradients(residual, IMAGES, LABELS, samples=1), path=tmp_path / "paths.png")
    assert len(figure.axes) == 2 and (tmp_path / "paths.png").stat().st_size > 10_000
