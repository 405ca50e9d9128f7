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


# --------------------------------------------------------------------------
# A generator of shapes: data x head x structure x precision
# --------------------------------------------------------------------------
#
# Each generated shape is a `Generated`: the model, a batch, and a recipe to
# compute what the instruments measure without them: the stem (x -> x_0 and
# the padding mask), the blocks in forward order (called as layers), the head
# (x_L -> the outputs) and the Keras loss of the output the instruments read.
# tests/library/test_shape_generator.py checks every instrument against it.

import contextlib
import dataclasses

import residual_keras as rk

DATA = ("images", "sequences", "tabular")
HEADS = ("logits", "probabilities", "one sigmoid", "several sigmoids", "several outputs", "regression")
STRUCTURES = ("flat", "nested stages", "first block changes shape", "last block changes shape")
COUNT, CLASSES, UNITS, SEQUENCE_LENGTH, SEQUENCE_VOCAB = 8, 4, 5, 6, 12


@dataclasses.dataclass
class Generated:
    name: str
    data: str
    head_kind: str
    structure: str
    precision: str
    masked: bool
    model: keras.Model
    x: np.ndarray
    y: object
    stem: object  # x -> (x_0, mask or None)
    blocks: list  # the blocks, in forward order
    head: object  # (x_L, mask) -> the output the loss reads
    loss: keras.losses.Loss  # Keras' own loss of that output
    output_index: object = None  # what the instruments are told (a name for several outputs)

    def call_block(self, block, z, mask):
        return block(z, training=False, **({} if mask is None else {"mask": mask}))

    def points(self):
        """x_0 .. x_L and the mask, by calling the stem and the blocks as layers."""
        z, mask = self.stem(self.x)
        points = [z]
        for block in self.blocks:
            z = self.call_block(block, z, mask)
            points.append(z)
        return points, mask

    def from_point(self, start, z, mask, order=None):
        """The output the loss reads, with x_start = z and the blocks after it (or `order`, positions) run."""
        for position in (range(start, len(self.blocks)) if order is None else order):
            z = self.call_block(self.blocks[position], z, mask)
        return self.head(z, mask)

    def keras_loss(self, output):
        return float(self.loss(self.targets(), keras.ops.cast(output, "float32")))

    def targets(self):
        return self.y["cls"] if isinstance(self.y, dict) else self.y

    def step_weights(self, block):
        """{step name: the variables that make that step's branch write 0} (a hand lesion)."""
        if isinstance(block, rk.TransformerBlock):
            return {"attention": list(block.attention_output.weights),
                    "feedforward": list(block.feedforward_output.weights)}
        return {"branch": list(block.branch.weights)}

    @contextlib.contextmanager
    def zeroed(self, variables):
        """The variables set to 0 for the duration, then restored exactly."""
        saved = [keras.ops.convert_to_numpy(variable) for variable in variables]
        try:
            for variable in variables:
                variable.assign(keras.ops.zeros(variable.shape, variable.dtype))
            yield
        finally:
            for variable, value in zip(variables, saved):
                variable.assign(value)


def _block(data, name, width, changes_shape):
    """One block of the stream: rk.Residual (images, tabular) or a Pre-LN TransformerBlock (sequences)."""
    if data == "images":
        if changes_shape:
            return rk.Residual(layers.Conv2D(width * 2, 3, strides=2, padding="same"),
                               shortcut=layers.Conv2D(width * 2, 1, strides=2), name=name)
        return rk.Residual(layers.Conv2D(width, 3, padding="same"), name=name)
    if data == "sequences":
        if changes_shape:
            return rk.Residual(layers.Dense(width + 4), shortcut=layers.Dense(width + 4, use_bias=False), name=name)
        return rk.TransformerBlock(num_heads=2, intermediate_dim=16, causal=False, name=name)
    if changes_shape:
        return rk.Residual(layers.Dense(width // 2), shortcut=layers.Dense(width // 2, use_bias=False), name=name)
    branch = keras.Sequential([layers.Dense(16, activation="relu"), layers.Dense(width)], name=f"{name}_mlp")
    return rk.Residual(branch, post="relu" if name.endswith("2") else None, name=name)


def _inputs_of(data, masked, rng):
    if data == "images":
        return keras.Input(IMAGE), rng.normal(size=(COUNT, *IMAGE)).astype("float32")
    if data == "sequences":
        ids = rng.integers(1, SEQUENCE_VOCAB, size=(COUNT, SEQUENCE_LENGTH)).astype("int32")
        if masked:
            for row, length in enumerate([6, 4, 2, 5, 3, 6, 1, 4]):
                ids[row, length:] = 0
        return keras.Input((SEQUENCE_LENGTH,), dtype="int32"), ids
    return keras.Input((6,)), rng.normal(size=(COUNT, 6)).astype("float32")


def _head_layers(data, head_kind):
    pool = {"images": layers.GlobalAveragePooling2D(name="pool"),
            "sequences": layers.GlobalAveragePooling1D(name="pool"), "tabular": None}[data]
    units, activation = {"logits": (CLASSES, None), "probabilities": (CLASSES, "softmax"),
                         "one sigmoid": (1, "sigmoid"), "several sigmoids": (UNITS, "sigmoid"),
                         "several outputs": (CLASSES, None), "regression": (2, None)}[head_kind]
    main = layers.Dense(units, activation=activation, name="cls" if head_kind == "several outputs" else "out")
    aux = layers.Dense(1, name="aux") if head_kind == "several outputs" else None
    return pool, main, aux


def _targets(head_kind, rng):
    if head_kind in ("logits", "probabilities"):
        return rng.integers(0, CLASSES, size=COUNT)
    if head_kind == "one sigmoid":
        return rng.integers(0, 2, size=COUNT).astype("float32")
    if head_kind == "several sigmoids":
        multi_hot = (rng.random(size=(COUNT, UNITS)) < 0.4).astype("float32")
        multi_hot[0] = [1, 1, 0, 0, 1]
        return multi_hot
    if head_kind == "several outputs":
        return {"cls": rng.integers(0, CLASSES, size=COUNT), "aux": rng.normal(size=(COUNT, 1)).astype("float32")}
    return rng.normal(size=(COUNT, 2)).astype("float32")


LOSSES = {
    "logits": lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    "probabilities": lambda: keras.losses.SparseCategoricalCrossentropy(),
    "one sigmoid": lambda: keras.losses.BinaryCrossentropy(),
    "several sigmoids": lambda: keras.losses.BinaryCrossentropy(),
    "several outputs": lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    "regression": lambda: keras.losses.MeanSquaredError(),
}


def generate(data, head_kind, structure, precision="float32", masked=False, seed=0):
    """One generated shape (see `Generated`); `precision` "float32" or "mixed" (mixed_bfloat16)."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16" if precision == "mixed" else "float32")
    try:
        inputs, x = _inputs_of(data, masked, rng)
        width = 8 if data != "images" else 4
        stem_norm = None
        if data == "images":  # a BatchNorm in the stem, for calibrate_batchnorm
            stem_layer = layers.Conv2D(width, 3, padding="same", name="stem")
            stem_norm = layers.BatchNormalization(name="stem_norm")
        elif data == "sequences":
            stem_layer = rk.TokenAndPositionEmbedding(vocab_size=SEQUENCE_VOCAB, sequence_length=SEQUENCE_LENGTH,
                                                      embed_dim=width, mask_zero=masked, name="stem")
        else:
            stem_layer = layers.Dense(width, name="stem")
        changes = {"first block changes shape": 0, "last block changes shape": 2}.get(structure)
        blocks = []
        for index in range(3):
            block_width = width * 2 if data == "images" and changes == 0 and index > 0 else width
            if data != "images" and changes == 0 and index > 0:
                block_width = width + 4 if data == "sequences" else width // 2
            if data == "sequences" and changes == 0 and index > 0:  # after the change: Dense blocks on 12 channels
                blocks.append(rk.Residual(layers.Dense(block_width), name=f"block{index + 1}"))
            else:
                blocks.append(_block(data, f"block{index + 1}", block_width, index == changes))
        pool, main, aux = _head_layers(data, head_kind)
        z = stem_layer(inputs)
        if stem_norm is not None:
            z = stem_norm(z)
        if structure == "nested stages":
            first_stage = keras.Sequential(blocks[:1], name="stage1")
            stage_inputs = keras.Input(tuple(z.shape[1:]))
            inner = blocks[2](blocks[1](stage_inputs))
            second_stage = keras.Model(stage_inputs, inner, name="stage2")
            z = second_stage(first_stage(z))
        else:
            for block in blocks:
                z = block(z)
        features = pool(z) if pool is not None else z
        outputs = [main(features), aux(features)] if aux is not None else main(features)
        model = keras.Model(inputs, outputs, name=f"{data}_{head_kind}_{structure}".replace(" ", "_"))
    finally:
        keras.config.set_dtype_policy(policy)
    if head_kind == "several outputs":
        model.compile(loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), "mse"])
    elif head_kind == "regression":
        model.compile(loss="mse")

    def stem(batch):
        x_0 = stem_layer(keras.ops.convert_to_tensor(batch))
        if stem_norm is not None:
            x_0 = stem_norm(x_0, training=False)
        mask = stem_layer.compute_mask(keras.ops.convert_to_tensor(batch)) if masked else None
        return x_0, mask

    def head(x_last, mask):
        features = x_last if pool is None else pool(x_last, **({} if mask is None else {"mask": mask}))
        return main(features)

    name = f"{data}/{head_kind}/{structure}/{precision}" + ("/masked" if masked else "")
    return Generated(name, data, head_kind, structure, precision, masked, model, x, _targets(head_kind, rng),
                     stem, blocks, head, LOSSES[head_kind](),
                     output_index="cls" if head_kind == "several outputs" else None)


def generated_shapes():
    """(data, head, structure, precision, masked) for 36 shapes: every data x head twice, structures cycled.

    The first pass in float32; the second shifts the structure by two and
    runs every other shape under mixed_bfloat16, the sequences with padding
    masks.
    """
    shapes = []
    for number, (data, head_kind) in enumerate((d, h) for d in DATA for h in HEADS):
        shapes.append((data, head_kind, STRUCTURES[number % 4], "float32", False))
        shapes.append((data, head_kind, STRUCTURES[(number + 2) % 4], "mixed" if number % 2 else "float32",
                       data == "sequences"))
    return shapes
