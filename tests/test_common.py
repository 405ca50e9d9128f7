"""The run machinery both tracks share: config, run directory, resume, divergence."""

import dataclasses
import json
from typing import Optional

import numpy as np
import pytest

import keras
import tensorflow as tf
from tracks.common.config import ConfigError, config_from_args
from tracks.common.cli import train_parser
from tracks.common.run_dir import RunDirectory
from tracks.common.training import (
    DivergenceMonitor,
    EpochLog,
    fit_with_backup,
    read_metrics_rows,
    run_grid,
    throughput,
)


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    preset: str = dataclasses.field(default="a", metadata={"cli": False})
    depths: tuple[int, ...] = dataclasses.field(default=(1, 2), metadata={"help": "depths"})
    rate: float = dataclasses.field(default=0.1, metadata={"help": "rate"})
    augment: bool = dataclasses.field(default=True, metadata={"help": "augment"})
    size: Optional[int] = dataclasses.field(default=None, metadata={"help": "size"})

    def __post_init__(self):
        if self.rate <= 0:
            raise ValueError(f"--rate must be > 0, got {self.rate}")


PRESETS = {"a": ToyConfig(), "b": ToyConfig(preset="b", rate=0.5, size=7)}


def _parse(argv):
    parser = train_parser("toy", "toy", ToyConfig, PRESETS, "a")
    return config_from_args(parser.parse_args(argv), PRESETS, ToyConfig)


def test_preset_then_options_override():
    config = _parse(["--preset", "b", "--depths", "3,4,5", "--no-augment"])
    assert config == ToyConfig(preset="b", depths=(3, 4, 5), rate=0.5, augment=False, size=7)
    assert _parse([]) == ToyConfig()


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="unknown preset 'zz'"):
        _parse(["--preset", "zz"])
    with pytest.raises(ConfigError, match="--rate must be > 0"):
        _parse(["--rate", "-1"])
    with pytest.raises(SystemExit) as exit_info:
        _parse(["--depths", "a,b"])
    assert exit_info.value.code == 2


def test_run_directory_round_trip_and_refusals(tmp_path):
    config = ToyConfig(depths=(3,))
    run = RunDirectory.create("toy", config, out=tmp_path / "run")
    assert json.loads(run.config_path.read_text())["track"] == "toy"
    resumed, loaded = RunDirectory.resume("toy", run.path, ToyConfig)
    assert loaded == config and resumed.path == run.path
    with pytest.raises(ConfigError, match="already exists and is not empty"):
        RunDirectory.create("toy", config, out=run.path)
    with pytest.raises(ConfigError, match="belongs to the 'toy' track, not 'other'"):
        RunDirectory.resume("other", run.path, ToyConfig)
    with pytest.raises(ConfigError, match="no config.json"):
        RunDirectory.resume("toy", tmp_path, ToyConfig)
    run.record_model({"id": "m1", "value": 1})
    run.record_model({"id": "m1", "value": 2})
    assert run.read_results()["models"] == [{"id": "m1", "value": 2}]


def _tiny_model():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def _dataset():
    return tf.data.Dataset.from_tensor_slices(XY).batch(8)


XY = (np.random.default_rng(0).normal(size=(32, 4)).astype("float32"), np.ones((32, 1), "float32"))


class _Interrupt(keras.callbacks.Callback):
    """Simulates a killed process at the end of epoch `at` (after the CSV row, before the backup)."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.at:
            raise KeyboardInterrupt


def test_resume_continues_from_the_backup_without_duplicate_rows(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    model = _tiny_model()
    log_first = EpochLog(run.metrics_path("m"))
    backup = keras.callbacks.BackupAndRestore(str(run.backup_dir("m")))
    # Order as in fit_with_backup: the row is written, then the process dies before the backup.
    with pytest.raises(KeyboardInterrupt):
        model.fit(*XY, epochs=5, verbose=0, callbacks=[log_first, _Interrupt(2), backup])
    assert [row["epoch"] for row in read_metrics_rows(run.metrics_path("m"))] == [0, 1, 2]
    outcome = fit_with_backup(_tiny_model(), _dataset(), run=run, model_id="m", epochs=5, verbose=0)
    # Epoch 2 was lost with the process (no backup of it), so it is trained again, once.
    assert [row["epoch"] for row in outcome["history"]] == [0, 1, 2, 3, 4]
    assert outcome["history"] == read_metrics_rows(run.metrics_path("m"))
    assert not run.backup_dir("m").exists()


def test_divergence_is_recorded_not_raised(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    model = _tiny_model()
    model.compile(optimizer=keras.optimizers.SGD(1e30), loss="mse")
    x, y = XY
    data = tf.data.Dataset.from_tensor_slices((x * 1e10, y)).batch(8)
    outcome = fit_with_backup(model, data, run=run, model_id="boom", epochs=4, verbose=0)
    assert outcome["diverged_epoch"] == 0
    assert len(outcome["history"]) <= 1


def test_run_grid_skips_finished_models_and_records_each(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    run.record_model({"id": "a", "seconds": 1.0})
    trained = []

    @dataclasses.dataclass
    class Spec:
        id: str

    def train_one(spec):
        trained.append(spec.id)
        return {"id": spec.id, "seconds": 0.5, "diverged_epoch": 1 if spec.id == "c" else None}

    lines = []
    results = run_grid(run, [Spec("a"), Spec("b"), Spec("c")], train_one, log=lines.append)
    assert trained == ["b", "c"]
    assert [m["id"] for m in results["models"]] == ["a", "b", "c"]
    assert any("model 3/3: c diverged at epoch 2" in line for line in lines)


def test_throughput_leaves_out_the_compiling_epoch():
    history = [{"seconds": 10.0}, {"seconds": 2.0}, {"seconds": 2.0}, {"seconds": 4.0}]
    assert throughput(history, 100) == pytest.approx(50.0)
    assert DivergenceMonitor().diverged_epoch is None
