"""The residual stream of a Transformer: decomposition, logit lens, sublayer lesions, Xiong's gradients."""

import numpy as np
import pytest

import keras
import residual_keras as rk
from keras import ops
from residual_keras import (
    TransformerBlock,
    cifar_resnet,
    gradient_norms,
    jacobian_norm,
    lesion,
    lesion_sublayers,
    logit_lens,
    stream_contributions,
    stream_decomposition,
    transformer_lm,
)

TOKENS = np.random.default_rng(0).integers(0, 20, size=(4, 17)).astype("int32")
X, Y = TOKENS[:, :-1], TOKENS[:, 1:]


def _lm(**kwargs):
    keras.utils.set_random_seed(0)
    kwargs = {"embed_dim": 32, "num_heads": 4, **kwargs}
    return transformer_lm(20, 16, 4, **kwargs)


@pytest.mark.parametrize("kwargs", [{}, {"rezero": True}, {"init": "xavier"}],
                         ids=["pre-LN", "rezero", "pre-LN-xavier"])
def test_pre_ln_stream_is_the_embedding_plus_every_sublayer_output(kwargs):
    model = _lm(**kwargs)
    if kwargs.get("rezero"):  # alphas start at 0: give the sublayers a say
        for index in range(1, 5):
            model.get_layer(f"block{index}").rezero_alpha.assign(5.0)
    result = stream_decomposition(model, X)
    assert len(result["update_rms"]) == 8 and result["labels"][:2] == ["block1 attention", "block1 feedforward"]
    assert np.all(result["update_rms"] > 0.01 * result["stream_rms"])  # every sublayer writes something
    assert result["relative_error"] < 1e-5


def test_post_ln_stream_is_not_a_sum():
    # Guard: LayerNorm after every addition rescales what came before.
    assert stream_decomposition(_lm(norm_position="post"), X)["relative_error"] > 0.1


def test_logit_lens_ends_at_the_models_own_loss_and_starts_at_the_embeddings():
    model = _lm()
    result = logit_lens(model, X, Y)
    assert list(result["depths"]) == [0, 1, 2, 3, 4]
    own = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(Y, model(X))
    assert result["loss"][-1] == pytest.approx(float(own), rel=1e-5)
    embeddings = model.get_layer("embedding")(X)
    head = model.get_layer("lm_head")(model.get_layer("final_norm")(embeddings))
    first = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(Y, head)
    assert result["loss"][0] == pytest.approx(float(first), rel=1e-5)


def test_removing_a_rezero_sublayer_at_initialisation_changes_nothing():
    rezero = lesion_sublayers(_lm(rezero=True), (X, Y), batch_size=4)
    np.testing.assert_allclose(rezero["attention"] + rezero["feedforward"], rezero["intact"], rtol=1e-6)
    # Guard: in a Pre-LN model at initialisation every sublayer moves the loss a little.
    pre = lesion_sublayers(_lm(init="xavier"), (X, Y), batch_size=4)
    assert all(abs(value - pre["intact"]) > 1e-5 for value in pre["attention"] + pre["feedforward"])
    assert len(pre["attention"]) == len(pre["feedforward"]) == 4


def test_removing_a_plain_sublayer_keeps_the_stream_going():
    # In a plain twin a removed sublayer is the identity (not a zero update).
    plain = lesion_sublayers(_lm(residual=False), (X, Y), batch_size=4)
    assert all(np.isfinite(plain["attention"])) and all(value < 10 for value in plain["attention"])


def test_post_ln_weight_gradients_are_larger_than_pre_ln_at_every_layer():
    """Xiong et al. 2020's point at initialisation, as measured here (Xavier initialisation).

    Post-LN's per-block weight gradients are larger than Pre-LN's at every depth, about
    twice on average (1.6-2.0x on the three backends' draws, 1.2x at the least). (Xiong
    et al. also show Post-LN's growing towards the output; that shape is not what this
    character model measures: see docs/experiments/language.md.)
    """
    def block_norms(norm_position):
        keras.utils.set_random_seed(1)
        model = transformer_lm(20, 16, 8, embed_dim=32, num_heads=4, init="xavier", norm_position=norm_position)
        norms = gradient_norms(model, X, Y)["block_weight_grad_norms"]
        assert norms.shape == (8,) and np.all(norms > 0)
        return norms

    ratio = block_norms("post") / block_norms("pre")
    assert np.all(ratio > 1.1) and np.mean(ratio) > 1.5


def test_a_plain_stack_collapses_through_layernorm_epsilon_at_small_width():
    """The language track's collapse demo (docs/lab_language.md): GPT-2 init, width 16.

    Every plain sublayer shrinks the stream; once its variance is far below LayerNorm's
    epsilon (1e-5), LayerNorm no longer rescales it, each layer multiplies by a constant
    below 1, and the gradient's gain falls exponentially with depth: a product of Jacobians.
    With a tiny epsilon LayerNorm keeps rescaling: the gain stays within a few orders of
    magnitude of 1 and does not even fall steadily (the eps=1e-12 reference run,
    docs/reference/language-collapse-eps12-s0, gives 0.0226, 0.134 and 0.0048 at 6, 12 and
    24 layers: it rises from 6 to 12 and falls at 24). How it moves depends on the random
    draw, so on the backend; the test checks only that its 12/6 ratio is far above the collapse's.
    """
    def gain(depth, epsilon):
        keras.utils.set_random_seed(0)
        model = transformer_lm(20, 16, depth, embed_dim=16, num_heads=2, residual=False,
                               layer_norm_epsilon=epsilon)
        return gradient_norms(model, X, Y)["gain"]

    collapse = gain(12, 1e-5) / gain(6, 1e-5)
    assert gain(6, 1e-5) < 1e-3 and collapse < 1e-3
    assert gain(12, 1e-12) / gain(6, 1e-12) > 100 * collapse and gain(12, 1e-12) > 0
    keras.utils.set_random_seed(0)
    residual = transformer_lm(20, 16, 12, embed_dim=16, num_heads=2)
    assert 0.5 < gradient_norms(residual, X, Y)["gain"] < 2.0  # the Pre-LN twin keeps its gradient


# --------------------------------------------------------------------------
# ReZero identity at init, stream_contributions (from tests/library/test_diagnostics.py)
# --------------------------------------------------------------------------

VOCAB, LENGTH = 11, 6
SHORT_TOKENS = np.random.default_rng(1).integers(0, VOCAB, size=(3, LENGTH))


def _tiny_lm(**kwargs):
    return transformer_lm(VOCAB, LENGTH, 3, embed_dim=8, num_heads=2, **kwargs)


def test_rezero_lm_starts_as_the_identity():
    model = _tiny_lm(rezero=True)
    jacobian = jacobian_norm(model, SHORT_TOKENS)
    assert jacobian["names"] == ["block1", "block2", "block3"]
    np.testing.assert_allclose(jacobian["total"], 1.0, atol=1e-4)
    np.testing.assert_allclose(jacobian["per_block"], 1.0, atol=1e-4)
    stream_grads = gradient_norms(model, SHORT_TOKENS)["stream_grad_norms"]
    np.testing.assert_allclose(stream_grads, stream_grads[-1], rtol=1e-6)  # all equal
    contributions = stream_contributions(model, SHORT_TOKENS)
    np.testing.assert_array_equal(contributions["attention"], 0.0)
    np.testing.assert_array_equal(contributions["feedforward"], 0.0)
    lesioned = lesion(model, (SHORT_TOKENS, SHORT_TOKENS), metric="crossentropy")
    assert lesioned["removed_as"] == ["identity"] * 3
    np.testing.assert_allclose(lesioned["lesioned"], lesioned["intact"], rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"norm_position": "pre"},
        {"norm_position": "post"},
        {"norm_position": "pre", "residual": False},
        {"norm_position": "post", "residual": False},
        {"rezero": True},
    ],
    ids=["pre", "post", "plain_pre", "plain_post", "rezero"],
)
def test_stream_contributions_match_hand_computed_ratios(kwargs):
    model = _tiny_lm(**kwargs)
    block = model.get_layer("block2")
    if kwargs.get("rezero"):
        block.rezero_alpha.assign(0.5)  # else every contribution is 0
    result = stream_contributions(model, SHORT_TOKENS)
    assert result["attention"].shape == result["feedforward"].shape == (3, 3)
    assert result["stream_rms"].shape == (4, 3)

    # Block 2 by hand, from the equations of each variant.
    x = keras.Model(model.input, block.input)(SHORT_TOKENS)
    a = block.attention_branch(x)
    stream = x + a if kwargs.get("residual", True) is not False else a
    if kwargs.get("norm_position") == "post":
        stream = block.attention_norm(stream)
    m = block.feedforward_branch(stream)
    output = stream + m if kwargs.get("residual", True) is not False else m
    if kwargs.get("norm_position") == "post":
        output = block.feedforward_norm(output)
    # The hand-composed block is the block (so the measured points are the right ones).
    np.testing.assert_allclose(
        ops.convert_to_numpy(output),
        ops.convert_to_numpy(block(x)),
        rtol=1e-5,
        atol=1e-6,
    )

    def norms(t):
        return np.linalg.norm(ops.convert_to_numpy(t).reshape(len(SHORT_TOKENS), -1), axis=1)

    np.testing.assert_allclose(result["attention"][1], norms(a) / norms(x), rtol=1e-5)
    np.testing.assert_allclose(
        result["feedforward"][1], norms(m) / norms(stream), rtol=1e-5
    )
    if kwargs.get("rezero"):  # only block2's alpha is nonzero
        np.testing.assert_array_equal(result["attention"][[0, 2]], 0.0)
        np.testing.assert_array_equal(result["feedforward"][[0, 2]], 0.0)
    assert np.all(result["attention"][1] > 0) and np.all(result["feedforward"][1] > 0)


def test_rezero_contribution_is_linear_in_alpha():
    model = _tiny_lm(rezero=True)
    block = model.get_layer("block1")
    block.rezero_alpha.assign(0.25)
    quarter = stream_contributions(model, SHORT_TOKENS)["attention"][0]
    block.rezero_alpha.assign(0.5)
    half = stream_contributions(model, SHORT_TOKENS)["attention"][0]
    assert np.all(quarter > 0)
    np.testing.assert_allclose(half, 2 * quarter, rtol=1e-5)


def test_stream_contributions_of_one_step_blocks_is_the_branch_over_the_shortcut():
    model = cifar_resnet(8, width=4, input_shape=(8, 8, 3))
    images = np.random.default_rng(3).normal(size=(3, 8, 8, 3)).astype("float32")
    result = stream_contributions(model, images)
    assert result["steps"] == ["branch"] and result["branch"].shape == (3, 3)
    block = model.get_layer("stage1_block1")
    x0 = model.get_layer("stem_relu")(model.get_layer("stem_norm")(model.get_layer("stem_conv")(images),
                                                                    training=False))

    def norms(tensor):
        return np.linalg.norm(ops.convert_to_numpy(tensor).reshape(len(images), -1), axis=1)

    np.testing.assert_allclose(result["branch"][0], norms(block.branch(x0, training=False)) / norms(x0),
                               rtol=1e-5)


def test_stream_contributions_compares_one_kind_of_block():
    tokens = keras.Input((5, 8))
    x = rk.Residual(keras.layers.Dense(8), name="dense_block")(tokens)
    x = TransformerBlock(num_heads=2, name="transformer")(x)
    mixed = keras.Model(tokens, x)
    with pytest.raises(ValueError, match="different steps.*'dense_block': \\['branch'\\].*'transformer': "
                                         "\\['attention', 'feedforward'\\]"):
        stream_contributions(mixed, np.zeros((2, 5, 8), "float32"))
