"""Multi-label outputs (several sigmoid units, or logits against multi-hot targets): binary cross-entropy.

Issue 40, case 2: an uncompiled multi-label model was read as multi-class, so
every instrument used categorical cross-entropy on multi-hot rows and the
lesions' default metric was argmax accuracy. Each value here is checked
against Keras' own `BinaryCrossentropy` and `binary_accuracy`, and a lesion by
hand (the model with one block's branch removed).
"""

import numpy as np
import pytest

import keras
from keras import layers
from residual_keras import Residual
from residual_keras import diagnostics as d

RNG = np.random.default_rng(0)
VECTORS = RNG.normal(size=(32, 8)).astype("float32")
MULTI_HOT = (RNG.random(size=(32, 5)) < 0.4).astype("float32")
MULTI_HOT[0] = [1, 1, 0, 0, 1]  # at least one row that is not one-hot


def _multilabel(activation="sigmoid"):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    x = Residual(layers.Dense(8), name="block1")(inputs)
    x = Residual(layers.Dense(8), name="block2")(x)
    return keras.Model(inputs, layers.Dense(5, activation=activation, name="head")(x), name="tagger")


def _binary_crossentropy(model, from_logits, x=VECTORS):
    return float(keras.losses.BinaryCrossentropy(from_logits=from_logits)(MULTI_HOT, model(x)))


def _without_block(model, name):
    """The model's output with block `name` removed by hand: x + f(x) -> x."""
    inputs = keras.Input((8,))
    x = inputs
    for block in ("block1", "block2"):
        if block != name:
            x = model.get_layer(block)(x)
    return keras.Model(inputs, model.get_layer("head")(x))


@pytest.mark.parametrize("activation", ["sigmoid", None])
def test_lesion_scores_a_multilabel_model_by_binary_crossentropy(activation):
    model = _multilabel(activation)
    from_logits = activation is None
    result = d.lesion(model, VECTORS, MULTI_HOT, metric="loss")
    expected = _binary_crossentropy(model, from_logits)
    categorical = float(keras.losses.CategoricalCrossentropy(from_logits=from_logits)(MULTI_HOT, model(VECTORS)))
    assert result["intact"] == pytest.approx(expected, rel=1e-5)
    assert abs(categorical - expected) > 0.1  # what the old code returned
    for name, value in zip(result["names"], result["lesioned"]):
        assert value == pytest.approx(_binary_crossentropy(_without_block(model, name), from_logits), rel=1e-5)
    crossentropy = d.lesion(model, VECTORS, MULTI_HOT, metric="crossentropy")
    assert crossentropy["intact"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("activation, threshold", [("sigmoid", 0.5), (None, 0.0)])
def test_the_default_metric_is_element_wise_binary_accuracy(activation, threshold):
    model = _multilabel(activation)
    result = d.lesion(model, VECTORS, MULTI_HOT)
    outputs = keras.ops.convert_to_numpy(model(VECTORS))
    expected = float(np.mean(keras.ops.convert_to_numpy(
        keras.metrics.binary_accuracy(MULTI_HOT, outputs, threshold=threshold))))
    assert result["metric"] == "accuracy"
    assert result["intact"] == pytest.approx(expected)
    argmax = float(np.mean(MULTI_HOT[np.arange(32), np.argmax(outputs, axis=-1)] == 1))
    assert result["intact"] != pytest.approx(argmax)  # not argmax on multi-hot rows


def test_loss_landscape_and_logit_lens_use_binary_crossentropy():
    model = _multilabel("sigmoid")
    expected = _binary_crossentropy(model, False)
    landscape = d.loss_landscape(model, VECTORS, MULTI_HOT, steps=3, span=0.1)
    assert landscape["center_loss"] == pytest.approx(expected, rel=1e-5)
    lens = d.logit_lens(model, VECTORS, MULTI_HOT)
    assert lens["loss"][-1] == pytest.approx(expected, rel=1e-5)
    head_of_x0 = float(keras.losses.BinaryCrossentropy()(MULTI_HOT, model.get_layer("head")(VECTORS)))
    assert lens["loss"][0] == pytest.approx(head_of_x0, rel=1e-5)
    flow = d.gradient_norms(model, VECTORS, MULTI_HOT)
    assert flow["loss"] == pytest.approx(expected, rel=1e-5)


def test_a_compiled_binary_loss_scores_logits_element_wise():
    """Compiled with BinaryCrossentropy(from_logits=True): element-wise accuracy at threshold 0.

    Keras' own metrics=["accuracy"] would pick categorical (argmax) accuracy
    for outputs and targets of one shape; the instruments score each unit.
    """
    model = _multilabel(None)
    model.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=[keras.metrics.BinaryAccuracy(threshold=0.0)])
    evaluated = model.evaluate(VECTORS, MULTI_HOT, verbose=0, return_dict=True)
    model.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True))
    result = d.lesion(model, VECTORS, MULTI_HOT)
    assert result["metric"] == "accuracy"
    assert result["intact"] == pytest.approx(evaluated["binary_accuracy"], rel=1e-5)
    loss = d.lesion(model, VECTORS, MULTI_HOT, metric="loss")
    assert loss["intact"] == pytest.approx(evaluated["loss"], rel=1e-5)


def test_a_sigmoid_output_with_class_labels_is_refused():
    model = _multilabel("sigmoid")
    with pytest.raises(ValueError, match="multi-label classifier.*multi-hot targets"):
        d.lesion(model, VECTORS, RNG.integers(0, 5, size=32), metric="loss")


def test_random_targets_of_a_multilabel_output_are_multi_hot():
    model = _multilabel("sigmoid")
    flow = d.gradient_norms(model, VECTORS)  # y=None: random 0/1 targets of the output's shape
    assert np.isfinite(flow["loss"]) and 0.3 < flow["loss"] < 3
