"""Sampling text from a causal language model, one token at a time.

Autoregressive generation (as in GPT-2 and nanoGPT's `generate`): given the
tokens so far x_1..x_n, the model gives logits z for x_{n+1}; the next token is

    x_{n+1} ~ softmax(z / temperature), restricted to the top_k largest logits,

or `argmax z` when greedy (temperature 0 or top_k 1). The model sees at most
its `sequence_length` last tokens (the context window slides).

Every step runs the model on a window of one fixed shape, (1, sequence_length),
with the tokens at the start and zeros after them, and reads the logits at the
last real token. The model is causal, so the padding after that position
cannot change them, and because the shape never changes the model's predict
function is traced (and, if the model was compiled with `jit_compile=True`,
XLA-compiled) once instead of once per length (on TensorFlow and JAX; PyTorch
runs it eagerly).

The loop is written here, without a key/value cache: every step recomputes
the whole window, fine for the few hundred characters the tracks sample, and
the sliding window stays readable (keras-hub's sampler loop fills a prompt of
fixed length and does not slide). How one token is chosen from the logits can
come from keras-hub (`pip install keras-hub`): pass one of
`keras_hub.samplers` (`GreedySampler`, `TopKSampler`, `TopPSampler`,
`RandomSampler`) as `sampler=`, and the loop asks it for each token
(`compute_probabilities`, then `get_next_token`). keras-hub's greedy sampler
gives the same ids as `temperature=0` (tested).
"""

from typing import Optional, Protocol, Sequence

import keras
import numpy as np

from residual_keras.checks import check_positive_int
from residual_keras.diagnostics._block_search import all_layers
from residual_keras.diagnostics._losses import choose_output
from residual_keras.embedding import TokenAndPositionEmbedding


class TokenSampler(Protocol):
    """What `generate(sampler=...)` asks of a sampler: keras-hub's `keras_hub.samplers.Sampler`."""

    def compute_probabilities(self, logits): ...

    def get_next_token(self, probabilities): ...


def _window_and_vocabulary(model):
    """(context length, vocabulary size) from the model's embedding, found by its type.

    A `TokenAndPositionEmbedding` anywhere in the model knows both. Otherwise
    the first Keras `Embedding` (the token embedding) gives the vocabulary and
    the model's fixed input length the context.
    """
    found = all_layers(model)
    ours = [layer for layer in found if isinstance(layer, TokenAndPositionEmbedding)]
    if ours:
        return ours[0].sequence_length, ours[0].vocab_size
    embeddings = [layer for layer in found if isinstance(layer, keras.layers.Embedding)]
    if not embeddings:
        raise ValueError(
            f"generate needs a model with a TokenAndPositionEmbedding or a Keras Embedding "
            f"layer (token ids in, as transformer_lm builds); model {model.name!r} has none."
        )
    try:
        length = model.inputs[0].shape[1]
    except (AttributeError, IndexError, TypeError, ValueError):
        length = None
    if not isinstance(length, int):
        raise ValueError(
            f"generate cannot tell the context length of model {model.name!r}: it has no "
            "TokenAndPositionEmbedding and no fixed input length. Build it with "
            "keras.Input(shape=(sequence_length,), dtype='int32')."
        )
    return length, embeddings[0].input_dim


def _check_prompt(prompt_tokens, vocab_size):
    prompt = np.asarray(prompt_tokens)
    if prompt.ndim != 1:
        raise ValueError(
            f"prompt_tokens must be a 1D sequence of token ids, got shape {prompt.shape}."
        )
    if prompt.size == 0:
        raise ValueError("prompt_tokens is empty: give at least one token id.")
    if not np.issubdtype(prompt.dtype, np.integer):
        raise ValueError(f"prompt_tokens must be integers, got dtype {prompt.dtype}.")
    bad = prompt[(prompt < 0) | (prompt >= vocab_size)]
    if bad.size:
        raise ValueError(
            f"prompt_tokens contains id {int(bad[0])}, outside [0, {vocab_size}) "
            f"(the model's vocab_size is {vocab_size})."
        )
    return prompt.astype("int32")


def _next_token(logits, temperature, top_k, rng):
    """Samples one id from one row of logits (vocab_size,)."""
    if temperature == 0 or top_k == 1:
        return int(np.argmax(logits))
    logits = logits.astype("float64") / temperature
    if top_k is not None and top_k < logits.size:
        kth_largest = np.partition(logits, -top_k)[-top_k]
        logits = np.where(logits < kth_largest, -np.inf, logits)
    probs = np.exp(logits - logits.max())
    return int(rng.choice(logits.size, p=probs / probs.sum()))


def generate(
    model: keras.Model,
    prompt_tokens: Sequence[int],
    num_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: Optional[int] = None,
    seed: Optional[int] = None,
    output_index: Optional[int] = None,
    sampler: Optional[TokenSampler] = None,
) -> np.ndarray:
    """Continues `prompt_tokens` with `num_tokens` ids sampled from `model`.

    Args:
        model: a causal language model from int ids (B, T) to logits
            (B, T, vocab_size), such as `transformer_lm`'s, with a
            `TokenAndPositionEmbedding` (at any depth, any name; it gives the
            context length and the vocabulary), or a Keras `Embedding` and a
            fixed input length. Runs in inference mode (no dropout).
        prompt_tokens: 1D sequence of int ids in [0, vocab_size), at least one.
            It may be longer than `sequence_length`: only its last
            `sequence_length` ids are seen.
        num_tokens: int >= 0. How many ids to add.
        temperature: float >= 0. Divides the logits; 0 means greedy (argmax).
            Default 1.0.
        top_k: int >= 1 or None. Sample only among the k most likely ids
            (k larger than the vocabulary means all of them); 1 means greedy.
            Default None (all ids).
        seed: int or None. Seed of the sampler (a NumPy generator): the same
            seed, model and prompt give the same ids. Default None.
        output_index: int, for a model with several outputs (a GPT that
            returns `[logits, x]`): the one holding the logits. Default None:
            the only output, or the one `model.compile` gave a loss to.
        sampler: a `keras_hub.samplers.Sampler` (e.g. `TopPSampler(p=0.9,
            seed=0)`) that chooses each token instead of `temperature` and
            `top_k` (leave those at their defaults; its own seed applies).
            Default None: the sampling described above.

    Returns:
        A 1D NumPy int32 array: the prompt followed by `num_tokens` new ids.

    Example:
        >>> model = transformer_lm(65, 64, 2)
        >>> generate(model, [1, 2, 3], 5, seed=0).shape
        (8,)
    """
    window, vocab_size = _window_and_vocabulary(model)
    tokens = _check_prompt(prompt_tokens, vocab_size)
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, (int, np.integer)) or (
        num_tokens < 0
    ):
        raise ValueError(f"num_tokens must be an integer >= 0, got {num_tokens!r}.")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature!r}.")
    if top_k is not None:
        check_positive_int("top_k", top_k)
    if sampler is not None:
        if temperature != 1.0 or top_k is not None or seed is not None:
            raise ValueError(
                f"sampler={type(sampler).__name__} chooses the tokens itself: leave temperature, top_k "
                f"and seed at their defaults (got temperature={temperature!r}, top_k={top_k!r}, "
                f"seed={seed!r}), and give the sampler its own (e.g. TopKSampler(k=5, seed=0))."
            )
        if not (callable(getattr(sampler, "compute_probabilities", None))
                and callable(getattr(sampler, "get_next_token", None))):
            raise TypeError(f"sampler must be a keras_hub.samplers.Sampler, got {sampler!r}.")
    rng = np.random.default_rng(seed)

    tokens = list(tokens)
    batch = np.zeros((1, window), dtype="int32")  # one fixed shape for every step
    for _ in range(num_tokens):
        context = tokens[-window:]  # slide: keep the last `window` ids
        batch[0, : len(context)] = context
        batch[0, len(context) :] = 0  # padding after the last token: never attended to
        outputs = model.predict_on_batch(batch)
        logits = np.asarray(choose_output(model, outputs, output_index)[0])  # (1, window, vocab_size)
        last = logits[0, len(context) - 1]  # (vocab_size,): the logits of the next id
        if sampler is None:
            tokens.append(_next_token(last, temperature, top_k, rng))
        else:
            probabilities = sampler.compute_probabilities(keras.ops.convert_to_tensor(last[None]))
            tokens.append(int(keras.ops.convert_to_numpy(sampler.get_next_token(probabilities))[0]))
    return np.asarray(tokens, dtype="int32")
