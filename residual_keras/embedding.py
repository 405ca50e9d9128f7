"""Token plus position embedding: the residual stream's starting value.

A Transformer's stream starts as `x_0[t] = E_token[id_t] + E_position[t]`
(Vaswani et al. 2017, section 3.4 and 3.5, here with learned positions as in
GPT and GPT-2). Every block then adds to it, `x_l = x_{l-1} + F_l(...)`, so
this sum is what the identity paths carry all the way to the output.
"""

from typing import Any, Optional

import keras
from keras import layers, ops

from residual_keras.checks import check_positive_int
from residual_keras._initializers import clone_initializer
from residual_keras._types import ArrayLike, InitializerLike
from residual_keras._spellings import EMBEDDING, refuse_other_spellings
from residual_keras._sublayers import SublayersShown


def _required(name, value):
    if value is None:
        raise TypeError(f"TokenAndPositionEmbedding needs {name}=<int>.")
    return value


@keras.saving.register_keras_serializable(package="residual_keras")
class TokenAndPositionEmbedding(SublayersShown, layers.Layer):
    """Learned token embedding plus learned position embedding.

    `x[b, t] = token_embedding[ids[b, t]] + position_embedding[t]` for integer
    ids of shape (batch, T), giving (batch, T, embed_dim). T may be anything
    from 1 to `sequence_length`; positions always start at 0. A longer input
    raises `ValueError` when its length is known when the layer is called
    (always in eager calls and under XLA); an input of unknown static length
    that turns out longer fails inside the position lookup instead.

    Token ids outside [0, vocab_size) raise `ValueError` in every eager call,
    on every backend. Inside a traced function there are no values to check,
    and the backend's lookup decides (measured with Keras 3.15 on a CPU):
    TensorFlow raises `InvalidArgumentError` without XLA but, under XLA,
    clamps the id and returns a finite, wrong row; JAX returns NaN; PyTorch
    runs eagerly, so the check applies. Check ids in the data pipeline when
    training under `jit_compile=True`.

    Arguments are keyword-only: keras-io's example class takes `(maxlen,
    vocab_size, embed_dim)` and keras-hub's `(vocabulary_size,
    sequence_length, embedding_dim)`, so a positional order would silently
    swap sizes; positional arguments are refused with the translation.
    Other libraries' names (keras-hub's `vocabulary_size`, `embedding_dim`;
    keras-io's `maxlen`) are refused with ours.

    Args:
        vocab_size: int. Number of token ids; ids must be in [0, vocab_size).
        sequence_length: int. Longest input, the number of learned positions.
        embed_dim: int. Width of the embeddings (the residual stream).
        embeddings_initializer: initializer of both tables. Default
            "uniform" (Keras' `Embedding` default); `transformer_lm` uses
            GPT-2's N(0, 0.02).
        mask_zero: bool. Token id 0 is padding: the layer outputs a Keras mask
            (False there) that `TransformerBlock` uses as its padding mask.
            Default False.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: int tensor (batch, T) of token ids in [0, vocab_size), with
            T <= sequence_length.

    Returns:
        float tensor (batch, T, embed_dim), and a Keras mask (batch, T)
        where `mask_zero=True`.

    Example:
        >>> ids = keras.ops.convert_to_tensor([[3, 1, 4, 1]])
        >>> TokenAndPositionEmbedding(vocab_size=10, sequence_length=8, embed_dim=16)(ids).shape
        (1, 4, 16)
    """

    def __init__(
        self,
        *args,
        vocab_size: Optional[int] = None,
        sequence_length: Optional[int] = None,
        embed_dim: Optional[int] = None,
        embeddings_initializer: InitializerLike = "uniform",
        mask_zero: bool = False,
        **kwargs,
    ) -> None:
        if args:
            raise TypeError(
                "TokenAndPositionEmbedding takes keyword arguments only: vocab_size=, "
                "sequence_length=, embed_dim=. keras-io's TokenAndPositionEmbedding(maxlen, "
                "vocab_size, embed_dim) is TokenAndPositionEmbedding(vocab_size=vocab_size, "
                "sequence_length=maxlen, embed_dim=embed_dim), and keras-hub's "
                "(vocabulary_size, sequence_length, embedding_dim) is (vocab_size=, sequence_length=, "
                "embed_dim=); got "
                f"{len(args)} positional argument(s) {args!r}."
            )
        refuse_other_spellings(self.__class__.__name__, kwargs, EMBEDDING)
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", _required("vocab_size", vocab_size))
        self.sequence_length = check_positive_int("sequence_length", sequence_length)
        self.embed_dim = check_positive_int("embed_dim", _required("embed_dim", embed_dim))
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.mask_zero = bool(mask_zero)

    def _check_length(self, shape):
        if len(shape) != 2:
            raise ValueError(
                f"{self.__class__.__name__} expects token ids of shape (batch, "
                f"sequence), got shape {tuple(shape)}."
            )
        length = shape[1]
        if length is not None and not isinstance(length, int):
            length = None  # a dynamic length: checked by the lookup at run time
        if length is not None and length > self.sequence_length:
            raise ValueError(
                f"Input length {length} is longer than sequence_length="
                f"{self.sequence_length} (the number of learned positions)."
            )

    def build(self, input_shape):
        self._check_length(input_shape)

        def embedding(name, rows):
            layer = layers.Embedding(
                rows,
                self.embed_dim,
                embeddings_initializer=clone_initializer(self.embeddings_initializer),
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build((None,))
            return layer

        self.token_embedding = embedding("token_embedding", self.vocab_size)
        self.position_embedding = embedding("position_embedding", self.sequence_length)

    def _check_ids(self, inputs):
        """`ValueError` for an id outside [0, vocab_size), where the ids have values (eager calls).

        Traced calls (a `tf.function`, `jax.jit`, XLA, a symbolic build)
        have no values to read; there the backend's lookup decides (see the
        class docstring).
        """
        try:
            ids = ops.convert_to_numpy(inputs)
        except Exception:  # noqa: BLE001  (each backend refuses a traced tensor with its own error)
            return
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            bad = ids[(ids < 0) | (ids >= self.vocab_size)]
            raise ValueError(
                f"{self.name}: token id {int(bad.flat[0])} is outside [0, {self.vocab_size}) "
                f"(vocab_size={self.vocab_size}); {bad.size} of {ids.size} ids are out of range."
            )

    def call(self, inputs: ArrayLike) -> Any:
        self._check_length(tuple(inputs.shape))
        self._check_ids(inputs)
        length = ops.shape(inputs)[1]
        tokens = self.token_embedding(inputs)  # (B, T, C)
        positions = self.position_embedding(ops.arange(length))  # (T, C)
        return tokens + positions[None]  # (B, T, C)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.embed_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "sequence_length": self.sequence_length,
                "embed_dim": self.embed_dim,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
                "mask_zero": self.mask_zero,
            }
        )
        return config
