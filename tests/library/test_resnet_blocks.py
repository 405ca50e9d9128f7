import numpy as np
import pytest

import keras
from layer_checks import run_layer_test
from residual_keras import BasicBlock, BottleneckBlock, PadShortcut

X = np.random.default_rng(0).random((2, 8, 8, 4)).astype("float32")


@pytest.mark.parametrize(
    "kwargs, expected_shape, num_weights",
    [
        ({"filters": 4}, (2, 8, 8, 4), 6),  # identity shortcut
        ({"filters": 8, "strides": 2}, (2, 4, 4, 8), 6),  # option A
        ({"filters": 8, "strides": 2, "shortcut": "B"}, (2, 4, 4, 8), 9),
        ({"filters": 8, "strides": 2, "residual": False}, (2, 4, 4, 8), 6),
        ({"filters": 4, "zero_gamma": True}, (2, 8, 8, 4), 6),
    ],
    ids=["identity", "option-A", "option-B", "plain", "zero-gamma"],
)
def test_basic_block_layer(tmp_path, kwargs, expected_shape, num_weights):
    run_layer_test(
        BasicBlock, kwargs, X, expected_shape, tmp_path,
        expected_num_trainable_weights=num_weights,
    )


@pytest.mark.parametrize(
    "kwargs, expected_shape",
    [
        ({"filters": 2, "expansion": 2}, (2, 8, 8, 4)),
        ({"filters": 4, "strides": 2, "shortcut": "B"}, (2, 4, 4, 16)),
        ({"filters": 4, "residual": False}, (2, 8, 8, 16)),
    ],
    ids=["identity", "option-B", "plain"],
)
def test_bottleneck_block_layer(tmp_path, kwargs, expected_shape):
    run_layer_test(BottleneckBlock, kwargs, X, expected_shape, tmp_path)


def _block_output(block, x):
    return keras.ops.convert_to_numpy(block(x, training=False))


@pytest.mark.parametrize("block_cls", [BasicBlock, BottleneckBlock])
def test_zero_gamma_block_is_relu_of_shortcut_at_init(block_cls):
    filters = 4 if block_cls is BasicBlock else 1
    same = block_cls(filters, zero_gamma=True)
    np.testing.assert_array_equal(_block_output(same, X), np.maximum(X, 0.0))
    x = X - 0.5  # negative inputs are cut by the final ReLU
    down = block_cls(2 * filters, strides=2, zero_gamma=True)
    expected = np.maximum(keras.ops.convert_to_numpy(PadShortcut(down.output_channels, 2)(x)), 0)
    np.testing.assert_array_equal(_block_output(down, x), expected)


def test_without_zero_gamma_the_block_is_not_the_identity():
    # Guards the test above: it must be the zero gamma that makes the identity.
    assert not np.allclose(_block_output(BasicBlock(4), X), X, atol=1e-3)


def test_plain_twin_has_the_same_weights_and_no_addition():
    residual, plain = BasicBlock(8, strides=2), BasicBlock(8, strides=2, residual=False)
    residual.build(X.shape)
    plain.build(X.shape)
    assert [w.shape for w in residual.weights] == [w.shape for w in plain.weights]
    plain.set_weights(residual.get_weights())
    x = keras.ops.convert_to_tensor(X)
    branch = keras.ops.convert_to_numpy(residual.branch(x, training=False))
    np.testing.assert_allclose(_block_output(plain, x), np.maximum(branch, 0), atol=1e-6)
    shortcut = keras.ops.convert_to_numpy(residual.shortcut_layer(x))
    np.testing.assert_allclose(
        _block_output(residual, x), np.maximum(branch + shortcut, 0), atol=1e-6
    )


def test_bad_block_arguments_name_the_value():
    with pytest.raises(ValueError, match="shortcut='C'.*'A', 'B'"):
        BasicBlock(8, shortcut="C")
    with pytest.raises(ValueError, match="4D image input.*\\(2, 8, 4\\)"):
        BasicBlock(8)(np.zeros((2, 8, 4), "float32"))
    with pytest.raises(ValueError, match="only add channels"):
        BasicBlock(2)(X)  # residual with fewer channels than the input: no option-A match
    with pytest.raises(ValueError, match="zero_gamma=True needs residual=True"):
        BasicBlock(4, residual=False, zero_gamma=True)
    with pytest.raises(ValueError, match="filters must be a positive integer"):
        BottleneckBlock(0)
    # The plain twin has no shortcut to match, so fewer channels are fine.
    assert BasicBlock(2, residual=False)(X).shape == (2, 8, 8, 2)


def test_every_kernel_gets_its_own_random_start():
    # One unseeded Keras initializer draws the same numbers at every call;
    # each conv must get a fresh copy, or conv1 == conv2 at initialisation.
    block = BasicBlock(4)
    block.build(X.shape)
    kernel1 = keras.ops.convert_to_numpy(block.conv1.kernel)
    kernel2 = keras.ops.convert_to_numpy(block.conv2.kernel)
    assert kernel1.shape == kernel2.shape
    assert not np.allclose(kernel1, kernel2)
