"""PreActBasicBlock (He et al. 2016): x + f(x) with nothing after the addition."""

import numpy as np
import pytest

import keras
from autodiff import gradient
from layer_checks import run_layer_test
from residual_keras import BasicBlock, PadShortcut, PreActBasicBlock, gradient_norms, jacobian_norm

X = np.random.default_rng(0).normal(size=(2, 8, 8, 4)).astype("float32")


@pytest.mark.parametrize(
    "kwargs, expected_shape, num_weights",
    [
        ({"filters": 4}, (2, 8, 8, 4), 6),  # identity shortcut; BN on the input and in the middle
        ({"filters": 8, "strides": 2}, (2, 4, 4, 8), 6),  # option A
        ({"filters": 8, "strides": 2, "shortcut": "B"}, (2, 4, 4, 8), 9),
        ({"filters": 8, "strides": 2, "residual": False}, (2, 4, 4, 8), 6),
        ({"filters": 4, "zero_last_conv": True}, (2, 8, 8, 4), 6),
        ({"filters": 4, "norm": "none"}, (2, 8, 8, 4), 4),  # two kernels, two biases
        ({"filters": 8, "strides": 2, "shortcut": "B", "norm": "none"}, (2, 4, 4, 8), 5),
    ],
    ids=["identity", "option-A", "option-B", "plain", "zero-init", "no-norm", "no-norm-option-B"],
)
def test_preact_block_layer(tmp_path, kwargs, expected_shape, num_weights):
    run_layer_test(
        PreActBasicBlock, kwargs, X, expected_shape, tmp_path,
        expected_num_trainable_weights=num_weights,
    )


def _numpy(tensor):
    return keras.ops.convert_to_numpy(tensor)


@pytest.mark.parametrize("training", [False, True])
def test_zero_init_block_is_exactly_its_shortcut(training):
    # Negative inputs pass unchanged: no ReLU after the addition (unlike BasicBlock).
    same = PreActBasicBlock(4, zero_last_conv=True)
    np.testing.assert_array_equal(_numpy(same(X, training=training)), X)
    down = PreActBasicBlock(8, strides=2, zero_last_conv=True)
    np.testing.assert_array_equal(_numpy(down(X, training=training)), _numpy(PadShortcut(8, 2)(X)))


def test_without_zero_init_the_block_is_not_the_identity():
    # Guards the test above: it must be the zero last kernel that makes the identity.
    assert not np.allclose(_numpy(PreActBasicBlock(4)(X)), X, atol=1e-3)


def test_plain_twin_is_the_branch_alone():
    block = PreActBasicBlock(4, residual=False)
    np.testing.assert_allclose(_numpy(block(X)), _numpy(block.branch(X)), rtol=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="zero_last_conv=True needs residual=True"):
        PreActBasicBlock(4, residual=False, zero_last_conv=True)
    with pytest.raises(ValueError, match="norm"):
        PreActBasicBlock(4, norm="layernorm")


def _stack_model(blocks, channels, stem_relu=False):
    """images -> [ReLU] -> blocks -> pool -> dense: x_0 = the first block's input."""
    inputs = keras.Input((8, 8, channels))
    x = keras.layers.ReLU()(inputs) if stem_relu else inputs
    for block in blocks:
        x = block(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x))


@pytest.mark.parametrize("training", [True, False], ids=["batchnorm-training", "batchnorm-inference"])
def test_zero_last_conv_preact_stack_has_jacobian_and_gradient_gain_exactly_one(training):
    # Within a stage, x_L = x_0 + sum f = x_0 at initialisation, and dLoss/dx_0 = dLoss/dx_L.
    keras.utils.set_random_seed(1)
    model = _stack_model([PreActBasicBlock(8, zero_last_conv=True) for _ in range(12)], 8)
    images = np.random.default_rng(1).normal(size=(4, 8, 8, 8)).astype("float32")
    flow = gradient_norms(model, images, training=training)
    assert flow["gain"] == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_allclose(flow["stream_grad_norms"], flow["stream_grad_norms"][-1], rtol=1e-4)
    jacobian = jacobian_norm(model, images, num_iterations=5, per_block=False)
    np.testing.assert_allclose(jacobian["total"], 1.0, atol=1e-4)


def test_original_block_loses_gradient_at_its_relu_where_preact_keeps_it():
    # Guard for the test above: a zero-gamma BasicBlock stack is ReLU(x + 0) = x as well,
    # but its ReLU passes no gradient where the stream is 0 (half of it after a ReLU stem).
    keras.utils.set_random_seed(1)
    images = np.random.default_rng(1).normal(size=(4, 8, 8, 8)).astype("float32")
    basic = _stack_model([BasicBlock(8, zero_gamma=True) for _ in range(12)], 8, stem_relu=True)
    preact = _stack_model([PreActBasicBlock(8, zero_last_conv=True) for _ in range(12)], 8, stem_relu=True)
    assert gradient_norms(basic, images)["gain"] < 0.9
    assert gradient_norms(preact, images)["gain"] == pytest.approx(1.0, abs=1e-4)


def test_option_a_transition_keeps_jacobian_norm_one_and_passes_the_real_channels_share():
    # Option A is a selection (subsample, zero-pad): spectral norm 1. The gradient on the
    # 4 + 4 padded channels has no way back, so the gain is the share on the 8 real ones.
    keras.utils.set_random_seed(2)
    blocks = [PreActBasicBlock(8, zero_last_conv=True), PreActBasicBlock(16, strides=2, zero_last_conv=True)]
    model = _stack_model(blocks, 8)
    images = np.random.default_rng(2).normal(size=(4, 8, 8, 8)).astype("float32")
    labels = np.random.default_rng(0).integers(0, 10, size=4)
    flow = gradient_norms(model, images, labels, training=True)
    stream = model.layers[2].output  # x_L, the transition block's output
    head = keras.Model(stream, model.outputs[0])
    x_last = _numpy(keras.Model(model.inputs, stream)(images))
    g = gradient(lambda x: keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, head(x)), x_last)
    share = np.linalg.norm(g[..., 4:12]) / np.linalg.norm(g)  # real channels: 4..11
    assert 0.3 < share < 0.9  # the padded channels do receive gradient
    assert flow["gain"] == pytest.approx(share, rel=1e-4)
    jacobian = jacobian_norm(model, images, num_iterations=5, per_block=False)
    np.testing.assert_allclose(jacobian["total"], 1.0, atol=1e-4)
