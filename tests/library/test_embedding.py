import numpy as np
import pytest

import keras
from layer_checks import run_layer_test
from residual_keras.embedding import TokenAndPositionEmbedding

IDS = np.random.default_rng(0).integers(0, 10, (2, 8)).astype("int32")  # (B, T)


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("length", [8, 12], ids=["shorter", "full"])
def test_token_and_position_embedding_layer(tmp_path, length):
    """The shared checks with int inputs (run_layer_test keeps non-float inputs as they are)."""
    ids = np.tile(IDS, (1, 2))[:, :length]
    run_layer_test(
        TokenAndPositionEmbedding,
        {"vocab_size": 10, "sequence_length": 12, "embed_dim": 16},
        ids,
        (2, length, 16),
        tmp_path,
        expected_num_trainable_weights=2,
    )


def test_output_is_token_plus_position_embedding():
    layer = TokenAndPositionEmbedding(vocab_size=10, sequence_length=12, embed_dim=16)
    out = _numpy(layer(IDS))
    tokens = _numpy(layer.token_embedding.embeddings)  # (10, 16)
    positions = _numpy(layer.position_embedding.embeddings)  # (12, 16)
    np.testing.assert_allclose(out, tokens[IDS] + positions[None, :8], rtol=1e-6)
    assert tokens.shape == (10, 16) and positions.shape == (12, 16)


def test_shorter_inputs_use_the_first_positions():
    layer = TokenAndPositionEmbedding(vocab_size=10, sequence_length=12, embed_dim=16)
    full = _numpy(layer(IDS))
    np.testing.assert_array_equal(_numpy(layer(IDS[:, :3])), full[:, :3])
    # Same token at two positions: different vectors (the position is learned in).
    same = _numpy(layer(np.full((1, 2), 4, "int32")))
    assert not np.allclose(same[0, 0], same[0, 1])


def test_symbolic_variable_length():
    inputs = keras.Input(shape=(None,), dtype="int32")
    outputs = TokenAndPositionEmbedding(vocab_size=10, sequence_length=12, embed_dim=16)(inputs)
    assert tuple(outputs.shape) == (None, None, 16)
    model = keras.Model(inputs, outputs)
    assert model(IDS[:, :5]).shape == (2, 5, 16)


def test_mixed_precision_output_and_variables():
    layer = TokenAndPositionEmbedding(vocab_size=10, sequence_length=12, embed_dim=16, dtype="mixed_bfloat16")
    out = layer(IDS)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert all(variable.dtype == "float32" for variable in layer.weights)


def test_initializer_is_used_for_both_tables():
    init = keras.initializers.RandomNormal(stddev=0.02)
    layer = TokenAndPositionEmbedding(vocab_size=500, sequence_length=400, embed_dim=64, embeddings_initializer=init)
    layer.build((None, 8))
    for table in (layer.token_embedding.embeddings, layer.position_embedding.embeddings):
        assert abs(float(np.std(_numpy(table))) - 0.02) < 0.001


def test_bad_embedding_arguments_name_the_value():
    layer = TokenAndPositionEmbedding(vocab_size=10, sequence_length=8, embed_dim=16)
    with pytest.raises(ValueError, match="Input length 9 is longer than sequence_length=8"):
        layer(np.zeros((2, 9), "int32"))
    with pytest.raises(ValueError, match="Input length 9 is longer than sequence_length=8"):
        TokenAndPositionEmbedding(vocab_size=10, sequence_length=8, embed_dim=16)(keras.Input(shape=(9,), dtype="int32"))
    with pytest.raises(ValueError, match="\\(batch, sequence\\).*\\(2, 4, 3\\)"):
        TokenAndPositionEmbedding(vocab_size=10, sequence_length=8, embed_dim=16)(np.zeros((2, 4, 3), "int32"))
    with pytest.raises(ValueError, match="vocab_size must be a positive integer, got 0"):
        TokenAndPositionEmbedding(vocab_size=0, sequence_length=8, embed_dim=16)
    with pytest.raises(ValueError, match="sequence_length must be a positive integer"):
        TokenAndPositionEmbedding(vocab_size=10, sequence_length=-1, embed_dim=16)


def test_argument_names_of_keras_hub_and_the_keras_io_trap():
    # keras-hub's names, once aliases (CHANGELOG 0.4.0): refused with ours.
    for theirs, ours in (("vocabulary_size", "vocab_size"), ("embedding_dim", "embed_dim")):
        arguments = {"vocab_size": 10, "sequence_length": 8, "embed_dim": 16}
        arguments[theirs] = arguments.pop(ours)
        with pytest.raises(TypeError, match=f"{theirs} is the name in keras-hub; residual_keras calls it {ours}"):
            TokenAndPositionEmbedding(**arguments)
    with pytest.raises(TypeError, match="keras-io's TokenAndPositionEmbedding\\(maxlen, vocab_size, embed_dim\\)"):
        TokenAndPositionEmbedding(8, 10, 16, mask_zero=True, vocab_size=10)
    # keras-io's example call: (maxlen=200, vocab_size=20000, embed_dim=32). Read in any
    # positional order it would build 200 tokens and 20,000 positions (or the reverse):
    # refused, with the translation, before any size is taken.
    with pytest.raises(TypeError, match="keyword arguments only.*sequence_length=maxlen"):
        TokenAndPositionEmbedding(200, 20000, 32)
    with pytest.raises(TypeError, match="keyword arguments only"):
        TokenAndPositionEmbedding(10, sequence_length=8, embed_dim=16)
    with pytest.raises(TypeError, match="needs vocab_size=<int>"):
        TokenAndPositionEmbedding(sequence_length=8, embed_dim=16)


def test_mask_zero_marks_padding():
    layer = TokenAndPositionEmbedding(vocab_size=10, sequence_length=8, embed_dim=16, mask_zero=True)
    mask = layer.compute_mask(keras.ops.convert_to_tensor([[3, 0, 4]]))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(mask), [[True, False, True]])
    assert TokenAndPositionEmbedding(vocab_size=10, sequence_length=8, embed_dim=16).compute_mask(
        keras.ops.convert_to_tensor([[3, 0, 4]])) is None
