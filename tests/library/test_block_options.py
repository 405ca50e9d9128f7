"""keras-hub's conventions on the conv blocks: kernel_size, activation, tuple
strides, no final activation (EDSR), and channels_first, on every block."""

import numpy as np
import pytest

import keras
from layer_checks import run_layer_test
from residual_keras import (
    BasicBlock,
    BottleneckBlock,
    FixupBasicBlock,
    PadShortcut,
    PreActBasicBlock,
    ProjectionShortcut,
)

X = np.random.default_rng(0).standard_normal((2, 8, 8, 4)).astype("float32")
X_FIRST = np.transpose(X, (0, 3, 1, 2))  # (B, C, H, W)


def _numpy(tensor):
    return keras.ops.convert_to_numpy(tensor)


@pytest.mark.parametrize(
    "layer_cls, kwargs, expected_shape",
    [
        (BasicBlock, {"filters": 8, "strides": (2, 1)}, (2, 4, 8, 8)),
        (BasicBlock, {"filters": 4, "kernel_size": (5, 3), "activation": "gelu"}, (2, 8, 8, 4)),
        (BasicBlock, {"filters": 4, "norm": "none", "final_activation": False}, (2, 8, 8, 4)),
        (BottleneckBlock, {"filters": 2, "kernel_size": 5, "strides": (1, 2), "shortcut": "B"}, (2, 8, 4, 8)),
        (PreActBasicBlock, {"filters": 8, "strides": (2, 2), "kernel_size": 1, "activation": "elu"},
         (2, 4, 4, 8)),
        (FixupBasicBlock, {"filters": 8, "strides": (1, 2), "num_blocks": 3, "kernel_size": 5,
                           "final_activation": False}, (2, 8, 4, 8)),
        (PadShortcut, {"filters": 6, "strides": (2, 1)}, (2, 4, 8, 6)),
    ],
    ids=["tuple-strides", "kernel-activation", "edsr", "bottleneck", "preact", "fixup", "pad"],
)
def test_new_options_pass_the_layer_checks(tmp_path, layer_cls, kwargs, expected_shape):
    run_layer_test(layer_cls, kwargs, X, expected_shape, tmp_path)


@pytest.mark.parametrize(
    "layer_cls, kwargs, expected_shape",
    [
        (BasicBlock, {"filters": 4}, (2, 4, 8, 8)),
        (BasicBlock, {"filters": 8, "strides": 2}, (2, 8, 4, 4)),
        (BasicBlock, {"filters": 8, "strides": 2, "shortcut": "B", "zero_gamma": True}, (2, 8, 4, 4)),
        (BottleneckBlock, {"filters": 2, "strides": 2, "shortcut": "B"}, (2, 8, 4, 4)),
        (PreActBasicBlock, {"filters": 8, "strides": 2}, (2, 8, 4, 4)),
        (FixupBasicBlock, {"filters": 8, "strides": 2, "num_blocks": 3}, (2, 8, 4, 4)),
        (PadShortcut, {"filters": 8, "strides": 2}, (2, 8, 4, 4)),
        (ProjectionShortcut, {"filters": 8, "strides": 2}, (2, 8, 4, 4)),
    ],
    ids=["basic", "basic-A", "basic-B", "bottleneck", "preact", "fixup", "pad", "projection"],
)
def test_channels_first_passes_the_layer_checks(tmp_path, layer_cls, kwargs, expected_shape,
                                                channels_first_conv):
    policies = ("mixed_bfloat16", "mixed_float16")
    if keras.backend.backend() == "tensorflow" and not _tensorflow_gpu():
        # TensorFlow's own limit: "The Conv2D op currently only supports the NHWC
        # tensor format on the CPU" for float16 (float32 and bfloat16 run).
        policies = ("mixed_bfloat16",)
    run_layer_test(layer_cls, {**kwargs, "data_format": "channels_first"}, X_FIRST, expected_shape,
                   tmp_path, unknown_spatial_dims=False, mixed_precision_policies=policies)


def _tensorflow_gpu():
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


@pytest.mark.parametrize(
    "layer_cls, kwargs",
    [
        (BasicBlock, {"filters": 8, "strides": 2}),
        (BasicBlock, {"filters": 8, "strides": (2, 1), "shortcut": "B"}),
        (BottleneckBlock, {"filters": 2, "strides": 2, "shortcut": "B"}),
        (PreActBasicBlock, {"filters": 8, "strides": 2}),
        (FixupBasicBlock, {"filters": 8, "strides": 2, "num_blocks": 3}),
    ],
    ids=["basic-A", "basic-B", "bottleneck", "preact", "fixup"],
)
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_channels_first_computes_the_channels_last_block_transposed(layer_cls, kwargs, training,
                                                                    channels_first_conv):
    # Same weights (Keras stores conv kernels as (kh, kw, in, out) in both
    # formats), inputs transposed: the outputs must be the same numbers
    # transposed. In training mode this checks that BatchNorm normalises
    # each channel (axis 1), not the width.
    last = layer_cls(**kwargs, data_format="channels_last")
    first = layer_cls(**kwargs, data_format="channels_first")
    last.build(X.shape)
    first.build(X_FIRST.shape)
    first.set_weights(last.get_weights())
    if layer_cls is FixupBasicBlock:  # conv2 starts at 0: give the branch something to compute
        kernel = np.random.default_rng(1).standard_normal(first.conv2.kernel.shape).astype("float32")
        first.conv2.kernel.assign(kernel)
        last.conv2.kernel.assign(kernel)
    expected = _numpy(last(X, training=training))
    got = _numpy(first(X_FIRST, training=training))
    assert got.shape == first.compute_output_shape(X_FIRST.shape)
    np.testing.assert_allclose(np.transpose(got, (0, 2, 3, 1)), expected, rtol=1e-4, atol=1e-4)


def test_channels_first_batchnorm_normalises_the_channels(channels_first_conv):
    block = BasicBlock(4, data_format="channels_first")
    block.build(X_FIRST.shape)
    assert block.norm1.axis in (1, [1])
    assert block.norm1.gamma.shape == (4,)


def test_pad_shortcut_channels_first_pads_axis_1_and_subsamples_height_and_width():
    out = _numpy(PadShortcut(8, strides=(2, 1), data_format="channels_first")(X_FIRST))
    assert out.shape == (2, 8, 4, 8)
    np.testing.assert_array_equal(out[:, 2:6], X_FIRST[:, :, ::2, ::1])
    np.testing.assert_array_equal(out[:, :2], 0.0)
    np.testing.assert_array_equal(out[:, 6:], 0.0)


def test_tuple_strides_subsample_height_and_width_separately():
    out = _numpy(PadShortcut(4, strides=(1, 2))(X))
    np.testing.assert_array_equal(out, X[:, :, ::2, :])
    block = BasicBlock(4, strides=(1, 2))
    assert block(X).shape == (2, 8, 4, 4)
    assert block.conv1.strides == (1, 2)


@pytest.mark.parametrize("layer_cls, kwargs", [
    (BasicBlock, {}), (BottleneckBlock, {"expansion": 1}), (FixupBasicBlock, {"num_blocks": 2}),
])
def test_without_final_activation_the_block_is_shortcut_plus_branch(layer_cls, kwargs):
    # EDSR's block: y = x + f(x), nothing after the addition.
    block = layer_cls(4, final_activation=False, **kwargs)
    block.build(X.shape)
    if layer_cls is FixupBasicBlock:
        block.conv2.kernel.assign(np.ones(block.conv2.kernel.shape, "float32") * 0.1)
    y = _numpy(block(X, training=False)) if layer_cls is not FixupBasicBlock else _numpy(block(X))
    branch = _numpy(block.branch(X, training=False) if layer_cls is not FixupBasicBlock else block.branch(X))
    np.testing.assert_allclose(y, X + branch, rtol=1e-5, atol=1e-5)
    assert (y < 0).any()  # guard: with the final ReLU there would be no negative output
    assert (_numpy(layer_cls(4, **kwargs)(X)) >= 0).all()


def test_activation_is_used_in_the_branch_and_after_the_addition():
    relu = BasicBlock(4, activation="relu")
    gelu = BasicBlock(4, activation="gelu")
    relu.build(X.shape)
    gelu.build(X.shape)
    gelu.set_weights(relu.get_weights())
    x = keras.ops.convert_to_tensor(X)
    hidden = gelu.norm1(gelu.conv1(x), training=False)
    branch = gelu.norm2(gelu.conv2(keras.activations.gelu(hidden)), training=False)
    np.testing.assert_allclose(_numpy(gelu(x, training=False)),
                               _numpy(keras.activations.gelu(branch + x)), rtol=1e-5, atol=1e-5)
    assert not np.allclose(_numpy(relu(x, training=False)), _numpy(gelu(x, training=False)), atol=1e-3)


def test_kernel_size_reaches_the_convolutions():
    block = BasicBlock(4, kernel_size=(5, 3))
    block.build(X.shape)
    assert block.conv1.kernel.shape == (5, 3, 4, 4) and block.conv2.kernel.shape == (5, 3, 4, 4)
    bottleneck = BottleneckBlock(2, kernel_size=5)
    bottleneck.build(X.shape)
    assert [c.kernel.shape[:2] for c in (bottleneck.conv1, bottleneck.conv2, bottleneck.conv3)] == [
        (1, 1), (5, 5), (1, 1)]


@pytest.mark.parametrize("layer_cls", [BasicBlock, PreActBasicBlock])
def test_default_data_format_follows_keras_config(layer_cls, channels_first_conv):
    keras.config.set_image_data_format("channels_first")
    try:
        block = layer_cls(8, strides=2)
    finally:
        keras.config.set_image_data_format("channels_last")
    assert block.data_format == "channels_first"
    assert block(X_FIRST).shape == (2, 8, 4, 4)
    assert block.get_config()["data_format"] == "channels_first"  # explicit in the saved config


def test_bad_options_name_the_value():
    with pytest.raises(ValueError, match=r"strides must be a positive integer or a pair.*\(2,\)"):
        BasicBlock(8, strides=(2,))
    with pytest.raises(ValueError, match="strides must be.*0"):
        PreActBasicBlock(8, strides=0)
    with pytest.raises(ValueError, match="kernel_size must be.*'3'"):
        BasicBlock(8, kernel_size="3")
    with pytest.raises(TypeError, match="final_activation must be True or False, got 'relu'"):
        BasicBlock(8, final_activation="relu")
    with pytest.raises(ValueError, match="data_format='NCHW'.*'channels_last', 'channels_first'"):
        FixupBasicBlock(8, num_blocks=2, data_format="NCHW")


def test_an_image_of_the_wrong_rank_names_the_layout(channels_first_conv):
    with pytest.raises(ValueError, match=r"\(batch, channels, height, width\) \(channels_first\)"):
        BasicBlock(8, data_format="channels_first")(np.zeros((2, 8, 4), "float32"))


def test_old_configs_with_integer_strides_still_load():
    config = BasicBlock(8, strides=2).get_config()
    config["strides"] = 2
    for key in ("kernel_size", "activation", "final_activation", "data_format"):
        config.pop(key)  # a config saved before these options existed
    block = BasicBlock.from_config(config)
    assert block.strides == (2, 2) and block.final_activation and block.data_format == "channels_last"
    assert block(X).shape == (2, 4, 4, 8)


def test_channels_first_is_refused_when_made_where_tensorflow_cannot_convolve_that_way():
    """TensorFlow on a CPU without oneDNN has no NCHW convolution: the block says so when it is made."""
    import os
    import subprocess
    import sys

    if keras.backend.backend() != "tensorflow":
        pytest.skip("a TensorFlow kernel's limit (JAX and PyTorch convolve channels_first on the CPU)")
    script = (
        "import residual_keras as rk\n"
        "for make in (lambda: rk.BasicBlock(4, data_format='channels_first'),\n"
        "             lambda: rk.FixupBasicBlock(4, num_blocks=2, data_format='channels_first'),\n"
        "             lambda: rk.ProjectionShortcut(8, data_format='channels_first')):\n"
        "    try:\n"
        "        make()\n"
        "    except ValueError as error:\n"
        "        print('refused:', error)\n"
        "rk.BasicBlock(4)  # channels_last is fine, and option A (no convolution) in either layout\n"
        "print(rk.PadShortcut(8, strides=2, data_format='channels_first')(__import__('numpy').ones((1, 4, 4, 4))).shape)\n"
    )
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    refusals = [line for line in result.stdout.splitlines() if line.startswith("refused:")]
    assert len(refusals) == 3, result.stdout
    assert "(1, 8, 2, 2)" in result.stdout
    for line in refusals:
        assert "channels_first' cannot run on this machine" in line and "NHWC" in line
        assert "Use channels_last (the default), a GPU, or the JAX or PyTorch backend" in line
