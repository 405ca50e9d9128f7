"""Models as students build them around the package, each with a batch: (model, x, y).

The shapes the issue of "a student's own block is second-class" listed: a
functional model with a softmax output, a subclassed model with a loop over
its blocks that has never been called, a masked text classifier (keras-io's
path: `TokenAndPositionEmbedding(mask_zero=True)` and non-causal blocks),
list and dict outputs, a U-Net trained with MSE, a shared block,
`rk.Residual` around a `keras.Sequential`, and a layer of one's own that
implements the residual protocol.
"""

import numpy as np

import keras
import residual_keras as rk
from keras import layers, ops

IMAGE = (8, 8, 3)
VOCAB, LENGTH, CLASSES = 12, 6, 4


def images(count=8, seed=0, shape=IMAGE):
    return np.random.default_rng(seed).normal(size=(count, *shape)).astype("float32")


def labels(count=8, classes=CLASSES, seed=1):
    return np.random.default_rng(seed).integers(0, classes, size=count)


def functional_softmax():
    """stem -> BasicBlock -> PreActBasicBlock -> pool -> softmax (probabilities)."""
    inputs = keras.Input(IMAGE)
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = rk.BasicBlock(4, name="basic")(x)
    x = rk.PreActBasicBlock(4, name="preact")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(CLASSES, activation="softmax", name="probabilities")(x)
    return keras.Model(inputs, outputs, name="softmax_net"), images(), labels()


class LoopNet(keras.Model):
    """A subclassed model that loops over a list of blocks; never called before it is measured."""

    def __init__(self, depth=3, **kwargs):
        super().__init__(**kwargs)
        self.stem = layers.Conv2D(4, 3, padding="same", name="stem")
        self.blocks = [rk.BasicBlock(4, name=f"block{index + 1}") for index in range(depth)]
        self.head = layers.Dense(CLASSES, name="logits")

    def call(self, inputs, training=None):
        x = self.stem(inputs)
        for block in self.blocks:
            x = block(x, training=training)
        return self.head(ops.mean(x, axis=(1, 2)))


def subclassed_loop():
    return LoopNet(name="loop_net"), images(), labels()  # not called: not built


def masked_text_classifier():
    """keras-io's text classifier on the package's layers: padding id 0 is masked."""
    tokens = keras.Input((LENGTH,), dtype="int32")
    x = rk.TokenAndPositionEmbedding(vocab_size=VOCAB, sequence_length=LENGTH, embed_dim=8, mask_zero=True,
                                     name="embed")(tokens)
    x = rk.TransformerBlock(num_heads=2, intermediate_dim=16, causal=False, name="block1")(x)
    x = rk.TransformerBlock(num_heads=2, intermediate_dim=16, causal=False, name="block2")(x)
    x = layers.GlobalAveragePooling1D(name="pool")(x)  # averages the real positions only
    outputs = layers.Dense(CLASSES, name="logits")(x)
    model = keras.Model(tokens, outputs, name="text_classifier")
    rng = np.random.default_rng(3)
    ids = rng.integers(1, VOCAB, size=(8, LENGTH)).astype("int32")
    for row, length in enumerate([6, 4, 2, 5, 3, 6, 1, 4]):
        ids[row, length:] = 0  # right padding
    return model, ids, labels()


def _two_heads(inputs):
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = rk.BasicBlock(4, name="block1")(x)
    x = rk.BasicBlock(4, name="block2")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return layers.Dense(CLASSES, name="cls")(x), layers.Dense(1, name="aux")(x)


def dict_outputs():
    """{"cls": logits, "aux": a regression}: defined in that order, sorted by Keras' output_names."""
    inputs = keras.Input(IMAGE)
    cls, aux = _two_heads(inputs)
    model = keras.Model(inputs, {"cls": cls, "aux": aux}, name="dict_net")
    model.compile(loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "aux": "mse"})
    targets = {"cls": labels(), "aux": np.random.default_rng(4).normal(size=(8, 1)).astype("float32")}
    return model, images(), targets


def list_outputs():
    """[logits, regression], named by their layers ("cls", "aux")."""
    inputs = keras.Input(IMAGE)
    model = keras.Model(inputs, list(_two_heads(inputs)), name="list_net")
    model.compile(loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), "mse"])
    return model, images(), [labels(), np.random.default_rng(4).normal(size=(8, 1)).astype("float32")]


def unet_mse():
    """A small U-Net with residual blocks and a sigmoid image output, compiled with MSE."""
    inputs = keras.Input(IMAGE)
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    down = rk.BasicBlock(4, name="down1")(x)
    x = rk.BasicBlock(8, strides=2, name="down2")(down)
    x = rk.BasicBlock(8, name="bottom")(x)
    x = layers.UpSampling2D(name="up")(x)
    x = layers.Concatenate(name="skip")([x, down])
    x = layers.Conv2D(4, 1, name="merge")(x)
    x = rk.BasicBlock(4, name="up1")(x)
    outputs = layers.Conv2D(3, 1, activation="sigmoid", name="image")(x)
    model = keras.Model(inputs, outputs, name="unet")
    model.compile(loss="mse")
    clean = np.random.default_rng(5).uniform(size=(8, *IMAGE)).astype("float32")
    return model, images(), clean


def shared_block():
    """One block called twice (shared weights): not one step of the stream."""
    shared = rk.BasicBlock(4, name="shared")
    inputs = keras.Input(IMAGE)
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = shared(shared(x))
    outputs = layers.Dense(CLASSES)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs, name="shared_net"), images(), labels()


def residual_sequential():
    """`rk.Residual` around `keras.Sequential` branches (an MLP ResNet), the last one plain."""
    inputs = keras.Input((6,))
    x = layers.Dense(8, name="stem")(inputs)
    for index in range(3):
        branch = keras.Sequential([layers.Dense(16, activation="relu"), layers.Dense(8)], name=f"mlp{index + 1}")
        x = rk.Residual(branch, post="relu", name=f"res{index + 1}")(x)
    outputs = layers.Dense(CLASSES, name="logits")(x)
    rng = np.random.default_rng(6)
    return keras.Model(inputs, outputs, name="mlp_resnet"), rng.normal(size=(8, 6)).astype("float32"), labels()


@keras.saving.register_keras_serializable(package="student")
class GatedBlock(layers.Layer):
    """A student's own block: y = ReLU(x + g * f(x)), g a trainable gate starting at 0."""

    def __init__(self, width, **kwargs):
        super().__init__(**kwargs)
        self.width = width

    def build(self, input_shape):
        self.inner = layers.Dense(self.width, activation="relu", name="inner")
        self.outer = layers.Dense(input_shape[-1], name="outer")
        self.inner.build(input_shape)
        self.outer.build((*input_shape[:-1], self.width))
        self.gate = self.add_weight(name="gate", shape=(), initializer="zeros")

    def branch(self, x):
        return self.gate * self.outer(self.inner(x))

    def call(self, x):
        return ops.relu(x + self.branch(x))

    # The residual protocol: what call computes, in parts.
    def residual_steps(self, **unused):
        return [rk.ResidualStep("", branch=self.branch, post=ops.relu)]

    def identity_scale(self):
        return float(ops.convert_to_numpy(self.gate))

    def get_config(self):
        return {**super().get_config(), "width": self.width}


def protocol_layer():
    inputs = keras.Input((6,))
    x = layers.Dense(8, name="stem")(inputs)
    x = GatedBlock(16, name="gated1")(x)
    x = GatedBlock(16, name="gated2")(x)
    outputs = layers.Dense(CLASSES, name="logits")(x)
    model = keras.Model(inputs, outputs, name="gated_net")
    for block in ("gated1", "gated2"):  # as if trained a little: the gates have left 0
        model.get_layer(block).gate.assign(0.5)
    rng = np.random.default_rng(7)
    return model, rng.normal(size=(8, 6)).astype("float32"), labels()


def functional_stages():
    """Stages as functional sub-models, blocks inside: BasicBlocks, then `rk.Residual` around a convolution.

    A student's shape from issue 40: `swap_blocks` across the stages' boundary
    put a BasicBlock where a Residual had been called with `mask=None`, and
    the BasicBlock, whose call takes no mask, failed with TypeError 'mask'.
    """

    def stage(name, make):
        stage_inputs = keras.Input((8, 8, 4))
        x = stage_inputs
        for index in range(2):
            x = make(f"{name}_block{index + 1}")(x)
        return keras.Model(stage_inputs, x, name=name)

    stage1 = stage("stage1", lambda name: rk.BasicBlock(4, name=name))
    stage2 = stage("stage2", lambda name: rk.Residual(layers.Conv2D(4, 3, padding="same"), post="relu", name=name))
    inputs = keras.Input(IMAGE)
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = layers.GlobalAveragePooling2D(name="pool")(stage2(stage1(x)))
    outputs = layers.Dense(CLASSES, name="logits")(x)
    return keras.Model(inputs, outputs, name="staged_net"), images(), labels()


STUDENT_MODELS = {
    "functional stages": functional_stages,
    "functional softmax": functional_softmax,
    "subclassed loop": subclassed_loop,
    "masked text": masked_text_classifier,
    "dict outputs": dict_outputs,
    "list outputs": list_outputs,
    "U-Net MSE": unet_mse,
    "shared block": shared_block,
    "Residual(Sequential)": residual_sequential,
    "protocol layer": protocol_layer,
}
