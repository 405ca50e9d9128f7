import numpy as np
import pytest

import keras
from layer_checks import run_layer_test
from residual_keras import PadShortcut, ProjectionShortcut


@pytest.mark.parametrize(
    "layer_class, trainable_weights",
    [(PadShortcut, 0), (ProjectionShortcut, 3)],  # option B: 1x1 kernel, gamma, beta
    ids=["pad", "projection"],
)
def test_shortcut_layer(tmp_path, layer_class, trainable_weights):
    run_layer_test(
        layer_class,
        {"filters": 8, "strides": 2},
        np.random.rand(2, 8, 8, 4).astype("float32"),
        (2, 4, 4, 8),
        tmp_path,
        expected_num_trainable_weights=trainable_weights,
    )


def test_pad_shortcut_subsamples_and_pads_with_zeros():
    x = np.random.rand(2, 6, 6, 4).astype("float32")
    y = keras.ops.convert_to_numpy(PadShortcut(8, strides=2)(x))
    # Old channels sit in the middle, subsampled at even positions.
    np.testing.assert_array_equal(y[..., 2:6], x[:, ::2, ::2, :])
    np.testing.assert_array_equal(y[..., :2], 0.0)
    np.testing.assert_array_equal(y[..., 6:], 0.0)


def test_pad_shortcut_cannot_remove_channels():
    with pytest.raises(ValueError, match="only add channels.*filters=4"):
        PadShortcut(4)(np.zeros((1, 4, 4, 8), "float32"))


def test_shortcuts_reject_non_image_input():
    with pytest.raises(ValueError, match="4D image input"):
        ProjectionShortcut(8)(np.zeros((2, 8), "float32"))
