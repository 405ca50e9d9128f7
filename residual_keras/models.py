"""Model builders: the networks the tracks train, from the library's layers.

`cifar_resnet` is the CIFAR-10 network of He et al. 2015 (arXiv 1512.03385),
section 4.2: a 3x3 stem with `width` filters, three stages of n blocks on
32x32, 16x16 and 8x8 maps with width, 2*width and 4*width filters (the first
block of stages 2 and 3 has stride 2), global average pooling and a dense
classifier. Depth = 6n + 2 weighted layers.
"""

import keras
from keras import layers

from residual_keras._checks import check_choice, check_positive_int
from residual_keras.fixup import FixupBasicBlock, ScalarBias
from residual_keras.resnet_blocks import BasicBlock

NORMS = ("batchnorm", "fixup")


def count_trainable_params(model):
    """Number of trainable scalars in `model` (BatchNorm moving statistics excluded)."""
    return int(sum(keras.ops.size(weight) for weight in model.trainable_weights))


def cifar_depths(max_n=200):
    """The valid depths 6n + 2 (8, 14, 20, ...), for messages and CLIs."""
    return [6 * n + 2 for n in range(1, max_n + 1)]


def blocks_per_stage(depth):
    """n for depth = 6n + 2; raises `ValueError` for any other depth."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 8 or (depth - 2) % 6:
        raise ValueError(
            f"depth must be 6n + 2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, "
            f"1202, ...), got {depth!r}."
        )
    return (depth - 2) // 6


def cifar_resnet(
    depth,
    *,
    residual=True,
    shortcut="A",
    norm="batchnorm",
    zero_gamma=False,
    num_classes=10,
    width=16,
    input_shape=(32, 32, 3),
    weight_decay=0.0,
    name=None,
):
    """He et al.'s CIFAR ResNet (or its plain twin), returning logits.

    Blocks are named `stage{s}_block{b}` (s = 1..3, b = 1..n) so that
    instruments and students can find them with `model.get_layer`.

    Trainable parameters (option A, width 16): ResNet-20 269,722; -32 464,154;
    -44 658,586; -56 853,018; -110 1,727,962. Option B adds 2,752. The plain
    twin (option A) has exactly the same parameters.

    Args:
        depth: int. 6n + 2: 20, 32, 44, 56, 110, 1202, ...
        residual: bool. False builds the plain network with the same layers.
            Default True.
        shortcut: "A" (zero-pad, parameter-free) or "B" (1x1 projection),
            used where a block changes shape. Default "A".
        norm: "batchnorm" (the paper) or "fixup" (no normalisation, Fixup
            initialisation; residual only). Default "batchnorm".
        zero_gamma: bool. Start each block's last BN gamma at 0. Default False.
        num_classes: int. Output classes. Default 10.
        width: int. Filters of the first stage (16 in the paper). Default 16.
        input_shape: tuple. Image shape (height, width, channels).
        weight_decay: float. The paper's coupled weight decay (1e-4), added as
            an L2 penalty `weight_decay / 2 * ||W||^2` on every conv and dense
            kernel, which adds `weight_decay * W` to the gradient. Default 0.
        name: optional model name; default e.g. "resnet20" or "plain20".

    Returns:
        A `keras.Model` from images to `num_classes` logits (float32 even
        under mixed precision; use `from_logits=True` losses).

    Example:
        >>> model = cifar_resnet(20)
        >>> count_trainable_params(model)
        269722
    """
    n = blocks_per_stage(depth)
    check_choice("norm", norm, NORMS)
    check_choice("shortcut", shortcut, ("A", "B"))
    check_positive_int("num_classes", num_classes)
    check_positive_int("width", width)
    if not isinstance(residual, bool):
        raise ValueError(f"residual must be True or False, got {residual!r}.")
    if norm == "fixup":
        if not residual:
            raise ValueError(
                "norm='fixup' needs residual=True: Fixup starts every branch at "
                "zero, so a plain Fixup network would output a constant."
            )
        if zero_gamma or shortcut != "A":
            raise ValueError(
                "norm='fixup' has no BatchNorm (so no zero_gamma) and uses its "
                f"own option-A shortcut; got zero_gamma={zero_gamma!r}, "
                f"shortcut={shortcut!r}."
            )
    if zero_gamma and not residual:
        raise ValueError(
            "zero_gamma=True needs residual=True: a plain block with a zero "
            "last gamma outputs 0 for every input."
        )
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}.")
    regularizer = keras.regularizers.L2(weight_decay / 2) if weight_decay else None
    fixup = norm == "fixup"

    inputs = keras.Input(shape=input_shape, name="images")
    x = layers.Conv2D(
        width,
        3,
        padding="same",
        use_bias=False,
        kernel_initializer="he_normal",
        kernel_regularizer=regularizer,
        name="stem_conv",
    )(inputs)
    if fixup:
        x = ScalarBias(0.1, name="stem_bias")(x)
    else:
        x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name="stem_norm")(x)
    x = layers.ReLU(name="stem_relu")(x)

    for stage in range(3):
        filters = width * 2**stage
        for index in range(n):
            strides = 2 if stage > 0 and index == 0 else 1
            block_name = f"stage{stage + 1}_block{index + 1}"
            if fixup:
                block = FixupBasicBlock(
                    filters,
                    strides,
                    num_blocks=3 * n,
                    kernel_regularizer=regularizer,
                    name=block_name,
                )
            else:
                block = BasicBlock(
                    filters,
                    strides,
                    residual=residual,
                    shortcut=shortcut,
                    zero_gamma=zero_gamma,
                    kernel_regularizer=regularizer,
                    name=block_name,
                )
            x = block(x)

    x = layers.GlobalAveragePooling2D(name="pool")(x)
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
        kind = "fixup" if fixup else ("resnet" if residual else "plain")
        name = f"{kind}{depth}"
    return keras.Model(inputs, outputs, name=name)

