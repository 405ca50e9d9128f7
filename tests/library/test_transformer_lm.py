import math

import numpy as np
import pytest

import keras
from residual_keras.embedding import TokenAndPositionEmbedding
from residual_keras.models import count_trainable_params, transformer_lm
from residual_keras.transformer import TransformerBlock

# nanoGPT's CPU "baby GPT": vocab 65, block 64, 4 layers, 4 heads, 128 wide.
# Untied head with bias, like the PyTorch peer benchmarks/torch_chargpt.py:
# tokens 65*128 + positions 64*128 + 4 * 198,272 per block + final LN 256
# + head 128*65 + 65 = 818,241.
BABY_GPT_PARAMS = 818_241


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_baby_gpt_parameter_count_and_layout():
    model = transformer_lm(65, 64, 4, embed_dim=128, num_heads=4)
    assert count_trainable_params(model) == BABY_GPT_PARAMS
    assert model.name == "transformer_lm_pre"
    names = [layer.name for layer in model.layers]
    assert names == ["tokens", "embedding", "block1", "block2", "block3", "block4",
                     "final_norm", "lm_head"]
    assert isinstance(model.get_layer("embedding"), TokenAndPositionEmbedding)
    assert isinstance(model.get_layer("block4"), TransformerBlock)
    block = model.get_layer("block1")
    assert block.norm_position == "pre" and block.residual is True
    assert count_trainable_params(model.get_layer("block1")) == 198_272


def test_logits_shape_for_any_length_up_to_sequence_length():
    model = transformer_lm(11, 8, 2, embed_dim=16, num_heads=2)
    assert model.input_shape == (None, None)
    assert model.output_shape == (None, None, 11)
    for length in (1, 5, 8):
        tokens = np.zeros((3, length), "int32")
        assert tuple(model(tokens).shape) == (3, length, 11)
    with pytest.raises(ValueError, match="Input length 9 is longer than sequence_length=8"):
        model(np.zeros((1, 9), "int32"))


@pytest.mark.parametrize(
    "kwargs, name, has_final_norm",
    [
        ({}, "transformer_lm_pre", True),
        ({"residual": False}, "plain_lm_pre", True),
        ({"norm_position": "post"}, "transformer_lm_post", False),
        ({"norm_position": "post", "residual": False}, "plain_lm_post", False),
        ({"rezero": True}, "rezero_lm", False),
    ],
)
def test_final_norm_policy_and_names(kwargs, name, has_final_norm):
    model = transformer_lm(11, 8, 2, embed_dim=16, num_heads=2, **kwargs)
    assert model.name == name
    names = [layer.name for layer in model.layers]
    assert ("final_norm" in names) == has_final_norm
    if kwargs.get("rezero"):
        assert not any("norm" in w.path for w in model.weights)


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_plain_twin_has_the_same_parameters(norm_position):
    residual = transformer_lm(11, 8, 3, embed_dim=16, num_heads=2, norm_position=norm_position)
    plain = transformer_lm(
        11, 8, 3, embed_dim=16, num_heads=2, norm_position=norm_position, residual=False
    )
    assert [tuple(w.shape) for w in plain.weights] == [tuple(w.shape) for w in residual.weights]


def test_gpt2_initialisation():
    """All kernels and embeddings N(0, 0.02); residual projections N(0, 0.02 / sqrt(2L))."""
    num_layers = 4
    model = transformer_lm(65, 64, num_layers, embed_dim=128, num_heads=4)
    block = model.get_layer("block2")
    embedding = model.get_layer("embedding")

    def std(variable):
        return float(np.std(_numpy(variable)))

    for variable in (
        block.attention_qkv.kernel,
        block.feedforward_intermediate.kernel,
        model.get_layer("lm_head").kernel,
        embedding.token_embedding.embeddings,
        embedding.position_embedding.embeddings,
    ):
        assert math.isclose(std(variable), 0.02, rel_tol=0.05), variable.path
    scaled = 0.02 / math.sqrt(2 * num_layers)
    for variable in (block.attention_output.kernel, block.feedforward_output.kernel):
        assert math.isclose(std(variable), scaled, rel_tol=0.05), variable.path
    np.testing.assert_array_equal(_numpy(block.attention_qkv.bias), 0.0)
    # Independent draws: an unseeded Keras initializer instance reused for two
    # variables of one shape would give them identical values.
    pairs = [
        (block.attention_output.kernel, block.feedforward_output.kernel),
        (block.attention_qkv.kernel, block.feedforward_intermediate.kernel),
        (embedding.token_embedding.embeddings, embedding.position_embedding.embeddings),
        (model.get_layer("block1").attention_output.kernel, block.attention_output.kernel),
    ]
    for first, second in pairs:
        first, second = _numpy(first).ravel()[:1000], _numpy(second).ravel()[:1000]
        assert abs(np.corrcoef(first, second)[0, 1]) < 0.2


def test_xavier_initialisation():
    """init="xavier": Glorot-uniform kernels (std sqrt(2 / (fan_in + fan_out))), N(0, 1) embeddings."""
    model = transformer_lm(65, 64, 4, embed_dim=128, num_heads=4, init="xavier")
    block = model.get_layer("block2")
    expected = [
        (block.attention_qkv.kernel, math.sqrt(2 / (128 + 384))),
        (block.attention_output.kernel, math.sqrt(2 / (128 + 128))),
        (block.feedforward_output.kernel, math.sqrt(2 / (512 + 128))),
        (model.get_layer("embedding").token_embedding.embeddings, 1.0),
    ]
    for variable, std in expected:
        assert math.isclose(float(np.std(_numpy(variable))), std, rel_tol=0.05), variable.path
    first = _numpy(model.get_layer("block1").attention_output.kernel).ravel()
    assert abs(np.corrcoef(first, _numpy(block.attention_output.kernel).ravel())[0, 1]) < 0.2
    with pytest.raises(ValueError, match="init='he'"):
        transformer_lm(65, 64, 1, init="he")


def test_initial_loss_is_about_log_vocab():
    """Small GPT-2 init: near-uniform predictions, loss about ln(65) = 4.17."""
    model = transformer_lm(65, 64, 2, embed_dim=32, num_heads=4)
    tokens = np.random.default_rng(0).integers(0, 65, (2, 33)).astype("int32")
    logits = model(tokens[:, :-1])
    loss = keras.losses.sparse_categorical_crossentropy(tokens[:, 1:], logits, from_logits=True)
    assert abs(float(keras.ops.mean(loss)) - math.log(65)) < 0.05


def test_mixed_precision_logits_are_float32():
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = transformer_lm(11, 8, 2, embed_dim=16, num_heads=2)
    logits = model(np.zeros((2, 8), "int32"))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert model.get_layer("block1").compute_dtype == "bfloat16"
    assert all(w.dtype == "float32" for w in model.weights)
    assert np.all(np.isfinite(_numpy(logits)))


def test_dropout_is_active_only_in_training():
    model = transformer_lm(11, 8, 2, embed_dim=16, num_heads=2, dropout=0.5)
    assert "embedding_dropout" in [layer.name for layer in model.layers]
    tokens = np.random.default_rng(0).integers(0, 11, (2, 8)).astype("int32")
    np.testing.assert_array_equal(_numpy(model(tokens)), _numpy(model(tokens)))
    assert not np.allclose(_numpy(model(tokens, training=True)), _numpy(model(tokens)))


def test_bad_model_arguments_name_the_value():
    with pytest.raises(ValueError, match="embed_dim=130 is not divisible by num_heads=4"):
        transformer_lm(65, 64, 2, embed_dim=130, num_heads=4)
    with pytest.raises(ValueError, match="norm_position='sandwich'"):
        transformer_lm(65, 64, 2, norm_position="sandwich")
    with pytest.raises(ValueError, match="residual='maybe'.*True, False"):
        transformer_lm(65, 64, 2, residual="maybe")
    with pytest.raises(ValueError, match="residual='rezero'.*pass rezero=True"):
        transformer_lm(65, 64, 2, residual="rezero")
    with pytest.raises(ValueError, match="num_layers must be a positive integer, got 0"):
        transformer_lm(65, 64, 0)
    with pytest.raises(ValueError, match="dropout must be in \\[0, 1\\), got -0.1"):
        transformer_lm(65, 64, 2, dropout=-0.1)
