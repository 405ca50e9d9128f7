"""Small versions of the model shapes students build around the library's blocks.

Each builder returns (model, x, y): a tiny model and a batch. The shapes are
those of four keras-io examples ported onto `residual_keras` layers (a
miniature GPT returning `[logits, x]`, EDSR's global skip, a subclassed
ResNet, stages as nested models) plus a Sequential model and a functional
model with one output.
"""

import numpy as np

import keras
from keras import layers
from residual_keras import BasicBlock, PreActBasicBlock, TokenAndPositionEmbedding, TransformerBlock

IMAGE = (8, 8, 3)
VOCAB, LENGTH = 13, 6


def images(count=8, seed=0):
    return np.random.default_rng(seed).normal(size=(count, *IMAGE)).astype("float32")


def labels(count=8, classes=5, seed=1):
    return np.random.default_rng(seed).integers(0, classes, size=count)


def functional_one_output():
    """stem -> 3 BasicBlocks (one downsampling) -> pool -> logits."""
    inputs = keras.Input(IMAGE, name="images")
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = BasicBlock(4, name="block1")(x)
    x = BasicBlock(8, strides=2, name="block2")(x)
    x = BasicBlock(8, name="block3")(x)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = layers.Dense(5, name="logits")(x)
    return keras.Model(inputs, outputs, name="functional"), images(), labels()


def two_outputs():
    """The miniature GPT of keras-io: returns [logits, x], compiled with loss=[loss, None]."""
    tokens = keras.Input((LENGTH,), dtype="int32", name="tokens")
    x = TokenAndPositionEmbedding(vocab_size=VOCAB, sequence_length=LENGTH, embed_dim=8, name="embed")(tokens)
    x = TransformerBlock(num_heads=2, intermediate_dim=16, name="transformer1")(x)
    x = TransformerBlock(num_heads=2, intermediate_dim=16, name="transformer2")(x)
    logits = layers.Dense(VOCAB, name="head")(x)
    model = keras.Model(tokens, [logits, x], name="gpt")
    model.compile("adam", loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), None])
    rng = np.random.default_rng(2)
    ids = rng.integers(0, VOCAB, size=(4, LENGTH + 1))
    return model, ids[:, :-1], ids[:, 1:]


def global_skip():
    """EDSR: stem s -> residual blocks -> conv -> + s -> conv to an image (super-resolution's shape)."""
    inputs = keras.Input(IMAGE, name="low_resolution")
    stem = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = stem
    for index in range(3):
        x = PreActBasicBlock(4, norm="none", name=f"resblock{index + 1}")(x)
    x = layers.Conv2D(4, 3, padding="same", name="after_blocks")(x)
    x = layers.Add(name="global_skip")([x, stem])
    outputs = layers.Conv2D(3, 3, padding="same", name="to_image")(x)
    model = keras.Model(inputs, outputs, name="edsr")
    model.compile("adam", loss="mae")
    x = images()
    return model, x, x[:, ::-1]  # the targets: any image of the output's shape


def nested_stages():
    """Stages as a nested Sequential and a nested functional model; a one-unit sigmoid output."""
    stage1 = keras.Sequential([BasicBlock(4, name="block1"), BasicBlock(4, name="block2")], name="stage1")
    stage_inputs = keras.Input((8, 8, 4))
    y = BasicBlock(8, strides=2, name="block1")(stage_inputs)
    y = BasicBlock(8, name="block2")(y)
    stage2 = keras.Model(stage_inputs, y, name="stage2")
    inputs = keras.Input(IMAGE, name="images")
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = stage2(stage1(x))
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = layers.Dense(1, activation="sigmoid", name="probability")(x)
    return keras.Model(inputs, outputs, name="nested"), images(), labels(classes=2)


def sequential():
    """A Sequential model with a softmax output (probabilities, not logits)."""
    model = keras.Sequential([
        keras.Input(IMAGE),
        layers.Conv2D(4, 3, padding="same", name="stem"),
        BasicBlock(4, name="block1"),
        layers.Dropout(0.5, name="dropout"),
        BasicBlock(4, name="block2"),
        layers.GlobalAveragePooling2D(name="pool"),
        layers.Dense(5, activation="softmax", name="probabilities"),
    ], name="sequential")
    return model, images(), labels()


class SmallResNet(keras.Model):
    """A subclassed ResNet: layers as attributes, the residual stream in `call`."""

    def __init__(self, classes=5, **kwargs):
        super().__init__(**kwargs)
        self.stem = layers.Conv2D(4, 3, padding="same", name="stem")
        self.stem_norm = layers.BatchNormalization(name="stem_norm")
        self.stages = [BasicBlock(4, name="block1"), BasicBlock(8, strides=2, name="block2"),
                       BasicBlock(8, name="block3")]
        self.pool = layers.GlobalAveragePooling2D(name="pool")
        self.head = layers.Dense(classes, name="logits")

    def call(self, inputs, training=None):
        x = keras.ops.relu(self.stem_norm(self.stem(inputs), training=training))
        for block in self.stages:
            x = block(x, training=training)
        return self.head(self.pool(x))


def subclassed():
    model = SmallResNet(name="subclassed")
    x = images()
    model(x)  # build
    return model, x, labels()


SHAPES = {
    "functional one output": functional_one_output,
    "two outputs": two_outputs,
    "global skip": global_skip,
    "nested": nested_stages,
    "Sequential": sequential,
    "subclassed": subclassed,
}
