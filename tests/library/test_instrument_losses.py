"""The loss and metric the instruments use come from the model, never a silent wrong default."""

import numpy as np
import pytest

import keras
from keras import layers
from residual_keras import BasicBlock
from residual_keras import diagnostics as d

RNG = np.random.default_rng(0)
IMAGES = RNG.normal(size=(16, 8, 8, 3)).astype("float32")


def _classifier(units, activation=None, name="classifier"):
    inputs = keras.Input((8, 8, 3))
    x = BasicBlock(3, name="block1")(inputs)
    x = BasicBlock(3, name="block2")(x)
    outputs = layers.Dense(units, activation=activation, name="head")(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs, name=name)


def _numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(tensor))


def test_a_softmax_output_is_read_as_probabilities():
    model = _classifier(4, "softmax")
    labels = RNG.integers(0, 4, size=16)
    probabilities = model(IMAGES)
    true_loss = float(keras.losses.SparseCategoricalCrossentropy()(labels, probabilities))
    # Read as logits (as the old default did, on the output as numbers).
    misread = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, _numpy(probabilities)))
    result = d.lesion(model, (IMAGES, labels), metric="crossentropy")
    assert result["intact"] == pytest.approx(true_loss, rel=1e-5)
    assert abs(misread - true_loss) > 0.01  # the old default read them as logits
    flow = d.gradient_norms(model, IMAGES, labels, training=False)
    assert flow["loss"] == pytest.approx(true_loss, rel=1e-5)


@pytest.mark.parametrize("activation, threshold", [("sigmoid", 0.5), (None, 0.0)])
def test_a_one_unit_output_is_a_binary_classifier(activation, threshold):
    model = _classifier(1, activation)
    outputs = _numpy(model(IMAGES))[:, 0]
    # The head's bias centred on the median logit: the model predicts both classes on
    # every backend's random draw (one class everywhere would make accuracy = a class share).
    logits = outputs if activation is None else np.log(outputs / (1 - outputs))
    head = model.get_layer("head")
    head.bias.assign(_numpy(head.bias) - np.median(logits))
    outputs = _numpy(model(IMAGES))[:, 0]
    labels = (outputs > threshold).astype("int64")  # the intact model is right on every image
    labels[:3] = 1 - labels[:3]  # ... but three
    accuracy = d.lesion(model, (IMAGES, labels))
    assert accuracy["metric"] == "accuracy" and accuracy["intact"] == pytest.approx(13 / 16)
    assert accuracy["intact"] != pytest.approx(np.mean(labels == 0))  # not the share of class 0
    loss = keras.losses.BinaryCrossentropy(from_logits=activation is None)(labels[:, None], outputs[:, None])
    flow = d.gradient_norms(model, IMAGES, labels, training=False)
    assert flow["loss"] == pytest.approx(float(loss), rel=1e-5) and flow["loss"] > 0
    random_labels = d.gradient_norms(model, IMAGES, training=False)  # 0/1 labels, not one class
    assert np.isfinite(random_labels["gain"]) and random_labels["loss"] > 0.1


def test_an_image_output_needs_a_loss_and_targets():
    inputs = keras.Input((8, 8, 3))
    x = BasicBlock(3, name="block1")(inputs)
    model = keras.Model(inputs, layers.Conv2D(3, 3, padding="same")(x), name="image_to_image")
    with pytest.raises(ValueError, match="no loss for its output.*not a classifier's.*pass loss="):
        d.gradient_norms(model, IMAGES)
    with pytest.raises(ValueError, match="no loss for its output"):
        d.gradient_norms(model, IMAGES, IMAGES)
    with pytest.raises(ValueError, match="random class labels.*pass y="):
        d.gradient_norms(model, IMAGES, loss="mse")
    flow = d.gradient_norms(model, IMAGES, IMAGES, loss="mse")
    assert flow["loss"] == pytest.approx(float(np.mean((_numpy(model(IMAGES, training=True)) - IMAGES) ** 2)),
                                         rel=1e-4)
    with pytest.raises(ValueError, match="metric='accuracy' needs a classifier output"):
        d.lesion(model, (IMAGES, IMAGES), metric="accuracy")
    assert d.lesion(model, (IMAGES, IMAGES), metric="mae")["metric"] == "mae"


def test_the_compiled_loss_and_metric_are_used():
    model = _classifier(4)
    model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.CategoricalAccuracy(name="hits")])
    one_hot = np.eye(4, dtype="float32")[RNG.integers(0, 4, size=16)]
    flow = d.gradient_norms(model, IMAGES, one_hot, training=False)
    expected = keras.losses.CategoricalCrossentropy(from_logits=True)(one_hot, model(IMAGES))
    assert flow["loss"] == pytest.approx(float(expected), rel=1e-5)
    assert np.isfinite(d.gradient_norms(model, IMAGES)["loss"])  # random one-hot targets
    result = d.lesion(model, (IMAGES, one_hot))
    assert result["metric"] == "hits"
    hits = np.mean(np.argmax(_numpy(model(IMAGES)), -1) == np.argmax(one_hot, -1))
    assert result["intact"] == pytest.approx(hits)
    loss = d.lesion(model, (IMAGES, one_hot), metric="loss")
    assert loss["intact"] == pytest.approx(float(expected), rel=1e-5)


def test_a_subclassed_one_unit_probability_is_ambiguous_without_a_loss():
    class Binary(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.block = BasicBlock(3, name="block1")
            self.head = layers.Dense(1)

        def call(self, inputs):
            x = keras.ops.mean(self.block(inputs), axis=(1, 2))
            return keras.ops.sigmoid(self.head(x))

    model = Binary(name="binary")
    model(IMAGES)
    labels = RNG.integers(0, 2, size=16)
    with pytest.raises(ValueError, match="probability or a logit.*compile the model with its loss"):
        d.gradient_norms(model, IMAGES, labels)
    model.compile(loss="binary_crossentropy")
    assert d.gradient_norms(model, IMAGES, labels)["loss"] > 0


def test_unknown_metrics_are_refused():
    model = _classifier(4)
    with pytest.raises(ValueError, match="Unknown metric='top_five'.*'accuracy', 'crossentropy', 'loss'"):
        d.lesion(model, (IMAGES, RNG.integers(0, 4, size=16)), metric="top_five")
