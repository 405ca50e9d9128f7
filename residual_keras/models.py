"""Model builders: the networks the tracks train, from the library's layers.

`cifar_resnet` is the CIFAR-10 network of He et al. 2015 (arXiv 1512.03385),
section 4.2: a 3x3 stem with `width` filters, three stages of n blocks on
32x32, 16x16 and 8x8 maps with width, 2*width and 4*width filters (the first
block of stages 2 and 3 has stride 2), global average pooling and a dense
classifier. Depth = 6n + 2 weighted layers. The block family
(`residual_keras.blocks`) names the network: `blocks.preact()` builds He et
al. 2016's pre-activation network instead (stem conv, pre-activation blocks,
a final BN-ReLU before pooling), `norm="none"` removes every normalisation.

`transformer_lm` is a decoder-only character language model of
`TransformerBlock`s (Pre-LN, Post-LN, their plain twins, or ReZero) with
GPT-2's initialisation, the shape of nanoGPT's models.
"""

import math
from typing import Callable, Optional, Union

import keras
from keras import layers

from residual_keras.checks import channel_axis, check_choice, check_data_format, check_positive_int
from residual_keras._transformer_args import NORM_POSITIONS, resolve_residual
from residual_keras.attention import check_heads
from residual_keras import batchnorm
from residual_keras._spellings import CIFAR_RESNET, TRANSFORMER_LM, refuses
from residual_keras.embedding import TokenAndPositionEmbedding
from residual_keras import blocks
from residual_keras.fixup import ScalarBias
from residual_keras.transformer import TransformerBlock

INITS = ("gpt2", "xavier")


def count_trainable_params(model: keras.Model) -> int:
    """Number of trainable scalars in `model` (BatchNorm moving statistics excluded)."""
    return int(sum(keras.ops.size(weight) for weight in model.trainable_weights))


def blocks_per_stage(depth: int) -> int:
    """n for depth = 6n + 2; raises `ValueError` for any other depth."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 8 or (depth - 2) % 6:
        raise ValueError(
            f"depth must be 6n + 2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, "
            f"1202, ...), got {depth!r}."
        )
    return (depth - 2) // 6


@refuses(CIFAR_RESNET)
def cifar_resnet(
    depth: int,
    *,
    block: Union[blocks.BlockFamily, Callable[..., keras.layers.Layer]] = blocks.basic(),
    num_classes: int = 10,
    width: int = 16,
    input_shape: Optional[tuple[int, ...]] = None,
    weight_decay: float = 0.0,
    data_format: Optional[str] = None,
    name: Optional[str] = None,
) -> keras.Model:
    """He et al.'s CIFAR ResNet (or its plain twin), returning logits.

    Blocks are named `stage{s}_block{b}` (s = 1..3, b = 1..n) so that
    instruments and students can find them with `model.get_layer`.

    Trainable parameters (option A, width 16): ResNet-20 269,722; -32 464,154;
    -44 658,586; -56 853,018; -110 1,727,962. Option B adds 2,752. The plain
    twin (option A) has exactly the same parameters. The pre-activation
    ResNet-20 has 269,946 (its BatchNorms sit on the blocks' inputs, plus
    one at the end, instead of one after the stem).

    Args:
        depth: int. 6n + 2: 20, 32, 44, 56, 110, 1202, ...
        block: a named block family from `residual_keras.blocks`, which
            says the block and the network around it: `blocks.basic()` (He
            et al. 2015: `ReLU(x + f(x))`, option-A shortcuts), `plain()`
            (its plain twin, the same layers), `basic(shortcut="B")`,
            `zero_gamma_basic()`, `preact()` (He et al. 2016: `x + f(x)`
            and a final BN-ReLU before pooling), `plain_preact()`,
            `zero_last_conv_preact()`, `fixup()` (no normalisation, Fixup
            initialisation); `norm="none"` where a family takes it removes
            every normalisation. Or a block of one's own: a class or
            factory called as `block(filters, strides, name=...)` that
            returns a Keras layer (keras-hub's `block_type`, timm's
            `block_fn`), the same as `blocks.own(block)`. Default
            `blocks.basic()`.
        num_classes: int. Output classes. Default 10.
        width: int. Filters of the first stage (16 in the paper). Default 16.
        input_shape: tuple or None. One image's shape in `data_format`'s
            order. Default None: CIFAR's, (32, 32, 3) channels-last or
            (3, 32, 32) channels-first.
        weight_decay: float. The paper's coupled weight decay (1e-4), added as
            an L2 penalty `weight_decay / 2 * ||W||^2` on every conv and dense
            kernel, which adds `weight_decay * W` to the gradient. Default 0.
        data_format: "channels_last" (batch, height, width, channels) or
            "channels_first" (batch, channels, height, width), for every
            convolution, normalisation, shortcut and the pooling. Default
            None: `keras.config.image_data_format()`. A block of one's own
            is called with `data_format=` when it is "channels_first".
        name: optional model name; default e.g. "resnet20", "plain20",
            "preact_resnet20" or "resnet20_nonorm".

    Returns:
        A `keras.Model` from images to `num_classes` logits (float32 even
        under mixed precision; use `from_logits=True` losses).

    Example:
        >>> model = cifar_resnet(20)
        >>> count_trainable_params(model)
        269722
        >>> count_trainable_params(cifar_resnet(20, block=blocks.plain()))
        269722
    """
    n = blocks_per_stage(depth)
    family = blocks.family(block)
    check_positive_int("num_classes", num_classes)
    check_positive_int("width", width)
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}.")
    data_format = check_data_format(data_format)
    if input_shape is None:
        input_shape = (32, 32, 3) if data_format == "channels_last" else (3, 32, 32)
    regularizer = keras.regularizers.L2(weight_decay / 2) if weight_decay else None
    fixup = family.norm == "fixup"

    inputs = keras.Input(shape=input_shape, name="images")
    x = layers.Conv2D(
        width,
        3,
        padding="same",
        use_bias=family.norm == "none",
        kernel_initializer="he_normal",
        kernel_regularizer=regularizer,
        data_format=data_format,
        name="stem_conv",
    )(inputs)
    if fixup:
        x = ScalarBias(0.1, name="stem_bias")(x)
    elif family.norm == "batchnorm" and not family.preact:
        x = batchnorm.BatchNormalization(axis=channel_axis(data_format), momentum=0.9, epsilon=1e-5,
                                         name="stem_norm")(x)
    if not family.preact:  # a pre-activation block starts with its own (BN-)ReLU
        x = layers.ReLU(name="stem_relu")(x)

    for stage in range(3):
        filters = width * 2**stage
        for index in range(n):
            strides = 2 if stage > 0 and index == 0 else 1
            x = family.make(filters, strides, name=f"stage{stage + 1}_block{index + 1}", num_blocks=3 * n,
                            kernel_regularizer=regularizer, data_format=data_format)(x)

    if family.preact:  # the last block's output is not normalised otherwise (He et al. 2016)
        if family.norm == "batchnorm":
            x = batchnorm.BatchNormalization(axis=channel_axis(data_format), momentum=0.9, epsilon=1e-5,
                                             name="final_norm")(x)
        x = layers.ReLU(name="final_relu")(x)
    x = layers.GlobalAveragePooling2D(data_format=data_format, name="pool")(x)
    if fixup:
        x = ScalarBias(0.1, name="head_bias")(x)
    outputs = layers.Dense(
        num_classes,
        kernel_initializer="zeros" if fixup else "glorot_uniform",
        kernel_regularizer=regularizer,
        dtype="float32",
        name="classifier",
    )(x)
    if name is None:
        own = family.kind not in ("resnet", "plain", "fixup")
        name = (f"{family.kind}_resnet{depth}" if own else
                f"{'preact_' if family.preact else ''}{family.kind}{depth}{'_nonorm' if family.norm == 'none' else ''}")
    return keras.Model(inputs, outputs, name=name)


@refuses(TRANSFORMER_LM)
def transformer_lm(
    vocab_size: int,
    sequence_length: int,
    num_layers: int,
    *,
    embed_dim: int = 128,
    num_heads: int = 4,
    intermediate_dim: Optional[int] = None,
    norm_position: str = "pre",
    residual: bool = True,
    rezero: bool = False,
    dropout: float = 0.0,
    init: str = "gpt2",
    layer_norm_epsilon: float = 1e-5,
    fused_attention: bool = False,
    name: Optional[str] = None,
) -> keras.Model:
    """A decoder-only (GPT-style) language model of `TransformerBlock`s.

    tokens (B, T) -> `embedding` (token + position) -> [`embedding_dropout`]
    -> `block1` ... `block{num_layers}` -> [`final_norm`] -> `lm_head` ->
    logits (B, T, vocab_size). T may vary from 1 to `sequence_length`.

    `final_norm` (a LayerNorm before the head) exists for Pre-LN only, residual
    or plain: a Pre-LN stream is never normalised by its blocks (GPT-2 adds
    this LN; Xiong et al. 2020). A Post-LN block already ends with a LayerNorm,
    so Post-LN (residual or plain) has none, as in Vaswani et al. 2017; ReZero
    has no LayerNorm anywhere (Bachlechner et al. 2020). A plain twin thus has
    exactly the same weights as its residual model.

    Initialisation, GPT-2's as written in nanoGPT's `model.py`
    (`_init_weights` and the `c_proj.weight` loop; Radford et al. 2019,
    section 2.3): every dense kernel and both embedding tables N(0, 0.02),
    biases 0, and the two projections per block that write into the residual
    stream (attention output, second feed-forward kernel) N(0, 0.02 / sqrt(2L))
    with L = num_layers, so that the 2L residual additions keep the stream's
    variance O(1) at initialisation. The head is not tied to the token
    embedding and has a bias (like the PyTorch peer benchmark).

    `init="xavier"` is the original Transformer's initialisation instead
    (Vaswani et al. 2017, as in fairseq and in Xiong et al. 2020's analysis):
    every dense kernel Glorot-uniform, embeddings N(0, 1) (fairseq's
    N(0, 1/C) scaled by sqrt(C)). Its sublayers write updates as large as the
    stream itself, where GPT-2's start small: the regime in which Post-LN's
    need for warm-up was found.

    Trainable parameters of nanoGPT's CPU "baby GPT",
    `transformer_lm(65, 64, 4, embed_dim=128, num_heads=4)`: 818,241 (the
    same as the PyTorch peer `torch_chargpt.py`; nanoGPT itself reports 0.80M
    because it ties the head to the token embedding, has no head bias and
    does not count position embeddings).

    Args:
        vocab_size: int. Number of token ids.
        sequence_length: int. Longest context (number of learned positions).
        num_layers: int. Number of Transformer blocks L.
        embed_dim: int. Width of the residual stream. Default 128.
        num_heads: int. Attention heads; must divide embed_dim. Default 4.
        intermediate_dim: int or None. Feed-forward hidden width; default
            4 * embed_dim.
        norm_position: "pre" or "post". Default "pre".
        residual: bool. False builds the plain twin. Default True.
        rezero: bool. ReZero blocks `x + alpha F(x)`, no LayerNorm. Default False.
        dropout: float in [0, 1). Embedding, attention and residual dropout.
            Default 0.
        init: "gpt2" (N(0, 0.02), stream-writing projections
            N(0, 0.02 / sqrt(2L))) or "xavier" (Vaswani et al.). Default "gpt2".
        layer_norm_epsilon: float > 0. The epsilon of every LayerNorm,
            `LN(x) = (x - mean) / sqrt(var + eps)`: a stream whose variance
            falls far below eps is no longer rescaled. Default 1e-5.
        fused_attention: bool. The blocks compute attention with
            `keras.ops.dot_product_attention` (fused on GPUs; needs
            `dropout=0`); see `TransformerBlock`. Default False.
        name: optional model name; default e.g. "transformer_lm_pre",
            "plain_lm_post" or "rezero_lm".

    Returns:
        A `keras.Model` from int token ids (B, T) to float32 logits
        (B, T, vocab_size), float32 even under mixed precision (use
        `from_logits=True` losses).

    Example:
        >>> model = transformer_lm(65, 64, 4)
        >>> count_trainable_params(model)
        818241
    """
    check_positive_int("vocab_size", vocab_size)
    check_positive_int("sequence_length", sequence_length)
    check_positive_int("num_layers", num_layers)
    check_positive_int("embed_dim", embed_dim)
    check_positive_int("num_heads", num_heads)
    check_heads(embed_dim, num_heads)
    check_choice("norm_position", norm_position, NORM_POSITIONS)
    residual, rezero = resolve_residual(residual, rezero)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
    check_choice("init", init, INITS)
    if not layer_norm_epsilon > 0:
        raise ValueError(f"layer_norm_epsilon must be > 0, got {layer_norm_epsilon!r}.")

    def normal(stddev):
        return keras.initializers.RandomNormal(stddev=stddev)

    if init == "gpt2":
        embedding_init, kernel_init = normal(0.02), normal(0.02)
        output_init = normal(0.02 / math.sqrt(2 * num_layers))
    else:
        embedding_init, kernel_init, output_init = normal(1.0), "glorot_uniform", "glorot_uniform"

    inputs = keras.Input(shape=(None,), dtype="int32", name="tokens")
    x = TokenAndPositionEmbedding(
        vocab_size=vocab_size,
        sequence_length=sequence_length,
        embed_dim=embed_dim,
        embeddings_initializer=embedding_init,
        name="embedding",
    )(inputs)  # (B, T, C)
    if dropout:
        x = layers.Dropout(dropout, name="embedding_dropout")(x)
    for index in range(num_layers):
        x = TransformerBlock(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            norm_position=norm_position,
            residual=residual,
            rezero=rezero,
            dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=kernel_init,
            output_kernel_initializer=output_init,
            fused_attention=fused_attention,
            name=f"block{index + 1}",
        )(x)
    if norm_position == "pre" and not rezero:
        x = layers.LayerNormalization(epsilon=layer_norm_epsilon, name="final_norm")(x)
    logits = layers.Dense(
        vocab_size,
        kernel_initializer=kernel_init,
        dtype="float32",
        name="lm_head",
    )(x)  # (B, T, vocab_size)
    if name is None:
        if rezero:
            name = "rezero_lm"
        else:
            name = f"{'transformer' if residual else 'plain'}_lm_{norm_position}"
    return keras.Model(inputs, logits, name=name)
