"""cifar_resnet in both image layouts: the same numbers, transposed (issue 42).

The stem's and the pre-activation net's final BatchNorm normalised axis -1
whatever the layout; these tests fail when any layer of the network ignores
`data_format` (the channels-first net would normalise the width instead).
"""

import keras
import residual_keras as rk
import numpy as np
import pytest

from residual_keras import cifar_resnet

VARIANTS = {
    "basic": {},
    "preact": {"block": rk.blocks.preact()},
    "fixup": {"block": rk.blocks.fixup()},
    "plain": {"block": rk.blocks.plain()},  # a plain block has no shortcut, so no option B (it was "plain-B")
    "option-B": {"block": rk.blocks.basic(shortcut="B")},
}


def _perturb_zero_weights(model, seed):
    """Fixup's conv2 and classifier start at 0: give every weight that is 0 something to compute."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        value = keras.ops.convert_to_numpy(weight)
        if not np.any(value):
            weight.assign(0.1 * rng.standard_normal(value.shape).astype(value.dtype))


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_channels_first_network_computes_the_channels_last_one_transposed(variant, training,
                                                                          channels_first_conv):
    kwargs = {"width": 4, **VARIANTS[variant]}
    last = cifar_resnet(8, data_format="channels_last", **kwargs)
    first = cifar_resnet(8, data_format="channels_first", **kwargs)
    assert first.input_shape == (None, 3, 32, 32)  # the default input follows the layout
    _perturb_zero_weights(last, seed=0)
    first.set_weights(last.get_weights())  # Keras stores kernels alike in both layouts
    images = np.random.default_rng(1).standard_normal((4, 32, 32, 3)).astype("float32")
    expected = keras.ops.convert_to_numpy(last(images, training=training))
    got = keras.ops.convert_to_numpy(first(np.transpose(images, (0, 3, 1, 2)), training=training))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_the_layout_defaults_to_keras_setting(channels_first_conv):
    keras.config.set_image_data_format("channels_first")
    try:
        model = cifar_resnet(8, block=rk.blocks.preact(), width=4)
    finally:
        keras.config.set_image_data_format("channels_last")
    assert model.input_shape == (None, 3, 32, 32)
    assert model.get_layer("final_norm").axis in (1, [1])
    assert model.get_layer("stage1_block1").data_format == "channels_first"


def test_an_unknown_layout_is_refused_by_name():
    with pytest.raises(ValueError, match="data_format='NCHW'"):
        cifar_resnet(8, data_format="NCHW")
