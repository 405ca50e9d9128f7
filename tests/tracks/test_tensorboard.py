"""TensorBoard logs in Keras' layout (issue 42), read back from the event files.

The tracks call `fit` once per epoch; Keras' callback opened a new events
file each time and the vision track's test-subset curve went to train/, so
train and validation never overlaid.
"""

import dataclasses
import importlib.util

import keras
import numpy as np
import pytest
import tensorflow as tf

import residual_keras as rk
from tracks.common.run_directory import RunDirectory
from tracks.common.tensorboard import read_scalars
from tracks.common.training import Checkpoints, fit_with_backup

pytestmark = pytest.mark.skipif(not importlib.util.find_spec("tensorboard"),
                                reason="the tensorboard package (the test extra) writes TensorBoard logs")

XY = (np.random.default_rng(0).normal(size=(32, 4)).astype("float32"),
      np.eye(2, dtype="float32")[np.arange(32) % 2])


@dataclasses.dataclass(frozen=True)
class Config:
    preset: str = dataclasses.field(default="a", metadata={"cli": False})


def _model():
    inputs = keras.Input((4,))
    x = rk.Residual(keras.layers.Dense(4), name="block1")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, name="head")(x))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def _epoch_data(epoch):
    order = np.random.default_rng(epoch).permutation(32)
    return tf.data.Dataset.from_tensor_slices((XY[0][order], XY[1][order])).batch(8)


CURVE = tf.data.Dataset.from_tensor_slices(XY).take(16).batch(8)


def _train(run, model, epochs):
    dynamics = rk.TrainingDynamics(XY[0][:8], XY[1][:8], path=run.path / "dynamics" / "m.csv")
    return fit_with_backup(model, _epoch_data, run=run, model_id="m", epochs=epochs, verbose=0,
                           curve_data=CURVE, curve_name="test_subset", extra_callbacks=[dynamics])


def _events(run, split):
    folder = run.tensorboard_dir("m") / split
    files = sorted(folder.glob("events.out.tfevents.*"))
    scalars = {}
    for tag, step, value in read_scalars(folder):
        scalars.setdefault(tag, []).append((step, value))
    return files, scalars


def test_train_and_validation_overlay_with_one_file_each_and_the_residual_tags(tmp_path):
    run = RunDirectory.create("toy", Config(), out=tmp_path / "run")
    outcome = _train(run, _model(), epochs=3)
    train_files, train = _events(run, "train")
    validation_files, validation = _events(run, "validation")
    assert len(train_files) == 1 and len(validation_files) == 1
    # Keras' tag names, the same in both folders: TensorBoard overlays them
    assert {"epoch_loss", "epoch_accuracy"} <= set(train) & set(validation)
    assert not any(tag.startswith("epoch_test_subset") for tag in train)
    assert [step for step, _ in train["epoch_loss"]] == [0, 1, 2]
    assert [step for step, _ in validation["epoch_loss"]] == [0, 1, 2]
    history = outcome["history"]
    np.testing.assert_allclose([value for _, value in train["epoch_loss"]], [row["loss"] for row in history],
                               rtol=1e-6)
    np.testing.assert_allclose([value for _, value in validation["epoch_loss"]],
                               [row["test_subset_loss"] for row in history], rtol=1e-6)
    # the residual measurements, from the same rows as dynamics.csv, at 0 (initialisation) and after each epoch
    rows = rk.TrainingDynamics.read_csv(run.path / "dynamics" / "m.csv")
    assert [step for step, _ in train["residual/gradient_gain"]] == [0, 1, 2, 3]
    assert [step for step, _ in train["residual/branch_ratio/block1"]] == [0, 1, 2, 3]
    gains = {row["epoch"]: row["gradient_gain"] for row in rows}
    np.testing.assert_allclose([value for _, value in train["residual/gradient_gain"]],
                               [gains[epoch] for epoch in range(4)], rtol=1e-6)
    assert "residual/delta_rank" in train


def test_a_resumed_training_rewrites_one_file_per_split_without_a_step_twice(tmp_path):
    run = RunDirectory.create("toy", Config(), out=tmp_path / "run")
    _train(run, _model(), epochs=3)
    # A crash after epoch 3 was logged but before its checkpoint: the resume trains epoch 3 (index 2) again.
    for epochs, path in Checkpoints(run.backup_dir("m")).saved():
        if epochs == 3:
            path.unlink()
    _train(run, _model(), epochs=4)
    for split in ("train", "validation"):
        files, scalars = _events(run, split)
        assert len(files) == 1, files
        steps = [step for step, _ in scalars["epoch_loss"]]
        assert steps == [0, 1, 2, 3], (split, steps)
    _, train = _events(run, "train")
    assert [step for step, _ in train["residual/gradient_gain"]] == [0, 1, 2, 3, 4]
