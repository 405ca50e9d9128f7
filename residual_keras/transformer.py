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

The attention itself is in attention.py: written out (the reference path,
which returns the probabilities) or, with `fused_attention=True`, through
`keras.ops.dot_product_attention` (fused by each backend; needs `dropout=0`).
"""

import functools
from typing import Any, Optional

import keras
from keras import layers, ops

from residual_keras.checks import check_bool, check_positive_int
from residual_keras._initializers import clone_initializer
from residual_keras._transformer_args import check_norm_position, refuse_positional, resolve_residual
from residual_keras._types import Activation, ArrayLike, InitializerLike, RegularizerLike
from residual_keras.attention import allowed_keys, check_heads, fused_attention, reference_attention
from residual_keras.steps import BlockLayer, ResidualStep, identity
from residual_keras._spellings import TRANSFORMER_BLOCK, TRANSFORMER_BLOCK_CALL, refuse_other_spellings


@keras.saving.register_keras_serializable(package="residual_keras")
class TransformerBlock(BlockLayer):
    """A Transformer block, Pre-LN, Post-LN or ReZero, or its plain twin.

    For each of its two sublayers F (causal self-attention, then the
    feed-forward network):

    - `norm_position="pre"`:  `x = x + F(LN(x))`
    - `norm_position="post"`: `x = LN(x + F(x))`
    - `residual=False`: the plain twin, same weights, no addition:
      `x = F(LN(x))` (pre) or `x = LN(F(x))` (post)
    - `rezero=True`: `x = x + alpha * F(x)` with no LayerNorm at all.
      One trainable scalar alpha per block, initialised to 0 and shared by the
      two sublayers, as in the official ReZero code (`resweight` of
      `RZTXEncoderLayer`); at initialisation the block is exactly the identity.
      `norm_position` is ignored.

    `call` writes the equations above line by line: for each sublayer, the
    LayerNorm before it (Pre-LN), the addition (with ReZero's alpha), the
    LayerNorm after the addition (Post-LN). `attention_branch(x)` and
    `feedforward_branch(x)` return what each sublayer writes into the stream:
    `F(LN(x))` for pre, `F(x)` for post (before the addition and LN),
    `alpha * F(x)` for ReZero; they do not depend on `residual`, so a block
    and its plain twin with the same weights have the same branches.
    `residual_steps` lists the two additions for the instruments, each
    `post(x + branch(x))` with `post` the sublayer's LayerNorm for Post-LN.

    Dropout (`dropout > 0`, training only) is applied to the attention
    probabilities and to the output of each sublayer before it joins the
    stream, as in GPT-2 and nanoGPT.

    Masks, as keras-hub's `TransformerDecoder`: the causal mask is always
    applied when `causal=True`; `padding_mask` (B, T), 1 for real tokens,
    and `attention_mask` (B, T, T) can be passed when calling, and a Keras
    mask from `Embedding(mask_zero=True)` (or `TokenAndPositionEmbedding(
    mask_zero=True)`) is used as the padding mask and passed on.

    Under `mixed_bfloat16` the attention softmax and the LayerNorms compute in
    float32; matrix products run in bfloat16; variables (alpha included) stay
    float32.

    Arguments are keyword-only: keras-hub's `TransformerDecoder` takes
    `(intermediate_dim, num_heads)` positionally and keras-io's examples
    `(embed_dim, num_heads, ff_dim)`, so a positional order would be a trap;
    positional arguments are refused with the translation.

    Args:
        num_heads: int. Number of attention heads; must divide the input's
            last dimension (embed_dim) unless `key_dim` is given; heads must
            be at least `MIN_HEAD_DIM` wide.
        intermediate_dim: int or None. Width of the feed-forward network's
            hidden layer. Default None: 4 * embed_dim.
        norm_position: "pre" or "post". Where the LayerNorm sits. Default "pre"
            (keras-hub's `normalize_first=True`, a name refused here).
        residual: bool. Add the input back (True) or the plain twin (False).
            Default True.
        rezero: bool. `x + alpha * F(x)`, no LayerNorm. Default False.
        dropout: float in [0, 1). Attention and residual dropout rate.
            Default 0.
        activation: activation of the feed-forward hidden layer. Default
            "gelu" (exact, as PyTorch's `nn.GELU()` in nanoGPT; keras-hub's
            default is "relu").
        layer_norm_epsilon: float. Epsilon of the LayerNorms. Default 1e-5.
        causal: bool. Position t attends only to positions <= t. Default True.
        key_dim: int or None. Width of each attention head; default
            embed_dim // num_heads.
        kernel_initializer: initializer of the query/key/value kernel and of
            the feed-forward network's first kernel. Default "glorot_uniform".
        output_kernel_initializer: initializer of the two kernels that write
            into the residual stream (attention output projection and the
            feed-forward network's second kernel). Default "glorot_uniform".
        bias_initializer: initializer of all dense biases. Default "zeros".
        kernel_regularizer, bias_regularizer: optional regularizers of every
            dense kernel / bias.
        fused_attention: bool. Compute the attention with
            `keras.ops.dot_product_attention` (fused on GPUs) instead of the
            written-out reference path; the same numbers within float
            tolerance. Needs `dropout=0`. `return_attention_scores=True`
            always takes the reference path (the fused op does not return
            the probabilities). On PyTorch the fused op's gradient is wrong
            for an example whose padding mask leaves a query with nothing to
            attend to (left padding): measured in tests/library/test_transformer.py;
            keep the reference path there. Default False.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor (batch, T, C), the residual stream.
        training: bool or None. Dropout is applied when True. Default None:
            Keras' learning phase.
        padding_mask: bool or int tensor (batch, T), or None. False (0) marks
            padding: no query attends to it. A Keras mask from
            `TokenAndPositionEmbedding(mask_zero=True)` is used when this is
            None. Default None.
        attention_mask: bool or int tensor (batch, T, T), or None. Which key
            each query may attend to, combined with the causal mask (when
            `causal=True`).
            Default None.
        return_attention_scores: bool. Also return the attention
            probabilities (batch, num_heads, T, T). Default False.

    Returns:
        float tensor (batch, T, C), and the attention probabilities when
        `return_attention_scores=True`.

    Example:
        >>> x = keras.random.normal((2, 8, 16))
        >>> TransformerBlock(num_heads=4)(x).shape
        (2, 8, 16)

    References:
        Vaswani et al. 2017, arXiv 1706.03762 (Post-LN).
        Xiong et al. 2020, arXiv 2002.04745 (Pre-LN).
        Bachlechner et al. 2020, arXiv 2003.04887 (ReZero).
    """

    def __init__(
        self,
        *args,
        num_heads: Optional[int] = None,
        intermediate_dim: Optional[int] = None,
        norm_position: str = "pre",
        residual: bool = True,
        rezero: bool = False,
        dropout: float = 0.0,
        activation: Activation = "gelu",
        layer_norm_epsilon: float = 1e-5,
        causal: bool = True,
        key_dim: Optional[int] = None,
        kernel_initializer: InitializerLike = "glorot_uniform",
        output_kernel_initializer: InitializerLike = "glorot_uniform",
        bias_initializer: InitializerLike = "zeros",
        kernel_regularizer: RegularizerLike = None,
        bias_regularizer: RegularizerLike = None,
        fused_attention: bool = False,
        **kwargs,
    ) -> None:
        refuse_positional(args)
        refuse_other_spellings(self.__class__.__name__, kwargs, TRANSFORMER_BLOCK)
        super().__init__(**kwargs)
        if num_heads is None:
            raise TypeError("TransformerBlock needs num_heads=<int>.")
        self.num_heads = check_positive_int("num_heads", num_heads)
        if intermediate_dim is not None:
            check_positive_int("intermediate_dim", intermediate_dim)
        self.intermediate_dim = intermediate_dim
        if key_dim is not None:
            check_positive_int("key_dim", key_dim)
        self.key_dim = key_dim
        self.norm_position = check_norm_position(norm_position)
        self.residual, self.rezero = resolve_residual(residual, rezero)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
        self.dropout = float(dropout)
        self.fused_attention = check_bool("fused_attention", fused_attention)
        if self.fused_attention and self.dropout:
            raise ValueError(
                f"fused_attention=True needs dropout=0 (got dropout={dropout!r}): "
                "keras.ops.dot_product_attention has no dropout on the attention probabilities. "
                "Use the reference path (fused_attention=False) to train with dropout."
            )
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.causal = bool(causal)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.output_kernel_initializer = keras.initializers.get(output_kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"{self.__class__.__name__} expects input (batch, sequence, "
                f"embed_dim) with a known embed_dim, got shape {tuple(input_shape)}."
            )
        embed_dim = input_shape[-1]
        check_heads(embed_dim, self.num_heads, self.key_dim)
        self.embed_dim = embed_dim
        self.head_dim = self.key_dim or embed_dim // self.num_heads
        attention_dim = self.num_heads * self.head_dim
        hidden_dim = self.intermediate_dim or 4 * embed_dim
        hidden_shape = (*input_shape[:-1], hidden_dim)

        def dense(name, units, shape, initializer, activation=None):
            layer = layers.Dense(
                units,
                activation=activation,
                kernel_initializer=clone_initializer(initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                kernel_regularizer=self.kernel_regularizer,
                bias_regularizer=self.bias_regularizer,
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
        if not self.rezero:  # ReZero has no LayerNorm
            self.attention_norm = layer_norm("attention_norm")
            self.feedforward_norm = layer_norm("feedforward_norm")

        # One fused projection to queries, keys and values: (B, T, C) -> (B, T, 3 H D).
        self.attention_qkv = dense(
            "attention_qkv", 3 * attention_dim, input_shape, self.kernel_initializer
        )
        self.attention_output = dense(
            "attention_output", embed_dim, (*input_shape[:-1], attention_dim), self.output_kernel_initializer
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
        if self.rezero:
            self.rezero_alpha = self.add_weight(
                name="rezero_alpha", shape=(), initializer="zeros", trainable=True
            )

    def _self_attention(self, x, training=None, padding_mask=None, attention_mask=None, mask=None,
                        need_scores=False):
        """Multi-head self-attention F(x), no norm, no scalar: (output, the attention probabilities or None).

        The masks as in `call`; `need_scores` takes the reference path, which
        alone returns the probabilities.
        """
        if padding_mask is None and mask is not None:
            padding_mask = mask  # a Keras mask from Embedding(mask_zero=True)
        only_causal = padding_mask is None and attention_mask is None
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        heads, head_dim = self.num_heads, self.head_dim
        allowed = allowed_keys(length, self.causal, padding_mask, attention_mask)  # (B or 1, T, T), or None

        query, key, value = ops.split(self.attention_qkv(x), 3, axis=-1)  # (B, T, H D) each
        query = ops.reshape(query, (batch, length, heads, head_dim))  # (B, T, H, D)
        key = ops.reshape(key, (batch, length, heads, head_dim))
        value = ops.reshape(value, (batch, length, heads, head_dim))

        if self.fused_attention and not need_scores:
            out, weights = fused_attention(query, key, value, allowed, only_causal and self.causal), None
        else:
            out, weights = reference_attention(query, key, value, allowed, self.attention_dropout, training)
        out = ops.reshape(out, (batch, length, heads * head_dim))  # (B, T, H D)
        out = self.attention_output(out)  # (B, T, C)
        return self.attention_output_dropout(out, training=training), weights

    def _feedforward(self, x, training=None):
        """The position-wise feed-forward network F(x)."""
        out = self.feedforward_output(self.feedforward_intermediate(x))
        return self.feedforward_output_dropout(out, training=training)

    def _rezero(self, update):
        """ReZero's `alpha * F(x)` (alpha starts at 0); `F(x)` itself in a block without ReZero."""
        return ops.cast(self.rezero_alpha, update.dtype) * update if self.rezero else update

    def call(self, inputs: ArrayLike, training: Optional[bool] = None, padding_mask: Optional[ArrayLike] = None,
             attention_mask: Optional[ArrayLike] = None, mask: Optional[ArrayLike] = None,
             return_attention_scores: bool = False, **other_names: Any) -> Any:
        self._refuse_other_names(other_names)
        pre_ln = self.norm_position == "pre" and not self.rezero  # ReZero has no LayerNorm
        post_ln = self.norm_position == "post" and not self.rezero
        x = inputs  # (B, T, C): the residual stream

        # Attention: x + F(LN(x)) (Pre-LN), LN(x + F(x)) (Post-LN), x + alpha F(x) (ReZero)
        h = self.attention_norm(x) if pre_ln else x  # Pre-LN: the LayerNorm before the sublayer
        update, scores = self._self_attention(h, training, padding_mask, attention_mask, mask, return_attention_scores)
        x = x + self._rezero(update) if self.residual else update  # the residual connection (plain twin: none)
        if post_ln:
            x = self.attention_norm(x)  # Post-LN: the LayerNorm after the addition

        # Feed-forward, the same way
        h = self.feedforward_norm(x) if pre_ln else x
        update = self._feedforward(h, training)
        x = x + self._rezero(update) if self.residual else update
        if post_ln:
            x = self.feedforward_norm(x)

        return (x, scores) if return_attention_scores else x  # scores: (B, H, T, T)

    def attention_branch(self, x, training=None, padding_mask=None, attention_mask=None, mask=None):
        """What the attention sublayer writes into the stream in `call`, the masks as there.

        `F(LN(x))` (Pre-LN), `F(x)` (Post-LN, before the addition and its
        LN) or `alpha * F(x)` (ReZero), for a built block and x (B, T, C).
        """
        h = self.attention_norm(x) if self.norm_position == "pre" and not self.rezero else x
        return self._rezero(self._self_attention(h, training, padding_mask, attention_mask, mask)[0])

    def feedforward_branch(self, x, training=None):
        """What the feed-forward sublayer writes into the stream (as `attention_branch`)."""
        h = self.feedforward_norm(x) if self.norm_position == "pre" and not self.rezero else x
        return self._rezero(self._feedforward(h, training))

    def residual_steps(self, training: Optional[bool] = False, padding_mask: Optional[ArrayLike] = None,
                       attention_mask: Optional[ArrayLike] = None, mask: Optional[ArrayLike] = None,
                       return_attention_scores: bool = False, **other_names: Any) -> list[ResidualStep]:
        """For the instruments, the two additions `call` writes: attention, then feed-forward.

        Each is `post(x + branch(x))` (`post(branch(x))` for the plain twin),
        `post` the sublayer's LayerNorm for Post-LN (`x = LN(x + F(x))`) and
        nothing for Pre-LN (`x = x + F(LN(x))`) and ReZero (`x = x + alpha
        F(x)`); the branches are `attention_branch` (with the call's masks)
        and `feedforward_branch`. The attention probabilities are not part
        of the stream: `return_attention_scores` is accepted and ignored.
        """
        self._refuse_other_names(other_names)
        shortcut = identity if self.residual else None  # the residual connection (plain twin: none)
        post_ln = self.norm_position == "post" and not self.rezero
        attention = functools.partial(self.attention_branch, training=training, padding_mask=padding_mask,
                                      attention_mask=attention_mask, mask=mask)
        feedforward = functools.partial(self.feedforward_branch, training=training)
        return [
            ResidualStep("attention", attention, shortcut, self.attention_norm if post_ln else None, training),
            ResidualStep("feedforward", feedforward, shortcut, self.feedforward_norm if post_ln else None, training),
        ]

    def _refuse_other_names(self, other_names):
        """`TypeError` for a call argument the block does not take (one in another library's spelling named)."""
        refuse_other_spellings(f"{self.__class__.__name__}.call", other_names, TRANSFORMER_BLOCK_CALL)
        if other_names:
            raise TypeError(f"{self.__class__.__name__}.call got unexpected arguments {sorted(other_names)}.")

    def lesioned(self, *unused_args, **unused_kwargs):
        """The block removed (Veit et al. 2016): the identity, its LayerNorms skipped for Post-LN."""
        return identity

    def identity_scale(self):
        """ReZero's alpha (0 at initialisation), or None for a block with LayerNorms."""
        return None if self.rezero_alpha is None else float(ops.convert_to_numpy(self.rezero_alpha))

    def compute_mask(self, inputs, mask=None):
        return mask

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
                "rezero": self.rezero,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "causal": self.causal,
                "key_dim": self.key_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "output_kernel_initializer": keras.initializers.serialize(
                    self.output_kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
                "fused_attention": self.fused_attention,
            }
        )
        return config
