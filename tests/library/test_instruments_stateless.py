"""No instrument changes the model it measures: every variable is as before the call.

A trained model (BatchNorm statistics moved, Dropout seed generators
advanced, optimizer slots filled, compiled metrics counting) goes through
every instrument, training-mode passes included; every variable of the
model, its optimizer and its metrics is compared bit for bit.
`calibrate_batchnorm` is the one exception, by design: it changes the
BatchNorm moving statistics and nothing else.
"""

import numpy as np
import pytest

import keras
from keras import layers
from residual_keras import BasicBlock, TokenAndPositionEmbedding, TransformerBlock
from residual_keras import diagnostics as d


def _every_variable(model):
    found, seen = [], set()
    for variable in [*model.variables, *model.optimizer.variables,
                     *(v for metric in model.metrics for v in metric.variables)]:
        if id(variable) not in seen:
            seen.add(id(variable))
            found.append(variable)
    return found


def _values(variables):
    return [np.array(keras.ops.convert_to_numpy(variable), copy=True) for variable in variables]


def _trained_resnet():
    inputs = keras.Input((8, 8, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = BasicBlock(4, name="block1")(x)
    x = layers.Dropout(0.3, seed=1)(x)
    x = BasicBlock(8, strides=2, name="block2")(x)
    x = BasicBlock(8, name="block3")(x)
    outputs = layers.Dense(5)(layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs, name="trained_resnet")
    model.compile(keras.optimizers.SGD(0.1, momentum=0.9),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 8, 8, 3)).astype("float32"), rng.integers(0, 5, size=16)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    return model, x, y


def _trained_gpt():
    tokens = keras.Input((6,), dtype="int32")
    x = TokenAndPositionEmbedding(vocab_size=11, sequence_length=6, embed_dim=8)(tokens)
    x = TransformerBlock(num_heads=2, intermediate_dim=16, dropout=0.2, name="block1")(x)
    x = TransformerBlock(num_heads=2, intermediate_dim=16, dropout=0.2, name="block2")(x)
    model = keras.Model(tokens, [layers.Dense(11)(x), x], name="trained_gpt")
    model.compile("adam", loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), None])
    ids = np.random.default_rng(1).integers(0, 11, size=(8, 7))
    model.fit(ids[:, :-1], ids[:, 1:], batch_size=4, epochs=1, verbose=0)
    return model, ids[:, :-1], ids[:, 1:]


def _dynamics(model, x, y):
    callback = d.TrainingDynamics(x, y)
    callback.set_model(model)
    callback.on_epoch_begin(0)
    callback.on_epoch_end(0)


CONV = {
    "gradient_norms (training)": lambda m, x, y: d.gradient_norms(m, x, y, training=True),
    "gradient_norms (inference)": lambda m, x, y: d.gradient_norms(m, x, training=False),
    "activation_norms (training)": lambda m, x, y: d.activation_norms(m, x, training=True),
    "jacobian_norm": lambda m, x, y: d.jacobian_norm(m, x[:2], num_iterations=3, per_branch=True,
                                                     cumulative=True),
    "lesion": lambda m, x, y: d.lesion(m, (x, y)),
    "delete_blocks": lambda m, x, y: d.delete_blocks(m, (x, y), draws=2),
    "swap_blocks": lambda m, x, y: d.swap_blocks(m, (x, y)),
    "path_gradients": lambda m, x, y: d.path_gradients(m, x, y, samples=2),
    "TrainingDynamics": _dynamics,
}
TRANSFORMER = {
    "gradient_norms (training)": lambda m, x, y: d.gradient_norms(m, x, y, training=True),
    "activation_norms (training)": lambda m, x, y: d.activation_norms(m, x, training=True),
    "jacobian_norm": lambda m, x, y: d.jacobian_norm(m, x[:2], num_iterations=3),
    "stream_contributions (training)": lambda m, x, y: d.stream_contributions(m, x, training=True),
    "stream_decomposition": lambda m, x, y: d.stream_decomposition(m, x),
    "logit_lens": lambda m, x, y: d.logit_lens(m, x, y),
    "lesion": lambda m, x, y: d.lesion(m, (x, y)),
    "lesion_sublayers": lambda m, x, y: d.lesion_sublayers(m, (x, y)),
    "delete_blocks": lambda m, x, y: d.delete_blocks(m, (x, y), draws=2),
    "swap_blocks": lambda m, x, y: d.swap_blocks(m, (x, y)),
    "TrainingDynamics": _dynamics,
}


@pytest.mark.parametrize(
    "build, instruments",
    [(_trained_resnet, CONV), (_trained_gpt, TRANSFORMER)],
    ids=["resnet with BatchNorm and Dropout", "GPT with dropout and two outputs"],
)
def test_no_instrument_changes_any_variable_of_a_trained_model(build, instruments):
    model, x, y = build()
    variables = _every_variable(model)
    assert any("moving_mean" in v.path for v in variables) or model.name == "trained_gpt"
    assert any("seed_generator" in v.path for v in variables)  # Dropout's state is compared too
    assert model.optimizer.iterations.numpy() > 0
    reference = _values(variables)
    predictions = keras.ops.convert_to_numpy(keras.tree.flatten(model(x))[0])
    for name, instrument in instruments.items():
        instrument(model, x, y)
        changed = [v.path for v, before, after in zip(variables, reference, _values(variables))
                   if not np.array_equal(before, after)]
        assert not changed, f"{name} changed {changed}"
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(keras.tree.flatten(model(x))[0]), predictions)


def test_training_mode_passes_would_move_the_statistics_the_instruments_restore():
    """The guard: the same training-mode pass, run directly, does change the model."""
    model, x, _ = _trained_resnet()
    reference = _values(model.variables)
    model(x, training=True)
    changed = [v.path for v, before, after in zip(model.variables, reference, _values(model.variables))
               if not np.array_equal(before, after)]
    assert any("moving_mean" in path for path in changed)
    assert any("seed_generator" in path for path in changed)


def test_calibrate_batchnorm_changes_the_moving_statistics_and_nothing_else():
    model, x, _ = _trained_resnet()
    variables = _every_variable(model)
    reference = _values(variables)
    assert d.calibrate_batchnorm(model, x) == 1 + 2 * 3  # stem + two per block
    changed = {v.path for v, before, after in zip(variables, reference, _values(variables))
               if not np.array_equal(before, after)}
    assert changed and all(path.endswith(("moving_mean", "moving_variance")) for path in changed)
