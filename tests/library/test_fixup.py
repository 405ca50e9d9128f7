import numpy as np
import pytest

import keras
from layer_checks import run_layer_test
from residual_keras import FixupBasicBlock, PadShortcut, ScalarBias, ScalarScale

X = np.random.default_rng(0).random((2, 8, 8, 4)).astype("float32")


@pytest.mark.parametrize("layer_cls", [ScalarBias, ScalarScale])
def test_scalar_layers(tmp_path, layer_cls):
    run_layer_test(
        layer_cls, {"learning_rate_multiplier": 0.1}, X, X.shape, tmp_path,
        expected_num_trainable_weights=1,
    )


def test_scalars_start_at_their_fixup_values():
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ScalarBias(0.1)(X)), X)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ScalarScale(0.1)(X)), X, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, expected_shape",
    [({"filters": 4}, (2, 8, 8, 4)), ({"filters": 8, "strides": 2}, (2, 4, 4, 8))],
    ids=["identity", "downsample"],
)
def test_fixup_block_layer(tmp_path, kwargs, expected_shape):
    run_layer_test(
        FixupBasicBlock, {**kwargs, "num_blocks": 9}, X, expected_shape, tmp_path,
        expected_num_trainable_weights=7,  # 2 kernels, 4 biases, 1 scale
    )


@pytest.mark.parametrize("strides, filters", [(1, 4), (2, 8)])
def test_fixup_branch_is_zero_at_init(strides, filters):
    block = FixupBasicBlock(filters, strides, num_blocks=9)
    x = keras.ops.convert_to_tensor(X - 0.5)
    output = keras.ops.convert_to_numpy(block(x))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(block.branch(x)), 0.0)
    shortcut = x if strides == 1 else PadShortcut(filters, strides)(x)
    np.testing.assert_array_equal(output, np.maximum(keras.ops.convert_to_numpy(shortcut), 0))


def test_fixup_conv1_is_he_fan_out_scaled_by_one_over_sqrt_L():
    num_blocks = 27
    block = FixupBasicBlock(64, num_blocks=num_blocks)
    block.build((None, 8, 8, 64))
    kernel = keras.ops.convert_to_numpy(block.conv1.kernel)
    fan_out = 3 * 3 * 64
    expected_std = np.sqrt(2.0 / fan_out) / np.sqrt(num_blocks)
    assert kernel.std() == pytest.approx(expected_std, rel=0.02)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(block.conv2.kernel), 0.0)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_learning_rate_multiplier_equals_a_smaller_sgd_learning_rate(momentum):
    """Three SGD steps on `b` with multiplier 0.1 == SGD at lr/10 on a plain scalar."""
    lr, multiplier, x = 0.5, 0.1, np.float32(3.0)
    layer = ScalarBias(multiplier)
    inputs = keras.Input((1,))
    model = keras.Model(inputs, layer(inputs))
    # loss = (x + b)^2 / 2, so dloss/db = x + b; Keras' own training step, on every backend.
    model.compile(optimizer=keras.optimizers.SGD(lr, momentum=momentum),
                  loss=lambda target, output: 0.5 * keras.ops.square(output))
    b_reference, velocity = 0.0, 0.0
    for _ in range(3):
        model.train_on_batch(np.array([[x]]), np.zeros((1, 1), "float32"))
        velocity = momentum * velocity - lr * multiplier * (x + b_reference)
        b_reference += velocity
        assert float(layer.value) == pytest.approx(b_reference, rel=1e-5)


def test_fixup_bad_arguments():
    with pytest.raises(ValueError, match="num_blocks must be a positive integer"):
        FixupBasicBlock(8, num_blocks=0)
    with pytest.raises(ValueError, match="learning_rate_multiplier must be > 0"):
        ScalarBias(0.0)
