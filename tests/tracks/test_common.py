"""The run machinery the tracks share: config, run directory, lock, checkpoints, resume, divergence."""

import dataclasses
import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from typing import Optional

import numpy as np
import pytest

import keras
import tensorflow as tf
from track_helpers import Killed, snapshot
from tracks.common.config import ConfigError, config_from_args, config_from_dict, write_json
from tracks.common.environment import check_strategy
from tracks.common.options import train_parser
from tracks.common.results import ModelResult
from tracks.common.run_directory import RunDirectory, RunFileError
from tracks.common.training import (
    Checkpoints,
    describe_outcome,
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
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _parse(argv):
    parser = train_parser("toy", "toy", ToyConfig, PRESETS, "a")
    return config_from_args(parser.parse_args(argv), PRESETS, ToyConfig)


def test_preset_then_options_override():
    config = _parse(["--preset", "b", "--depths", "3,4,5", "--no-augment"])
    assert config == ToyConfig(preset="b", depths=(3, 4, 5), rate=0.5, augment=False, size=7)
    assert _parse([]) == ToyConfig()


def _help(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        train_parser("toy", "toy", ToyConfig, PRESETS, "a").parse_args([*argv, "--help"])
    assert stop.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_help_gives_each_option_its_value_in_the_chosen_preset(capsys):
    default = _help([], capsys)
    assert "depths [a: 1,2]" in default and "rate [a: 0.1]" in default
    assert "augment [a: on]" in default and "size [a: none]" in default
    chosen = _help(["--preset", "b"], capsys)
    assert "rate [b: 0.5]" in chosen and "size [b: 7]" in chosen
    assert "[b: b]" not in chosen  # --preset itself is not a config option
    assert "rate [b: 0.5]" in _help(["--preset=b"], capsys)


def test_help_shows_the_preset_given_after_it(capsys):
    """--help waits for every option (argparse reads --preset once, as it reads every option): `--help --preset b`
    shows b's values, and a bad value after --help is refused like one before it."""
    parser = train_parser("toy", "toy", ToyConfig, PRESETS, "a")
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--help", "--preset", "b"])
    assert stop.value.code == 0 and "rate [b: 0.5]" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--help", "--depths", "x"])
    assert stop.value.code == 2 and capsys.readouterr().err.startswith("error: argument --depths")


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="unknown preset 'zz'"):
        _parse(["--preset", "zz"])
    with pytest.raises(ConfigError, match="--rate must be > 0"):
        _parse(["--rate", "-1"])
    with pytest.raises(SystemExit) as exit_info:
        _parse(["--depths", "a,b"])
    assert exit_info.value.code == 2


def test_config_from_dict_checks_types_and_shape():
    assert config_from_dict(ToyConfig, {"depths": [3, 4], "rate": 1, "size": None}) == ToyConfig(
        depths=(3, 4), rate=1)
    for bad, words in [([1, 2], "found a list"), ({"depths": "3"}, "depths should be"),
                       ({"size": True}, "size should be"), ({"depths": [1.5]}, "depths should be"),
                       ({"rate": 0}, "--rate must be > 0")]:
        with pytest.raises(ConfigError, match=words):
            config_from_dict(ToyConfig, bad)


def test_write_json_replaces_the_file_whole(tmp_path):
    path = tmp_path / "results.json"
    write_json(path, {"models": [1]})
    write_json(path, {"models": [1, 2]})
    assert json.loads(path.read_text()) == {"models": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no .tmp left behind


def test_run_directory_round_trip_and_refusals(tmp_path):
    config = ToyConfig(depths=(3,))
    run = RunDirectory.create("toy", config, out=tmp_path / "run", data_fingerprint={"sha256": "x"})
    assert json.loads(run.config_path.read_text())["track"] == "toy"
    with pytest.raises(ConfigError, match="already exists and is not empty"):
        RunDirectory.create("toy", config, out=run.path)
    run.release()
    resumed, loaded, fingerprint = RunDirectory.resume("toy", run.path, ToyConfig)
    assert loaded == config and resumed.path == run.path and fingerprint == {"sha256": "x"}
    resumed.release()
    with pytest.raises(ConfigError, match="belongs to the 'toy' track, not 'other'"):
        RunDirectory.resume("other", run.path, ToyConfig)
    with pytest.raises(ConfigError, match="no config.json"):
        RunDirectory.resume("toy", tmp_path, ToyConfig)
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        RunDirectory.create("toy", config, out=run.config_path)
    run.record_model({"id": "m1", "value": 1})
    run.record_model({"id": "m1", "value": 2})
    assert run.read_results()["models"] == [{"id": "m1", "value": 2}]


@pytest.mark.parametrize(
    "name, text, words",
    [
        ("results.json", "{\"models\": [", "results.json is damaged (not valid JSON"),
        ("results.json", "{\"models\": 3}", "results.json is damaged (no list of models"),
        ("config.json", "[1, 2]", "config.json does not describe a run (a JSON list"),
        ("config.json", "{\"track\": \"toy\", \"depths\": \"3\"}", "config.json does not describe a toy run"),
    ],
)
def test_damaged_run_files_are_one_line_errors_naming_the_file(tmp_path, name, text, words):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    run.release()
    (run.path / name).write_text(text)
    with pytest.raises(RunFileError) as error:
        if name == "config.json":
            RunDirectory.resume("toy", run.path, ToyConfig)
        else:
            run.read_results()
    assert words in str(error.value) and "\n" not in str(error.value)
    assert str(run.path / name) in str(error.value)


def test_a_locked_run_refuses_other_processes_until_its_owner_dies(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    run.release()
    before = snapshot(run.path)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from tracks.common.run_directory import RunDirectory
            RunDirectory({str(run.path)!r}, "toy").lock()
            print("locked", flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError) as error:
            RunDirectory.resume("toy", run.path, ToyConfig)
        assert f"is in use by another process (pid {holder.pid})" in str(error.value)
        holder.send_signal(signal.SIGKILL)  # the OS releases the lock of a dead process
        holder.wait(timeout=30)
        resumed, _, _ = RunDirectory.resume("toy", run.path, ToyConfig)
        resumed.release()
    finally:
        holder.kill()
    assert snapshot(run.path) == before


def test_the_strategy_is_checked_before_anything_runs(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    check_strategy("mirrored")
    with pytest.raises(ValueError, match="needs the TF_CONFIG environment variable"):
        check_strategy("multiworker")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG must be JSON"):
        check_strategy("multiworker")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"index": 1}}))
    with pytest.raises(ValueError, match="task index 1 does not name one of its 1 workers"):
        check_strategy("multiworker")


def test_a_track_turns_grappler_off_on_a_cpu_for_its_own_runs_only():
    from tracks.common.runtime import setup_runtime

    setup_runtime("fp32", "off", "none", cpu_graph_optimizer=False)
    assert tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer") is True
    setup_runtime("fp32", "off", "none")  # the next run, another track's: Grappler on again
    assert tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer") is False


SPINNING_PROBE = ("from tracks.common.environment import configure_process, read_environment\n"
                  "configure_process(read_environment())  # as a command does, once its options are checked\n"
                  "import tracks.common.environment as environment, tensorflow as tf\n"
                  "tf.constant(1.0) + 1.0  # TensorFlow's runtime and its thread pools start here\n"
                  "print(environment.thread_spinning(), environment.disable_thread_spinning())\n")


def test_the_tracks_make_tensorflows_thread_pools_sleep_instead_of_spin():
    # A fresh process, as a run starts: configure_process asks for pools that do not spin, before the first
    # operation makes them; after it, asking again takes no effect (and says so). The variable keeps them.
    root = pathlib.Path(__file__).resolve().parents[2]
    env = {key: value for key, value in os.environ.items() if key != "RESIDUAL_KERAS_THREAD_SPINNING"}
    env.update(PYTHONPATH=str(root), TF_CPP_MIN_LOG_LEVEL="3")
    probes = [subprocess.Popen([sys.executable, "-c", SPINNING_PROBE], env={**env, **extra}, cwd=root,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for extra in ({}, {"RESIDUAL_KERAS_THREAD_SPINNING": "1"})]
    outputs = [probe.communicate(timeout=120) for probe in probes]
    assert [out.strip().splitlines()[-1] for out, _ in outputs] == ["False False", "True False"], outputs


def test_a_run_records_whether_its_thread_pools_spin():
    from tracks.common.environment import thread_spinning
    from tracks.common.runtime import setup_runtime

    described = setup_runtime("fp32", "off", "none").describe()
    assert described["thread_spinning"] is thread_spinning()


def _tiny_model():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="mse")
    return model


XY = (np.random.default_rng(0).normal(size=(32, 4)).astype("float32"), np.ones((32, 1), "float32"))


def _epoch_data(epoch):
    """Epoch e's batches depend on e only (as the tracks' pipelines)."""
    order = np.random.default_rng(epoch).permutation(32)
    return tf.data.Dataset.from_tensor_slices((XY[0][order], XY[1][order])).batch(8)


def test_checkpoints_restore_weights_and_optimizer_and_survive_damage(tmp_path):
    model = _tiny_model()
    model.fit(_epoch_data(0), epochs=1, verbose=0)
    checkpoints = Checkpoints(tmp_path / "backup" / "m")
    for epochs_done in (1, 2, 3):
        model.fit(_epoch_data(epochs_done), epochs=1, verbose=0)
        checkpoints.save(model, epochs_done)
    assert [epoch for epoch, _ in checkpoints.saved()] == [2, 3]  # the newest two are kept
    restored, lines = _tiny_model(), []
    assert checkpoints.restore(restored, lines.append) == 3
    np.testing.assert_array_equal(restored.get_weights()[0], model.get_weights()[0])
    assert int(restored.optimizer.iterations) == int(model.optimizer.iterations) == 16
    # A save a kill interrupted leaves only a partial file: it is ignored and removed.
    (checkpoints.directory / "partial-epoch-0004.weights.h5").write_bytes(b"\x89HDF\r\n")
    newest = checkpoints.directory / "epoch-0003.weights.h5"
    newest.write_bytes(newest.read_bytes()[:300])  # damaged all the same (a broken disk)
    assert checkpoints.restore(_tiny_model(), lines.append) == 2
    assert "epoch-0003.weights.h5 cannot be read" in lines[-1]
    assert not list(checkpoints.directory.glob("partial-*"))
    (checkpoints.directory / "epoch-0002.weights.h5").write_bytes(b"garbage")
    with pytest.raises(RunFileError, match="no checkpoint in .* can be read; delete that folder"):
        checkpoints.restore(_tiny_model(), lines.append)


def test_resume_after_a_kill_between_row_and_checkpoint_equals_an_uninterrupted_fit(tmp_path, monkeypatch):
    whole = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "whole")
    keras.utils.set_random_seed(0)
    reference = fit_with_backup(_tiny_model(), _epoch_data, run=whole, model_id="m", epochs=5, verbose=0)

    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    save = Checkpoints.save

    def killed_after_the_row_of_epoch_2(self, model, epochs_done):
        if epochs_done == 3:
            raise Killed
        save(self, model, epochs_done)

    monkeypatch.setattr(Checkpoints, "save", killed_after_the_row_of_epoch_2)
    keras.utils.set_random_seed(0)
    with pytest.raises(Killed):
        fit_with_backup(_tiny_model(), _epoch_data, run=run, model_id="m", epochs=5, verbose=0)
    monkeypatch.undo()
    rows_before = read_metrics_rows(run.metrics_path("m"))
    assert [row["epoch"] for row in rows_before] == [0, 1, 2]
    keras.utils.set_random_seed(0)
    lines = []
    outcome = fit_with_backup(_tiny_model(), _epoch_data, run=run, model_id="m", epochs=5, verbose=0,
                              log=lines.append)
    assert outcome["first_epoch"] == 2 and lines == ["m: resuming after epoch 2 of 5"]
    # Epoch 2's checkpoint died with the process, so epoch 2 is trained again, once.
    assert [row["epoch"] for row in outcome["history"]] == [0, 1, 2, 3, 4]
    assert outcome["history"][:2] == rows_before[:2]  # finished epochs are not retrained
    assert outcome["history"] == read_metrics_rows(run.metrics_path("m"))
    for resumed_row, reference_row in zip(outcome["history"], reference["history"]):
        assert resumed_row["loss"] == pytest.approx(reference_row["loss"], rel=1e-6)
    # Trained to the end: the backup stays until run_grid records the result.
    assert [epoch for epoch, _ in Checkpoints(run.backup_dir("m")).saved()] == [4, 5]
    again = fit_with_backup(_tiny_model(), _epoch_data, run=run, model_id="m", epochs=5, verbose=0)
    assert again["first_epoch"] == 5 and again["history"] == outcome["history"]


def test_a_damaged_or_incomplete_metrics_csv_is_a_one_line_error(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    fit_with_backup(_tiny_model(), _epoch_data, run=run, model_id="m", epochs=2, verbose=0)
    csv_path = run.metrics_path("m")
    csv_path.write_text("epoch,loss\n0,0.5\n1,\x00\x01zz\n")
    with pytest.raises(RunFileError, match=f"{csv_path} is damaged"):
        fit_with_backup(_tiny_model(), _epoch_data, run=run, model_id="m", epochs=3, verbose=0)
    csv_path.write_text("epoch,loss\n0,0.5\n")  # the checkpoint says 2 epochs
    with pytest.raises(RunFileError, match="lacks rows of the 2 epochs"):
        fit_with_backup(_tiny_model(), _epoch_data, run=run, model_id="m", epochs=3, verbose=0)


def test_divergence_is_recorded_not_raised_and_never_checkpointed(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    model = _tiny_model()
    model.compile(optimizer=keras.optimizers.SGD(1e30), loss="mse")
    x, y = XY

    def exploding(epoch):
        return tf.data.Dataset.from_tensor_slices((x * 1e10, y)).batch(8)

    outcome = fit_with_backup(model, exploding, run=run, model_id="boom", epochs=4, verbose=0)
    assert outcome["diverged_epoch"] == 0
    assert len(outcome["history"]) == 1
    assert Checkpoints(run.backup_dir("boom")).saved() == []


def test_the_per_epoch_evaluation_is_named_for_what_it_is_in_csv_progress_bar_and_tensorboard(tmp_path, capsys):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    model = _tiny_model()
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    curve = tf.data.Dataset.from_tensor_slices(XY).take(16).batch(8)
    outcome = fit_with_backup(model, _epoch_data, run=run, model_id="m", epochs=2, verbose=2,
                              curve_data=curve, curve_name="test_subset")
    expected = model.evaluate(curve, verbose=0, return_dict=True)
    for row in (outcome["history"][-1], read_metrics_rows(run.metrics_path("m"))[-1]):
        assert not any(key.startswith("val_") for key in row)
        assert row["test_subset_loss"] == pytest.approx(expected["loss"], rel=1e-5)
        assert row["test_subset_mae"] == pytest.approx(expected["mae"], rel=1e-5)
    printed = capsys.readouterr().out
    assert "test_subset_loss" in printed and "val_" not in printed  # Keras' progress lines
    if not importlib.util.find_spec("tensorboard"):
        pytest.skip("the tensorboard package (the test extra) writes TensorBoard logs")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # Keras' layout: the curve data's columns are validation/'s epoch_loss, epoch_mae
    events = EventAccumulator(str(run.tensorboard_dir("m") / "validation")).Reload()
    assert {"epoch_loss", "epoch_mae"} <= set(events.Tags()["tensors"])
    steps = [event.step for event in events.Tensors("epoch_loss")]
    assert steps == [0, 1]  # one fit per epoch, one curve with a point per epoch
    logged = tf.make_ndarray(events.Tensors("epoch_loss")[-1].tensor_proto)
    assert float(logged) == pytest.approx(expected["loss"], rel=1e-5)


@dataclasses.dataclass
class Spec:
    id: str


def test_run_grid_skips_finished_models_records_each_and_then_drops_its_backup(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")
    run.record_model({"id": "a", "variant": "v", "depth": 1, "seconds": 1.0})
    run.backup_dir("a").mkdir(parents=True)  # recorded, then killed before its backup was deleted
    trained, first_weights = [], []

    def train_one(spec):
        trained.append(spec.id)
        first_weights.append(keras.random.uniform((3,)).numpy())
        run.backup_dir(spec.id).mkdir(parents=True)
        assert run.backup_dir(spec.id).is_dir()
        return ModelResult(spec.id, "v", 1, seconds=0.5, diverged=spec.id == "c",
                           diverged_at="epoch 2" if spec.id == "c" else None)

    lines = []
    results = run_grid(run, [Spec("a"), Spec("b"), Spec("c")], train_one, log=lines.append, seed=7)
    assert trained == ["b", "c"]
    assert [m.id for m in results.models] == ["a", "b", "c"]
    assert any("model 3/3: c diverged at epoch 2" in line for line in lines)
    assert not (run.path / "backup").exists()
    # Each model starts from the run's seed, whatever trained before it.
    np.testing.assert_array_equal(first_weights[0], first_weights[1])


def test_run_grid_keeps_the_backup_of_a_model_whose_result_is_not_recorded(tmp_path):
    run = RunDirectory.create("toy", ToyConfig(), out=tmp_path / "run")

    def train_one(spec):
        run.backup_dir(spec.id).mkdir(parents=True)
        raise Killed

    with pytest.raises(Killed):
        run_grid(run, [Spec("a")], train_one, log=lambda line: None)
    assert run.backup_dir("a").is_dir()


def test_outcome_lines_and_throughput():
    assert describe_outcome(ModelResult("m", "v", 1, diverged=False, diverged_at=None)) == "done"
    assert describe_outcome(ModelResult("m", "v", 1, diverged=True, diverged_at="epoch 1")) == "diverged at epoch 1"
    assert describe_outcome(ModelResult("m", "v", 1, diverged=True, diverged_at="step 500")) == "diverged at step 500"
    assert describe_outcome(ModelResult("m", "v", 1, diverged=True)) == "diverged"  # where is not known
    history = [{"seconds": 10.0}, {"seconds": 2.0}, {"seconds": 2.0}, {"seconds": 4.0}]
    assert throughput(history, 100) == pytest.approx(50.0)


@pytest.mark.parametrize("flags, expected", [("fpu avx512f avx512_bf16 avx512_vnni", True),
                                             ("fpu avx512f amx_bf16 amx_tile", True),
                                             ("fpu avx2 avx512f avx512_vnni", False), (None, False)])
def test_the_cpus_bfloat16_instructions_are_read_without_tensorflow(tmp_path, flags, expected):
    from tracks.common.cpu_settings import cpu_has_bf16

    cpuinfo = tmp_path / "cpuinfo"
    if flags is not None:
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: a CPU\nflags\t\t: {flags}\n\n")
    assert cpu_has_bf16(str(cpuinfo)) is expected


@pytest.mark.parametrize("track_gains, cpu_has, expected", [(True, True, "bf16"), (True, False, "fp32"),
                                                            (False, True, "fp32")])
def test_precision_auto_on_a_cpu_is_bf16_where_the_cpu_has_it_and_the_track_gains(monkeypatch, track_gains,
                                                                                  cpu_has, expected):
    import keras

    from tracks.common import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "_gpu_details", lambda: [])
    monkeypatch.setattr(runtime_module, "cpu_has_bf16", lambda: cpu_has)
    try:
        runtime = runtime_module.setup_runtime("auto", "off", cpu_bf16=track_gains)
        assert runtime.precision == expected
        assert keras.config.dtype_policy().name == ("mixed_bfloat16" if expected == "bf16" else "float32")
        assert runtime_module.setup_runtime("fp32", "off", cpu_bf16=track_gains).precision == "fp32"  # typed: kept
    finally:
        keras.config.set_dtype_policy("float32")
