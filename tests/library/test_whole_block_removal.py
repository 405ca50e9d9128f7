"""Layers without the residual protocol, named in blocks=, are removed whole (Veit et al. 2016).

Issue 40, case 4: keras-hub's `TransformerDecoder` named in `blocks=` was
refused by `lesion`, `delete_blocks` and `swap_blocks` ("does not implement
the residual protocol"), while lesion's docstring said it becomes the
identity. Checked against the model rebuilt by hand without the layer, or
with two layers exchanged. keras-hub is an optional test dependency.
"""

import numpy as np
import pytest

import keras
from keras import layers
from residual_keras import diagnostics as d

RNG = np.random.default_rng(0)
VECTORS = RNG.normal(size=(32, 8)).astype("float32")
LABELS = RNG.integers(0, 4, size=32)


class Mixer(layers.Layer):
    """A student's layer that keeps the shape, with no residual_steps(): x -> tanh(x W)."""

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], input_shape[-1]), name="kernel")

    def call(self, x):
        return keras.ops.tanh(keras.ops.matmul(x, self.kernel))


def _chain(model, names, x, order):
    """The model's output with its layers `names` run in `order` (a list of names) by hand."""
    stream = model.get_layer("stem")(x)
    for name in order:
        stream = model.get_layer(name)(stream)
    return model.get_layer("head")(stream)


def _mixers():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    x = layers.Dense(8, name="stem")(inputs)
    for index in range(3):
        x = Mixer(name=f"mixer{index}")(x)
    return keras.Model(inputs, layers.Dense(4, name="head")(x))


def _loss(outputs):
    return float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(LABELS, outputs))


def test_a_shape_preserving_layer_without_the_protocol_is_removed_whole():
    model = _mixers()
    names = ["mixer0", "mixer1", "mixer2"]
    result = d.lesion(model, VECTORS, LABELS, blocks=names, metric="loss")
    assert result["removed_as"] == ["identity (the whole layer)"] * 3
    for name, value in zip(names, result["lesioned"]):
        by_hand = _loss(_chain(model, names, VECTORS, [other for other in names if other != name]))
        assert value == pytest.approx(by_hand, rel=1e-5)
    swapped = d.swap_blocks(model, VECTORS, LABELS, blocks=names, metric="loss")
    assert swapped["pairs"] == [["mixer0", "mixer1"], ["mixer1", "mixer2"]]
    assert swapped["swapped"][0] == pytest.approx(
        _loss(_chain(model, names, VECTORS, ["mixer1", "mixer0", "mixer2"])), rel=1e-5)
    deleted = d.delete_blocks(model, VECTORS, LABELS, blocks=names, metric="loss", num_removed=[3])
    assert deleted["mean"][0] == pytest.approx(_loss(_chain(model, names, VECTORS, [])), rel=1e-5)
    with pytest.raises(TypeError, match="does not implement the residual protocol"):
        d.lesion_sublayers(model, VECTORS, LABELS, blocks=names)


def test_a_layer_without_the_protocol_that_changes_the_shape_cannot_be_removed():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    x = Mixer(name="mixer")(inputs)
    x = layers.Dense(5, name="narrowing")(x)
    model = keras.Model(inputs, layers.Dense(4)(x))
    result = d.lesion(model, VECTORS, LABELS, blocks=["mixer", "narrowing"], metric="loss")
    assert result["lesioned"][1] is None and "shape changes" in result["removed_as"][1]
    assert result["lesioned"][0] is not None


def test_keras_hub_transformer_decoders_are_removed_whole():
    keras_hub = pytest.importorskip("keras_hub")
    keras.utils.set_random_seed(0)
    tokens = RNG.integers(1, 20, size=(8, 10))
    inputs = keras.Input((10,), dtype="int32")
    embed = keras_hub.layers.TokenAndPositionEmbedding(20, 10, 16, name="embed")
    decoders = [keras_hub.layers.TransformerDecoder(32, 2, name=f"decoder{i}") for i in range(3)]
    head = layers.Dense(20, name="head")
    x = embed(inputs)
    for decoder in decoders:
        x = decoder(x)
    model = keras.Model(inputs, head(x))
    names = [decoder.name for decoder in decoders]
    targets = np.roll(tokens, -1, axis=1)

    def by_hand(order):
        stream = embed(tokens)
        for index in order:
            stream = decoders[index](stream)
        return float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(targets, head(stream)))

    result = d.lesion(model, tokens, targets, blocks=names, metric="loss")
    assert result["intact"] == pytest.approx(by_hand([0, 1, 2]), rel=1e-5)
    for removed, value in enumerate(result["lesioned"]):
        assert value == pytest.approx(by_hand([i for i in range(3) if i != removed]), rel=1e-5)
    swapped = d.swap_blocks(model, tokens, targets, blocks=names, metric="loss")
    assert swapped["swapped"][1] == pytest.approx(by_hand([0, 2, 1]), rel=1e-5)
    deleted = d.delete_blocks(model, tokens, targets, blocks=names, metric="loss", num_removed=[2], draws=3)
    for removed, value in zip(deleted["removed"][0], deleted["values"][0]):
        kept = [i for i, name in enumerate(names) if name not in removed]
        assert value == pytest.approx(by_hand(kept), rel=1e-5)


class ReadsItsInput(layers.Layer):
    """A student's layer that reads a value of its input in Python: it runs eagerly, never traced."""

    def call(self, x):
        scale = 1.0 + 0.1 * float(keras.ops.convert_to_numpy(keras.ops.mean(keras.ops.abs(x))))
        return keras.ops.tanh(x * scale)

    def compute_output_shape(self, input_shape):
        return input_shape


def test_a_layer_that_cannot_be_traced_is_run_as_it_is_by_the_studies():
    """On TensorFlow the studies trace each block once (issue 67); a call that cannot be traced runs op by op."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    x = layers.Dense(8, name="stem")(inputs)
    x = ReadsItsInput(name="mixer0")(x)
    x = Mixer(name="mixer1")(x)
    x = ReadsItsInput(name="mixer2")(x)
    model = keras.Model(inputs, layers.Dense(4, name="head")(x))
    names = ["mixer0", "mixer1", "mixer2"]
    result = d.lesion(model, VECTORS, LABELS, blocks=names, metric="loss", batch_size=32)
    assert result["intact"] == pytest.approx(_loss(_chain(model, names, VECTORS, names)), rel=1e-5)
    for name, value in zip(names, result["lesioned"]):
        assert value == pytest.approx(_loss(_chain(model, names, VECTORS, [n for n in names if n != name])), rel=1e-5)
    swapped = d.swap_blocks(model, VECTORS, LABELS, blocks=names, metric="loss", batch_size=32)
    assert swapped["swapped"][1] == pytest.approx(
        _loss(_chain(model, names, VECTORS, ["mixer0", "mixer2", "mixer1"])), rel=1e-5)


def test_on_tensorflow_the_studies_run_each_block_traced_once():
    """The studies run the model once per plan; on TensorFlow each block's Python call runs only to trace it."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("only TensorFlow's studies trace the blocks (the other backends run them op by op)")

    class Counted(Mixer):
        calls = 0

        def call(self, x):
            Counted.calls += 1
            return super().call(x)

    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    x = layers.Dense(8, name="stem")(inputs)
    for index in range(4):
        x = Counted(name=f"mixer{index}")(x)
    model = keras.Model(inputs, layers.Dense(4, name="head")(x))
    names = [f"mixer{index}" for index in range(4)]
    before = Counted.calls
    deleted = d.delete_blocks(model, VECTORS, LABELS, blocks=names, metric="loss", batch_size=32, draws=5)
    traced = Counted.calls - before
    assert deleted["mean"][0] == pytest.approx(
        np.mean([_loss(_chain(model, names, VECTORS, [n for n in names if n not in removed]))
                 for removed in deleted["removed"][0]]), rel=1e-5)
    plans = sum(len(draws) for draws in deleted["removed"])  # each plan runs the blocks after its first removal
    assert plans >= 10 and traced <= 2 * len(names), (plans, traced)
