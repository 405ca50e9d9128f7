"""Transformer blocks: where the LayerNorm sits around `x = x + F(x)`.

A block has two sublayers, causal multi-head self-attention and a
feed-forward network, and wraps each one the same way. With F one sublayer
and LN a LayerNorm:

    Post-LN (Vaswani et al. 2017, "Attention Is All You Need"):
        x = LN(x + F(x))
    Pre-LN  (Xiong et al. 2020, "On Layer Normalization in the Transformer
             Architecture"; GPT-2):
        x = x + F(LN(x))
    ReZero  (Bachlechner et al. 2020, "ReZero is All You Need"):
        x = x + alpha * F(x),   alpha a trainable scalar starting at 0,
                                no LayerNorm anywhere

and, for comparison, the plain twins with exactly the same weights and no
addition: `x = LN(F(x))` (post) and `x = F(LN(x))` (pre).

Xiong et al. show that at initialisation Post-LN gives large gradients to the
parameters near the output, so it needs a learning-rate warmup, while Pre-LN
keeps an identity path from every block to the output and trains without one.
ReZero starts every block as exactly the identity.

The sublayers, for x of shape (B, T, C) with H heads of size D = C / H:

    attention:    q, k, v = split(x W_qkv + b_qkv)                 # (B, T, C) each
                  A = softmax(q k^T / sqrt(D) + causal mask)       # (B, H, T, T)
                  F(x) = concat_heads(A v) W_o + b_o               # (B, T, C)
    feed-forward: F(x) = activation(x W_1 + b_1) W_2 + b_2         # (B, T, C)

`W_o` and `W_2` write into the residual stream; GPT-2 initialises them with a
smaller standard deviation, so they have their own `output_kernel_initializer`.
"""

import keras
from keras import layers, ops

from residual_keras._checks import check_choice, check_positive_int
from residual_keras._initializers import clone_initializer

NORM_POSITIONS = ("pre", "post")
RESIDUALS = (True, False, "rezero")

# Added to the attention scores of future positions. Large enough that
# exp(score - max) is exactly 0 in float32, finite so that no NaN can appear.
_MASKED_SCORE = -1e9


def check_residual(residual):
    """Raises `ValueError` unless `residual` is True, False or "rezero"."""
    # `1 in (True, False)` is True in Python: compare by identity for the bools.
    if residual is True or residual is False or residual == "rezero":
        return residual
    raise ValueError(
        f"Unknown residual={residual!r}. Accepted: True, False, 'rezero'."
    )


def check_heads(embed_dim, num_heads):
    """Raises `ValueError` unless `embed_dim` splits evenly into `num_heads` heads."""
    if embed_dim % num_heads:
        raise ValueError(
            f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}: "
            "every head needs embed_dim / num_heads features."
        )


@keras.saving.register_keras_serializable(package="residual_keras")
class TransformerBlock(layers.Layer):
    """A Transformer block, Pre-LN, Post-LN or ReZero, or its plain twin.

    For each of its two sublayers F (causal self-attention, then the
    feed-forward network):

    - `norm_position="pre"`:  `x = x + F(LN(x))`
    - `norm_position="post"`: `x = LN(x + F(x))`
    - `residual=False`: the plain twin, same weights, no addition:
      `x = F(LN(x))` (pre) or `x = LN(F(x))` (post)
    - `residual="rezero"`: `x = x + alpha * F(x)` with no LayerNorm at all.
      One trainable scalar alpha per block, initialised to 0 and shared by the
      two sublayers, as in the official ReZero code (`resweight` of
      `RZTXEncoderLayer`); at initialisation the block is exactly the identity.
      `norm_position` is ignored.

    `attention_branch(x)` and `feedforward_branch(x)` return what each sublayer
    writes into the stream: `F(LN(x))` for pre (residual or plain), `F(x)` for
    post before the addition and LN (residual or plain), `alpha * F(x)` for
    ReZero. They do not depend on `residual`, so a block and its plain twin
    with the same weights have the same branches. `call` is composed from them.

    Dropout (`dropout > 0`, training only) is applied to the attention
    probabilities and to the output of each sublayer before it joins the
    stream, as in GPT-2 and nanoGPT.

    Under `mixed_bfloat16` the attention softmax and the LayerNorms compute in
    float32; matrix products run in bfloat16; variables (alpha included) stay
    float32.

    Args:
        num_heads: int. Number of attention heads; must divide the input's
            last dimension (embed_dim).
        intermediate_dim: int or None. Width of the feed-forward network's
            hidden layer. Default None: 4 * embed_dim.
        norm_position: "pre" or "post". Where the LayerNorm sits. Default "pre".
        residual: True (add the input back), False (plain twin) or "rezero"
            (`x + alpha * F(x)`, no LayerNorm). Default True.
        dropout: float in [0, 1). Attention and residual dropout rate.
            Default 0.
        activation: activation of the feed-forward hidden layer. Default
            "gelu" (exact, as PyTorch's `nn.GELU()` in nanoGPT).
        layer_norm_epsilon: float. Epsilon of the LayerNorms. Default 1e-5.
        causal: bool. Position t attends only to positions <= t. Default True.
        kernel_initializer: initializer of the query/key/value kernel and of
            the feed-forward network's first kernel. Default "glorot_uniform".
        output_kernel_initializer: initializer of the two kernels that write
            into the residual stream (attention output projection and the
            feed-forward network's second kernel). Default "glorot_uniform".
        bias_initializer: initializer of all dense biases. Default "zeros".
        **kwargs: standard `keras.layers.Layer` arguments.

    Example:
        >>> x = keras.random.normal((2, 8, 16))
        >>> TransformerBlock(4)(x).shape
        (2, 8, 16)

    References:
        Vaswani et al. 2017, arXiv 1706.03762 (Post-LN).
        Xiong et al. 2020, arXiv 2002.04745 (Pre-LN).
        Bachlechner et al. 2020, arXiv 2003.04887 (ReZero).
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim=None,
        *,
        norm_position="pre",
        residual=True,
        dropout=0.0,
        activation="gelu",
        layer_norm_epsilon=1e-5,
        causal=True,
        kernel_initializer="glorot_uniform",
        output_kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        if intermediate_dim is not None:
            check_positive_int("intermediate_dim", intermediate_dim)
        self.intermediate_dim = intermediate_dim
        self.norm_position = check_choice("norm_position", norm_position, NORM_POSITIONS)
        self.residual = check_residual(residual)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
        self.dropout = float(dropout)
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.causal = bool(causal)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.output_kernel_initializer = keras.initializers.get(output_kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    @property
    def uses_layer_norm(self):
        """False for ReZero, which has no LayerNorm; True otherwise."""
        return self.residual != "rezero"

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"{self.__class__.__name__} expects input (batch, sequence, "
                f"embed_dim) with a known embed_dim, got shape {tuple(input_shape)}."
            )
        embed_dim = input_shape[-1]
        check_heads(embed_dim, self.num_heads)
        self.embed_dim = embed_dim
        self.head_dim = embed_dim // self.num_heads
        hidden_dim = self.intermediate_dim or 4 * embed_dim
        hidden_shape = (*input_shape[:-1], hidden_dim)

        def dense(name, units, shape, initializer, activation=None):
            layer = layers.Dense(
                units,
                activation=activation,
                kernel_initializer=clone_initializer(initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(shape)
            return layer

        def layer_norm(name):
            layer = layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )
            layer.build(input_shape)
            return layer

        def dropout(name):
            return layers.Dropout(self.dropout, dtype=self.dtype_policy, name=name)

        self.attention_norm = None
        self.feedforward_norm = None
        if self.uses_layer_norm:
            self.attention_norm = layer_norm("attention_norm")
            self.feedforward_norm = layer_norm("feedforward_norm")

        # One fused projection to queries, keys and values: (B, T, C) -> (B, T, 3C).
        self.attention_qkv = dense(
            "attention_qkv", 3 * embed_dim, input_shape, self.kernel_initializer
        )
        self.attention_output = dense(
            "attention_output", embed_dim, input_shape, self.output_kernel_initializer
        )
        self.attention_dropout = dropout("attention_dropout")
        self.attention_output_dropout = dropout("attention_output_dropout")

        self.feedforward_intermediate = dense(
            "feedforward_intermediate",
            hidden_dim,
            input_shape,
            self.kernel_initializer,
            activation=self.activation,
        )
        self.feedforward_output = dense(
            "feedforward_output", embed_dim, hidden_shape, self.output_kernel_initializer
        )
        self.feedforward_output_dropout = dropout("feedforward_output_dropout")

        self.rezero_alpha = None
        if self.residual == "rezero":
            self.rezero_alpha = self.add_weight(
                name="rezero_alpha", shape=(), initializer="zeros", trainable=True
            )

    def _self_attention(self, x, training=None):
        """Multi-head (causal) self-attention F(x), without any norm or scalar."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        heads, head_dim = self.num_heads, self.head_dim

        query, key, value = ops.split(self.attention_qkv(x), 3, axis=-1)  # (B, T, C) each
        query = ops.reshape(query, (batch, length, heads, head_dim))  # (B, T, H, D)
        key = ops.reshape(key, (batch, length, heads, head_dim))
        value = ops.reshape(value, (batch, length, heads, head_dim))

        query = query * ops.cast(head_dim**-0.5, query.dtype)
        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)  # (B, H, T, T)
        scores = ops.cast(scores, "float32")  # softmax in float32
        if self.causal:
            positions = ops.arange(length)
            allowed = positions[:, None] >= positions[None, :]  # (T, T), key <= query
            scores = ops.where(allowed, scores, _MASKED_SCORE)
        weights = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        weights = self.attention_dropout(weights, training=training)

        out = ops.einsum("bhqk,bkhd->bqhd", weights, value)  # (B, T, H, D)
        out = ops.reshape(out, (batch, length, self.embed_dim))  # (B, T, C)
        out = self.attention_output(out)
        return self.attention_output_dropout(out, training=training)

    def _feedforward(self, x, training=None):
        """The position-wise feed-forward network F(x)."""
        out = self.feedforward_output(self.feedforward_intermediate(x))
        return self.feedforward_output_dropout(out, training=training)

    def _branch(self, sublayer, norm, x, training):
        if self.residual == "rezero":
            alpha = ops.cast(self.rezero_alpha, x.dtype)
            return alpha * sublayer(x, training=training)  # alpha * F(x)
        if self.norm_position == "pre":
            return sublayer(norm(x), training=training)  # F(LN(x))
        return sublayer(x, training=training)  # F(x), LN comes after the add

    def attention_branch(self, x, training=None):
        """What the attention sublayer writes into the stream.

        `F(LN(x))` (pre), `F(x)` (post, before the addition and LN) or
        `alpha * F(x)` (ReZero), for a built block and x of shape (B, T, C).
        """
        return self._branch(self._self_attention, self.attention_norm, x, training)

    def feedforward_branch(self, x, training=None):
        """What the feed-forward sublayer writes into the stream (as `attention_branch`)."""
        return self._branch(self._feedforward, self.feedforward_norm, x, training)

    def join(self, x, update, norm):
        """The stream after a sublayer wrote `update` into it.

        `x + update` (Pre-LN, ReZero), `LN(x + update)` (Post-LN, with `norm`
        the sublayer's LayerNorm); the plain twins keep only the update:
        `update` (pre) or `LN(update)` (post).
        """
        x = update if self.residual is False else x + update
        if self.norm_position == "post" and self.uses_layer_norm:
            x = norm(x)
        return x

    def call(self, inputs, training=None):
        x = inputs  # (B, T, C)
        attention = self.attention_branch(x, training=training)  # what attention writes
        x = self.join(x, attention, self.attention_norm)  # Pre-LN: x + F(LN(x)); Post-LN: LN(x + F(x))
        feedforward = self.feedforward_branch(x, training=training)
        return self.join(x, feedforward, self.feedforward_norm)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "norm_position": self.norm_position,
                "residual": self.residual,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "causal": self.causal,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "output_kernel_initializer": keras.initializers.serialize(
                    self.output_kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
