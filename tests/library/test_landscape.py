"""loss_landscape (Li et al. 2018): the weights restored exactly, the grid checked by hand, its measures."""

import numpy as np
import pytest

import keras
from keras import layers
from residual_keras import cifar_resnet, transformer_lm
from residual_keras.diagnostics import loss_landscape
from residual_keras.diagnostics.landscape import filter_normalised_direction, grid_measures

IMAGES = np.random.default_rng(0).normal(size=(32, 16, 16, 3)).astype("float32")
LABELS = np.random.default_rng(1).integers(0, 10, size=32)


def _trained_resnet():
    keras.utils.set_random_seed(0)
    model = cifar_resnet(8, width=4, input_shape=(16, 16, 3))
    model.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(IMAGES, LABELS, epochs=1, batch_size=16, verbose=0)
    return model


def _values(model):
    return [np.array(keras.ops.convert_to_numpy(variable), copy=True) for variable in model.variables]


def test_every_variable_is_restored_exactly():
    model = _trained_resnet()
    before = _values(model)
    result = loss_landscape(model, IMAGES, LABELS, steps=3)
    assert all(np.array_equal(a, b) for a, b in zip(before, _values(model)))  # bit for bit, BN statistics too
    assert result["grid"].shape == (3, 3) and np.all(np.isfinite(result["grid"]))


def test_the_weights_are_restored_when_the_loss_fails_half_way():
    model = _trained_resnet()
    before = _values(model)
    calls = []

    def failing(y_true, y_pred):
        calls.append(1)
        if len(calls) > 4:
            raise RuntimeError("stop")
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)

    with pytest.raises(RuntimeError, match="stop"):
        loss_landscape(model, IMAGES, LABELS, steps=3, loss=failing)
    assert all(np.array_equal(a, b) for a, b in zip(before, _values(model)))


def test_the_centre_is_the_models_loss_and_a_corner_is_the_loss_of_the_moved_weights():
    """Checked by hand: the same directions applied to a copy, the loss from model.evaluate."""
    model = _trained_resnet()
    result = loss_landscape(model, IMAGES, LABELS, steps=3, span=0.5, seed=7)
    evaluated = model.evaluate(IMAGES, LABELS, verbose=0, batch_size=32)
    assert result["center_loss"] == pytest.approx(evaluated, rel=1e-4)
    theta = [keras.ops.convert_to_numpy(v).astype("float64") for v in model.trainable_variables]
    rng = np.random.default_rng(7)
    first, second = filter_normalised_direction(theta, rng), filter_normalised_direction(theta, rng)
    for variable, start, d1, d2 in zip(model.trainable_variables, theta, first, second):
        variable.assign((start - 0.5 * d1 + 0.5 * d2).astype("float32"))
    corner = model.evaluate(IMAGES, LABELS, verbose=0, batch_size=32)
    assert result["grid"][0, 2] == pytest.approx(corner, rel=1e-4)
    assert result["slice"] == pytest.approx(result["grid"][:, 1])


def test_directions_are_filter_normalised_and_leave_biases_and_norms_alone():
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(3, 3, 4, 6)) * np.arange(1, 7)  # filters of different sizes
    bias = rng.normal(size=(6,))
    direction, bias_direction = filter_normalised_direction([kernel, bias], rng)
    np.testing.assert_allclose(np.linalg.norm(direction.reshape(-1, 6), axis=0),
                               np.linalg.norm(kernel.reshape(-1, 6), axis=0))
    assert not np.allclose(direction / kernel, (direction / kernel).flat[0])  # random, not a rescaled kernel
    assert np.all(bias_direction == 0)


def test_the_measures_of_a_bowl_and_of_a_saddle():
    alphas = np.linspace(-1, 1, 11)
    a, b = np.meshgrid(alphas, alphas, indexing="ij")
    bowl = grid_measures(1 + 2 * a ** 2 + 3 * b ** 2, alphas)
    assert bowl["center_loss"] == pytest.approx(1.0)
    assert bowl["curvature"] == pytest.approx((4 + 6) / 2)
    assert bowl["nonconvex_share"] == 0.0
    edges = np.concatenate([(1 + 2 * a ** 2 + 3 * b ** 2)[[0, -1], :].ravel(),
                            (1 + 2 * a ** 2 + 3 * b ** 2)[1:-1, [0, -1]].ravel()])
    assert bowl["edge_rise"] == pytest.approx(edges.mean() - 1)
    saddle = grid_measures(5 + a ** 2 - b ** 2, alphas)
    assert saddle["nonconvex_share"] == 1.0
    assert saddle["curvature"] == pytest.approx(0.0, abs=1e-9)


def test_any_model_the_instruments_take():
    """A Transformer language model (3-D targets) and a model with two outputs, scored by name."""
    keras.utils.set_random_seed(0)
    tokens = np.random.default_rng(0).integers(0, 20, size=(8, 12))
    lm = transformer_lm(20, 12, 2, embed_dim=16)
    result = loss_landscape(lm, tokens, np.roll(tokens, -1, axis=1), steps=3)
    assert result["center_loss"] == pytest.approx(np.log(20), rel=0.2) and result["directions"] > 0

    inputs = keras.Input((6,))
    hidden = layers.Dense(8, activation="relu")(inputs)
    model = keras.Model(inputs, {"cls": layers.Dense(3, name="cls")(hidden), "aux": layers.Dense(1, name="aux")(hidden)})
    x = np.random.default_rng(1).normal(size=(16, 6)).astype("float32")
    y = {"cls": np.random.default_rng(2).integers(0, 3, 16), "aux": np.zeros((16, 1), "float32")}
    by_name = loss_landscape(model, x, y, steps=3, output_index="aux", loss="mse")
    outputs = model(x)
    assert by_name["center_loss"] == pytest.approx(float(np.mean(keras.ops.convert_to_numpy(outputs["aux"]) ** 2)),
                                                   rel=1e-4)


@pytest.mark.parametrize("arguments, message", [
    ({"steps": 4}, "odd"), ({"steps": 1}, "odd"), ({"span": 0}, "span"), ({"span": float("inf")}, "span"),
])
def test_bad_arguments_are_refused_in_one_line(arguments, message):
    model = _trained_resnet()
    with pytest.raises(ValueError, match=message) as caught:
        loss_landscape(model, IMAGES, LABELS, **arguments)
    assert "\n" not in str(caught.value)
