"""Token plus position embedding: the residual stream's starting value.

A Transformer's stream starts as `x_0[t] = E_token[id_t] + E_position[t]`
(Vaswani et al. 2017, section 3.4 and 3.5, here with learned positions as in
GPT and GPT-2). Every block then adds to it, `x_l = x_{l-1} + F_l(...)`, so
this sum is what the identity paths carry all the way to the output.
"""

import keras
from keras import layers, ops

from residual_keras._checks import check_positive_int
from residual_keras._initializers import clone_initializer


@keras.saving.register_keras_serializable(package="residual_keras")
class TokenAndPositionEmbedding(layers.Layer):
    """Learned token embedding plus learned position embedding.

    `x[b, t] = token_embedding[ids[b, t]] + position_embedding[t]` for integer
    ids of shape (batch, T), giving (batch, T, embed_dim). T may be anything
    from 1 to `sequence_length`; positions always start at 0. A longer input
    raises `ValueError` when its length is known when the layer is called
    (always in eager calls and under XLA); an input of unknown static length
    that turns out longer fails inside the position lookup instead.

    Args:
        vocab_size: int. Number of token ids; ids must be in [0, vocab_size).
        sequence_length: int. Longest input, the number of learned positions.
        embed_dim: int. Width of the embeddings (the residual stream).
        embeddings_initializer: initializer of both tables. Default
            "uniform" (Keras' `Embedding` default); `transformer_lm` uses
            GPT-2's N(0, 0.02).
        **kwargs: standard `keras.layers.Layer` arguments.

    Example:
        >>> ids = keras.ops.convert_to_tensor([[3, 1, 4, 1]])
        >>> TokenAndPositionEmbedding(10, 8, 16)(ids).shape
        (1, 4, 16)
    """

    def __init__(
        self,
        vocab_size,
        sequence_length,
        embed_dim,
        *,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.sequence_length = check_positive_int("sequence_length", sequence_length)
        self.embed_dim = check_positive_int("embed_dim", embed_dim)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

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

    def call(self, inputs):
        self._check_length(tuple(inputs.shape))
        length = ops.shape(inputs)[1]
        tokens = self.token_embedding(inputs)  # (B, T, C)
        positions = self.position_embedding(ops.arange(length))  # (T, C)
        return tokens + positions[None]  # (B, T, C)

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
            }
        )
        return config
