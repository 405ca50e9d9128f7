import re

import numpy as np
import pytest

import keras
from autodiff import gradient
import residual_keras as rk
from residual_keras import BasicBlock, cifar_resnet, count_trainable_params

# He et al. 2015, CIFAR-10 networks, option A shortcuts.
PAPER_PARAMS = {20: 269_722, 32: 464_154, 44: 658_586, 56: 853_018, 110: 1_727_962}


@pytest.mark.parametrize("depth", sorted(PAPER_PARAMS))
def test_trainable_params_match_the_paper(depth):
    assert count_trainable_params(cifar_resnet(depth)) == PAPER_PARAMS[depth]
    assert count_trainable_params(cifar_resnet(depth, block=rk.blocks.plain())) == PAPER_PARAMS[depth]


@pytest.mark.parametrize("residual", [True, False])
def test_preact_network_has_the_papers_parameter_count(residual):
    # BN on every block's input and a final BN instead of one after the stem: the same total.
    model = cifar_resnet(20, block=rk.blocks.preact() if residual else rk.blocks.plain_preact())
    assert count_trainable_params(model) == PAPER_PARAMS[20]
    names = [layer.name for layer in model.layers]
    assert "stem_norm" not in names and names[-4:] == ["final_norm", "final_relu", "pool", "classifier"]
    assert model.name == ("preact_resnet20" if residual else "preact_plain20")


def test_unnormalised_network_has_no_batchnorm_and_biases_instead():
    model = cifar_resnet(20, block=rk.blocks.basic(norm="none"))
    assert not any("moving_mean" in weight.path for weight in model.weights)
    assert any("moving_mean" in weight.path for weight in cifar_resnet(20).weights)  # guard
    # 269,722 - BN (2 x (16 + 2 x (3x16 + 3x32 + 3x64))) + conv biases (16 + 2 x (3x16 + 3x32 + 3x64))
    assert count_trainable_params(model) == 269_722 - 2 * 688 + 688
    assert model.name == "resnet20_nonorm"


def test_zero_last_conv_preact_network_starts_as_its_shortcuts():
    # Every block is the identity (or option A) at initialisation: the stream after the stem
    # reaches the final BN-ReLU unchanged apart from subsampling and zero channels.
    model = cifar_resnet(8, block=rk.blocks.zero_last_conv_preact(), width=4)
    x = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype("float32")
    stem = keras.Model(model.inputs, model.get_layer("stem_conv").output)(x)
    last = keras.Model(model.inputs, model.get_layer("stage3_block1").output)(x)
    expected = rk.PadShortcut(16, 2)(rk.PadShortcut(8, 2)(stem))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(last), keras.ops.convert_to_numpy(expected), atol=1e-6)


def test_option_b_adds_two_projections():
    assert count_trainable_params(cifar_resnet(20, block=rk.blocks.basic(shortcut="B"))) == 272_474


def test_architecture_of_resnet20():
    model = cifar_resnet(20)
    assert model.name == "resnet20"
    assert model.output_shape == (None, 10)
    blocks = [layer for layer in model.layers if isinstance(layer, BasicBlock)]
    assert [b.name for b in blocks[:4]] == [
        "stage1_block1", "stage1_block2", "stage1_block3", "stage2_block1"
    ]
    assert [b.filters for b in blocks] == [16] * 3 + [32] * 3 + [64] * 3
    assert [b.strides for b in blocks] == [(s, s) for s in (1, 1, 1, 2, 1, 1, 2, 1, 1)]
    assert model.get_layer("stage3_block3").output.shape == (None, 8, 8, 64)


def test_fixup_model_starts_as_its_shortcuts():
    model = cifar_resnet(20, block=rk.blocks.fixup())
    x = np.random.default_rng(0).random((2, 32, 32, 3)).astype("float32")
    # Classifier weights are zero: every logit starts at 0.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(x)), 0.0)
    assert not any("norm" in layer.name for layer in model.layers)


def test_mixed_precision_model_outputs_float32_logits():
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = cifar_resnet(8, width=4)
    out = model(np.zeros((1, 32, 32, 3), "float32"))
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert model.get_layer("stage1_block1").compute_dtype == "bfloat16"


def test_weight_decay_is_the_papers_coupled_decay():
    model = cifar_resnet(8, width=4, weight_decay=1e-4)
    # L2(wd / 2) * ||W||^2 has gradient wd * W, what SGD's coupled decay adds.
    assert model.get_layer("stem_conv").kernel_regularizer.l2 == pytest.approx(5e-5)
    penalty = sum(float(loss) for loss in model.losses)
    expected = sum(
        5e-5 * float(np.sum(np.square(keras.ops.convert_to_numpy(w))))
        for w in model.trainable_weights if w.path.endswith("kernel")
    )
    assert penalty == pytest.approx(expected, rel=1e-4)  # kernels only: no decay on BN or biases


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"depth": 21}, "depth must be 6n \\+ 2.*got 21"),
        ({"depth": 2}, "depth must be 6n \\+ 2.*got 2"),
        ({"depth": 20, "width": 0}, "width must be a positive integer"),
    ],
)
def test_bad_builder_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cifar_resnet(**kwargs)


@pytest.mark.parametrize(
    "factory, kwargs, message",
    [
        ("basic", {"shortcut": "C"}, "shortcut='C'"),
        ("basic", {"norm": "layernorm"}, "norm='layernorm'.*'batchnorm', 'none'"),
        ("preact", {"norm": "fixup"}, "norm='fixup'.*'batchnorm', 'none'"),  # Fixup is a family: rk.blocks.fixup()
        ("zero_last_conv_preact", {"shortcut": "C"}, "shortcut='C'"),
        ("plain", {"norm": "group"}, "norm='group'"),
    ],
)
def test_bad_block_family_arguments(factory, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(rk.blocks, factory)(**kwargs)


@pytest.mark.parametrize(
    "kwargs, family",
    [
        ({"residual": False}, "rk.blocks.plain()"),
        ({"shortcut": "B"}, 'rk.blocks.basic(shortcut="B")'),
        ({"norm": "fixup"}, "rk.blocks.fixup()"),
        ({"norm": "none"}, 'rk.blocks.basic(norm="none")'),
        ({"zero_gamma": True}, "rk.blocks.zero_gamma_basic()"),
        ({"zero_init_last": True}, "rk.blocks.zero_last_conv_preact()"),
    ],
)
def test_the_flags_before_the_block_families_are_refused_with_the_family(kwargs, family):
    # 0.2.0 removed them (CHANGELOG.md): one line that names what to write instead
    with pytest.raises(TypeError) as refused:
        cifar_resnet(20, **kwargs)
    message = str(refused.value)
    assert family in message and "residual_keras 0.1" in message and "\n" not in message


@pytest.mark.parametrize("block, family", [("preact", "rk.blocks.preact()"), ("basic", "rk.blocks.basic()"),
                                           ("bottleneck", "rk.blocks.basic(), preact(), fixup()")])
def test_a_block_named_by_a_string_is_refused_with_the_family(block, family):
    with pytest.raises(TypeError, match=re.escape(family)):
        cifar_resnet(20, block=block)


def test_every_block_family_builds_the_network_it_names():
    expected = {
        "basic": ("resnet8", "stem_norm"), "plain": ("plain8", "stem_norm"),
        "zero_gamma_basic": ("resnet8", "stem_norm"), "preact": ("preact_resnet8", "final_norm"),
        "plain_preact": ("preact_plain8", "final_norm"), "zero_last_conv_preact": ("preact_resnet8", "final_norm"),
        "fixup": ("fixup8", "head_bias"),
    }
    for factory, (name, layer) in expected.items():
        model = cifar_resnet(8, block=getattr(rk.blocks, factory)(), width=4)
        assert model.name == name and layer in [each.name for each in model.layers], factory
    assert cifar_resnet(8, block=rk.blocks.plain(norm="none"), width=4).name == "plain8_nonorm"


def _stack(num_blocks, **block_kwargs):
    inputs = keras.Input((8, 8, 8))
    x = inputs
    for _ in range(num_blocks):
        x = BasicBlock(8, **block_kwargs)(x)
    return keras.Model(inputs, x)


def _backward_gain(model, x):
    """||dL/d(input)|| / ||dL/d(output)|| for L = mean(output^2), BN in training mode."""
    grad_in = gradient(lambda x: keras.ops.mean(keras.ops.square(model(x, training=True))), x)
    y = keras.ops.convert_to_numpy(model(x, training=True))
    grad_out = 2 * y / y.size  # d mean(y^2) / dy
    return float(np.linalg.norm(grad_in) / np.linalg.norm(grad_out))


def test_gradient_keeps_an_identity_path_through_50_residual_blocks():
    """The seeds' central claim, measured at initialisation.

    Through 50 residual blocks the gradient at the stack's input stays within
    two orders of magnitude of the gradient at its output; through the plain
    twin's product of 100 conv Jacobians it is off by more than 1e3 times that.
    With BatchNorm in training mode (how the first step computes), the plain
    stack's gradient explodes (Yang et al. 2019, "A Mean Field Theory of Batch
    Normalization"); it vanishes instead when BN uses fixed statistics.
    """
    x = np.random.default_rng(0).normal(size=(8, 8, 8, 8)).astype("float32")
    residual_gain = _backward_gain(_stack(50), x)
    plain_gain = _backward_gain(_stack(50, residual=False), x)
    assert 0.1 < residual_gain < 100, residual_gain
    assert plain_gain / residual_gain > 1e3, (plain_gain, residual_gain)
    # Zero-gamma makes every branch 0: the stack is exactly the identity path.
    zero_gamma_gain = _backward_gain(_stack(50, zero_gamma=True), np.abs(x))
    assert zero_gamma_gain == pytest.approx(1.0, rel=1e-5)


# --------------------------------------------------------------------------
# cifar_resnet(block=...) with a block of one's own
# --------------------------------------------------------------------------


def conv_residual(filters, strides, name):
    """A student's block factory: ReLU(shortcut(x) + conv(ReLU(conv(x)))), a 1x1 projection where it downsamples."""
    branch = keras.Sequential([
        keras.layers.Conv2D(filters, 3, strides=strides, padding="same", activation="relu", name="conv1"),
        keras.layers.Conv2D(filters, 3, padding="same", name="conv2"),
    ], name=f"{name}_branch")
    shortcut = None if strides == 1 else keras.layers.Conv2D(filters, 1, strides=strides, name=f"{name}_projection")
    return rk.Residual(branch, shortcut=shortcut, post="relu", name=name)


def _conv_params(kernel, channels_in, filters):
    return kernel * kernel * channels_in * filters + filters  # kernel and bias


def test_a_block_factory_of_ones_own_builds_a_resnet_the_instruments_measure():
    keras.utils.set_random_seed(0)
    model = cifar_resnet(8, block=conv_residual, width=4, input_shape=(8, 8, 3))
    names = ["stage1_block1", "stage2_block1", "stage3_block1"]
    assert model.name == "conv_residual_resnet8"
    assert list(rk.diagnostics.blocks(model)) == names
    assert all(isinstance(model.get_layer(name), rk.Residual) for name in names)
    assert [tuple(model.get_layer(name).output.shape) for name in names] == [
        (None, 8, 8, 4), (None, 4, 4, 8), (None, 2, 2, 16)]
    blocks = (_conv_params(3, 4, 4) + _conv_params(3, 4, 4),
              _conv_params(3, 4, 8) + _conv_params(3, 8, 8) + _conv_params(1, 4, 8),
              _conv_params(3, 8, 16) + _conv_params(3, 16, 16) + _conv_params(1, 8, 16))
    stem = 3 * 3 * 3 * 4 + 2 * 4  # conv without bias, BatchNorm's gamma and beta
    assert count_trainable_params(model) == stem + sum(blocks) + 16 * 10 + 10

    # The forward pass is the stem, the blocks in order, the pool and the classifier.
    x = np.random.default_rng(0).normal(size=(4, 8, 8, 3)).astype("float32")
    z = x
    for name in ("stem_conv", "stem_norm", "stem_relu", *names, "pool", "classifier"):
        z = model.get_layer(name)(z, training=False)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(x, training=False)),
                               keras.ops.convert_to_numpy(z), rtol=1e-5, atol=1e-6)

    # The instruments find its blocks, and remove each as its protocol says: ReLU(shortcut(x)).
    y = np.array([0, 1, 2, 3])
    flow = rk.diagnostics.gradient_norms(model, x, y)
    assert flow["names"] == names and np.all(flow["block_weight_grad_norms"] > 0)
    assert rk.diagnostics.lesion(model, x, y)["removed_as"] == ["ReLU(shortcut(x))"] * 3


def test_a_bad_block_factory_is_refused_in_one_line():
    returns = r"block\(filters, strides, name=...\) must return a Keras layer, got 'conv'"
    with pytest.raises(TypeError, match=returns) as no_layer:
        cifar_resnet(8, block=lambda filters, strides, name: "conv")
    with pytest.raises(TypeError, match="residual is the name in residual_keras 0.1.*blocks.plain") as plain_twin:
        cifar_resnet(8, block=conv_residual, residual=False)
    assert "\n" not in str(no_layer.value) + str(plain_twin.value)
    # A factory whose layers are not residual blocks builds, and the instruments say what is missing.
    plain = cifar_resnet(8, width=4, input_shape=(8, 8, 3), name="convs",
                         block=lambda filters, strides, name: keras.layers.Conv2D(
                             filters, 3, strides=strides, padding="same", name=name))
    x = np.random.default_rng(0).normal(size=(2, 8, 8, 3)).astype("float32")
    with pytest.raises(ValueError, match="Model 'convs' has no blocks: no layer implements the residual protocol"):
        rk.diagnostics.gradient_norms(plain, x)
    named = rk.diagnostics.gradient_norms(plain, x, blocks=["stage1_block1", "stage2_block1"])
    assert named["names"] == ["stage1_block1", "stage2_block1"] and np.all(named["stream_grad_norms"] > 0)
