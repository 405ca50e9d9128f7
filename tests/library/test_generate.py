import numpy as np
import pytest

import keras
from residual_keras import TokenAndPositionEmbedding, TransformerBlock
from residual_keras.generate import generate
from residual_keras.models import transformer_lm

TEXT = "hello world "
CHARS = sorted(set(TEXT))  # [' ', 'd', 'e', 'h', 'l', 'o', 'r', 'w']


def encode(text):
    return [CHARS.index(c) for c in text]


def decode(ids):
    return "".join(CHARS[i] for i in ids)


@pytest.fixture(scope="module")
def overfit_model():
    """A one-block transformer_lm trained for 150 steps on "hello world " windows.

    Character level, sequence_length 16, embed_dim 32; about 2 seconds of
    training on a CPU (no XLA: compiling costs more than it saves here).
    """
    keras.utils.set_random_seed(1234)
    data = np.array(encode(TEXT * 3), "int32")
    length, steps = 16, 150
    x = np.stack([data[i : i + length] for i in range(len(TEXT))])  # every phase
    y = np.stack([data[i + 1 : i + length + 1] for i in range(len(TEXT))])
    model = transformer_lm(len(CHARS), length, 1, embed_dim=32, num_heads=2)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(
        np.tile(x, (steps, 1)), np.tile(y, (steps, 1)), batch_size=len(TEXT),
        shuffle=False, verbose=0,
    )
    assert history.history["loss"][-1] < 0.5
    return model


def test_greedy_generation_continues_the_training_string(overfit_model):
    out = generate(overfit_model, encode("hello w"), 30, temperature=0)
    assert decode(out) == (TEXT * 4)[: 7 + 30]
    np.testing.assert_array_equal(generate(overfit_model, encode("hello w"), 30, top_k=1), out)


def test_prompt_longer_than_the_window_slides(overfit_model):
    prompt = TEXT * 3 + "hel"  # 39 characters, the model sees 16
    out = generate(overfit_model, encode(prompt), 20, temperature=0)
    assert decode(out) == (TEXT * 6)[: len(prompt) + 20]


def _tiny_lm():
    return transformer_lm(11, 8, 2, embed_dim=16, num_heads=2)


def _naive_next_logits(model, tokens):
    """Logits of the next token from the last 8 tokens, one eager call of their length."""
    context = np.array([tokens[-8:]], "int32")
    return keras.ops.convert_to_numpy(model(context))[0, -1]


@pytest.mark.parametrize("prompt_length", [3, 13], ids=["short", "longer-than-window"])
def test_greedy_generation_matches_a_naive_loop(prompt_length):
    """The fixed-shape padded window gives the same tokens as calling the model on the context."""
    model = _tiny_lm()
    prompt = list(np.random.default_rng(0).integers(0, 11, prompt_length))
    out = generate(model, prompt, 12, temperature=0)
    tokens = list(prompt)
    for _ in range(12):
        tokens.append(int(np.argmax(_naive_next_logits(model, tokens))))
    np.testing.assert_array_equal(out, tokens)


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="PyTorch runs the model eagerly: nothing is traced")
def test_generation_traces_the_model_once():
    """Every step has the shape (1, sequence_length): the model is traced once, not per length."""
    model = _tiny_lm()
    embedding = model.get_layer("embedding")
    calls = []
    original_call = embedding.call

    def counting_call(*args, **kwargs):
        calls.append(1)
        return original_call(*args, **kwargs)

    embedding.call = counting_call
    generate(model, [1, 2], 10, temperature=0)  # lengths 2..11, sliding past 8
    generate(model, [3] * 9, 5, seed=0)
    assert len(calls) == 1


def test_sampling_is_deterministic_given_a_seed_and_respects_top_k():
    model = _tiny_lm()
    prompt = [1, 2, 3]
    first = generate(model, prompt, 20, seed=7)
    np.testing.assert_array_equal(generate(model, prompt, 20, seed=7), first)
    assert not np.array_equal(generate(model, prompt, 20, seed=8), first)
    # With top_k=2 every sampled id is one of the two most likely ones.
    out = generate(model, prompt, 12, top_k=2, temperature=2.0, seed=0)
    for step in range(3, len(out)):
        top_two = np.argsort(_naive_next_logits(model, list(out[:step])))[-2:]
        assert out[step] in top_two
    assert len(set(out[3:].tolist())) > 1  # really sampled, not greedy


def test_returns_the_prompt_plus_new_ids_as_int32():
    model = _tiny_lm()
    out = generate(model, np.array([4, 5, 6]), 5, seed=0)
    assert isinstance(out, np.ndarray) and out.dtype == np.int32 and out.shape == (8,)
    np.testing.assert_array_equal(out[:3], [4, 5, 6])
    assert np.all((out >= 0) & (out < 11))
    np.testing.assert_array_equal(generate(model, [4, 5, 6], 0), [4, 5, 6])


def test_bad_generate_arguments_raise_value_errors():
    model = _tiny_lm()
    with pytest.raises(ValueError, match="contains id 11, outside \\[0, 11\\)"):
        generate(model, [1, 11], 3)
    with pytest.raises(ValueError, match="contains id -1"):
        generate(model, [-1, 2], 3)
    with pytest.raises(ValueError, match="prompt_tokens is empty"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match="1D sequence.*\\(1, 2\\)"):
        generate(model, [[1, 2]], 3)
    with pytest.raises(ValueError, match="must be integers.*float"):
        generate(model, [1.5], 3)
    with pytest.raises(ValueError, match="num_tokens must be an integer >= 0, got -1"):
        generate(model, [1], -1)
    with pytest.raises(ValueError, match="temperature must be >= 0.*-0.5"):
        generate(model, [1], 3, temperature=-0.5)
    with pytest.raises(ValueError, match="top_k must be a positive integer, got 0"):
        generate(model, [1], 3, top_k=0)
    no_embedding = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="mlp")
    with pytest.raises(ValueError, match="TokenAndPositionEmbedding or a Keras Embedding.*'mlp'"):
        generate(no_embedding, [1], 3)


def _gpt_with_two_outputs(embedding_name="token_and_position"):
    """keras-io's miniature GPT shape: any embedding name, outputs [logits, x]."""
    tokens = keras.Input((6,), dtype="int32")
    x = TokenAndPositionEmbedding(vocab_size=11, sequence_length=6, embed_dim=8, name=embedding_name)(tokens)
    x = TransformerBlock(num_heads=2, intermediate_dim=16, name="block")(x)
    return keras.Model(tokens, [keras.layers.Dense(11, name="head")(x), x], name="gpt")


def test_generate_finds_the_embedding_by_type_and_reads_the_chosen_output():
    model = _gpt_with_two_outputs()
    with pytest.raises(ValueError, match="2 outputs.*output_index="):
        generate(model, [1, 2], 3)
    ids = generate(model, [1, 2], 4, temperature=0, output_index=0)
    # The same greedy ids as a naive loop over the logits output.
    expected = [1, 2]
    for _ in range(4):
        window = np.zeros((1, 6), "int32")
        window[0, : len(expected)] = expected[-6:]
        logits = keras.ops.convert_to_numpy(model(window)[0])
        expected.append(int(np.argmax(logits[0, len(expected[-6:]) - 1])))
    np.testing.assert_array_equal(ids, expected)
    model.compile(loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), None])
    np.testing.assert_array_equal(generate(model, [1, 2], 4, temperature=0), expected)  # the compiled output


def test_generate_with_a_keras_embedding_and_a_fixed_input_length():
    tokens = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(7, 4, name="tokens")(tokens)
    model = keras.Model(tokens, keras.layers.Dense(7)(x), name="bigram")
    out = generate(model, [1, 2, 3, 4, 5, 6], 3, seed=0)  # longer than the window: it slides
    assert out.shape == (9,) and np.all(out < 7)
    with pytest.raises(ValueError, match="contains id 7, outside \\[0, 7\\)"):
        generate(model, [7], 1)
    free = keras.Input((None,), dtype="int32")
    unknown_length = keras.Model(free, keras.layers.Dense(7)(keras.layers.Embedding(7, 4)(free)), name="free")
    with pytest.raises(ValueError, match="context length of model 'free'.*keras.Input"):
        generate(unknown_length, [1], 1)
