"""Fault injection: real SIGKILLs, SIGTERMs and Ctrl-Cs at many points of a run, a full disk, a resume after each.

The fast tests kill a tiny training inside a checkpoint save, SIGTERM a toy
run mid-epoch and fill the disk during one of its saves, then resume each
to the uninterrupted run's numbers. The slow ones
(`pytest -m slow -k fault_injection -s` prints the figures) kill a smoke run
of the vision track at every point of a model's life and at random moments,
press Ctrl-C once, resume after each, and compare the end with an
uninterrupted run; SIGTERM and Ctrl-C a toy run at every stage (data,
first step, mid-epoch, checkpoint write, report); and start a second process
on a run in training.
"""

import errno
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import keras
import tensorflow as tf
from track_helpers import SIGNAL_STAGES, disk_full_at, run_cli, signal_at
from tracks.common.run_directory import RunDirectory
from tracks.common.training import Checkpoints, fit_with_backup, read_metrics_rows
from tracks.toy.__main__ import main as toy_main
from tracks.toy.track import TRACK as TOY

TESTS = Path(__file__).resolve().parents[1]  # tests/: fault_runner.py
ROOT = TESTS.parent


def _env():
    here = Path(__file__).resolve().parent  # this module, which the subprocess imports too
    path = os.pathsep.join([str(ROOT), str(TESTS), str(here), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "3"}


def tiny_model():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="mse")
    return model


def tiny_epoch_data(epoch):
    x = np.random.default_rng(epoch).normal(size=(32, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(8)


TINY_TRAINING = textwrap.dedent("""
    import sys
    import pytest
    from fault_runner import sigkill
    from test_fault_injection import tiny_epoch_data, tiny_model
    from track_helpers import kill_at
    from tracks.common.run_directory import RunDirectory
    from tracks.common.training import fit_with_backup

    run = RunDirectory(sys.argv[1], "toy")
    run.lock()
    with pytest.MonkeyPatch.context() as monkeypatch:
        kill_at(monkeypatch, "m", "inside-save", epoch=1, die=sigkill)
        fit_with_backup(tiny_model(), tiny_epoch_data, run=run, model_id="m", epochs=4, verbose=0)
""")


def test_sigkill_inside_a_checkpoint_save_leaves_a_resumable_model(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    killed = subprocess.run([sys.executable, "-c", TINY_TRAINING, str(run_dir)], env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    backup = run_dir / "backup" / "m"
    partial = backup / "partial-epoch-0002.weights.h5"
    assert partial.exists() and partial.stat().st_size > 0  # the save really was cut in half
    assert [epoch for epoch, _ in Checkpoints(backup).saved()] == [1]

    run = RunDirectory(run_dir, "toy")
    run.lock()  # the dead process' lock was released by the operating system
    lines = []
    outcome = fit_with_backup(tiny_model(), tiny_epoch_data, run=run, model_id="m", epochs=4, verbose=0,
                              log=lines.append)
    assert lines == ["m: resuming after epoch 1 of 4"]  # epoch 0 is not trained again
    assert [row["epoch"] for row in outcome["history"]] == [0, 1, 2, 3]
    assert outcome["history"] == read_metrics_rows(run.metrics_path("m"))
    assert not partial.exists()
    run.release()


# --------------------------------------------------------------------------- #
# SIGTERM, Ctrl-C and a full disk on the toy track
# --------------------------------------------------------------------------- #

TOY_ARGV = ["--preset", "smoke", "--depths", "2", "--epochs", "2", "--steps-per-execution", "1"]


def toy_numbers(run_dir):
    """Every number of a toy run that training decides: the results' losses and accuracies, each epoch's row."""
    results = json.loads((run_dir / "results.json").read_text())
    numbers = {}
    for entry in results["models"]:
        rows = read_metrics_rows(run_dir / "metrics" / f"{entry['id']}.csv")
        numbers[entry["id"]] = {
            "final": [entry[key] for key in ("train_loss", "train_accuracy", "test_accuracy")],
            "epochs": [{key: value for key, value in row.items() if key != "seconds"} for row in rows],
        }
    return numbers


@pytest.fixture(scope="module")
def uninterrupted_toy(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy") / "whole"
    assert toy_main([*TOY_ARGV, "--out", str(out)]) == 0
    return toy_numbers(out)


def test_a_sigterm_mid_epoch_is_one_line_exit_143_and_resume_gives_identical_numbers(
        tmp_path, capsys, monkeypatch, uninterrupted_toy):
    run_dir = tmp_path / "run"
    with monkeypatch.context() as patched:
        signal_at(patched, TOY, "mid-epoch", signal.SIGTERM, "residual-2")
        code, _, err = run_cli(toy_main, [*TOY_ARGV, "--out", run_dir], capsys)
    assert code == 143
    assert err == (f"terminated (SIGTERM); finished epochs and models are kept: continue with "
                   f"python -m tracks.toy --resume {run_dir}\n")
    assert [m["id"] for m in json.loads((run_dir / "results.json").read_text())["models"]] == ["plain-2"]
    assert [epoch for epoch, _ in Checkpoints(run_dir / "backup" / "residual-2").saved()] == [1]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the command's handler is gone again
    code, _, err = run_cli(toy_main, ["--resume", run_dir], capsys)
    assert code == 0, err
    assert toy_numbers(run_dir) == uninterrupted_toy  # identical, not close


def test_a_full_disk_during_a_save_keeps_the_last_checkpoint_and_says_so_in_one_line(
        tmp_path, capsys, monkeypatch, uninterrupted_toy):
    run_dir = tmp_path / "run"
    with monkeypatch.context() as patched:
        disk_full_at(patched, "residual-2", epochs_done=2)
        code, _, err = run_cli(toy_main, [*TOY_ARGV, "--out", run_dir], capsys)
    backup = run_dir / "backup" / "residual-2"
    assert code == 2
    assert err == (f"error: {backup / 'partial-epoch-0002.weights.h5'}: {os.strerror(errno.ENOSPC)}; fix that, "
                   f"then continue with python -m tracks.toy --resume {run_dir}\n")
    assert sorted(path.name for path in backup.iterdir()) == ["epoch-0001.weights.h5"]  # no half-written file
    code, _, err = run_cli(toy_main, ["--resume", run_dir], capsys)
    assert code == 0, err
    assert toy_numbers(run_dir) == uninterrupted_toy


def test_a_full_disk_on_a_write_that_names_no_file_names_the_run_folder(
        tmp_path, capsys, monkeypatch, uninterrupted_toy):
    """A full disk fails a write, not an open: the OSError names no file, so the line names the run's folder."""
    from tracks.common import run_directory

    write_json = run_directory.write_json

    def full(path, data):
        if Path(path).name == "results.json" and data.get("models"):  # the first model's result, not creation's
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_json(path, data)

    run_dir = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(run_directory, "write_json", full)
        code, _, err = run_cli(toy_main, [*TOY_ARGV, "--out", run_dir], capsys)
    assert code == 2
    assert err == (f"error: a file in {run_dir}: {os.strerror(errno.ENOSPC)}; fix that, then continue with "
                   f"python -m tracks.toy --resume {run_dir}\n")
    code, _, err = run_cli(toy_main, ["--resume", run_dir], capsys)
    assert code == 0, err
    assert toy_numbers(run_dir) == uninterrupted_toy


@pytest.mark.parametrize("signum, code, line", [(signal.SIGTERM, 143, "terminated (SIGTERM)\n"),
                                                (signal.SIGINT, 130, "interrupted\n")])
def test_a_signal_during_a_command_that_writes_no_run_is_one_line(signum, code, line, capsys, monkeypatch):
    from tracks.common import cli

    monkeypatch.setattr(cli, "compare_command", lambda track, argv: os.kill(os.getpid(), signum))
    assert run_cli(toy_main, ["compare", "RUN", "REFERENCE"], capsys) == (code, "", line)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def _signal_turned_into(error, signum):
    """A callable that sends `signum` to this process and, as TensorFlow does when the signal cuts its tracing
    short (a toy run in CI, 7 December: `ValueError: None values not supported.`), raises `error` instead."""

    def mangled(*args, **kwargs):
        try:
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler raises in here
        except KeyboardInterrupt:
            raise error from None
        raise AssertionError("the signal never came")

    return mangled


@pytest.mark.parametrize("error", [ValueError("None values not supported."),
                                   SystemError("Objects/listobject.c:338: bad argument to internal function")])
@pytest.mark.parametrize("signum, code, word", [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                                (signal.SIGINT, 130, "interrupted")])
def test_an_error_a_signal_causes_on_its_way_up_is_that_signal_in_one_line(tmp_path, capsys, monkeypatch,
                                                                           signum, code, word, error):
    """Code that a signal cuts short may fail with an error of its own before the signal's exception reaches the
    command: while the signal is pending, that error is the signal's (one line, its exit code), in a run's
    command and in one that writes no run alike."""
    from tracks.common import cli
    from tracks.toy import experiment

    run_dir = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(experiment, "fit_with_backup", _signal_turned_into(error, signum))
        returned, _, err = run_cli(toy_main, [*TOY_ARGV, "--out", run_dir], capsys)
    assert (returned, err) == (code, f"{word}; finished epochs and models are kept: continue with "
                                     f"python -m tracks.toy --resume {run_dir}\n")
    with monkeypatch.context() as patched:
        patched.setattr(cli, "compare_command", _signal_turned_into(error, signum))
        assert run_cli(toy_main, ["compare", "RUN", "REFERENCE"], capsys) == (code, "", f"{word}\n")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_error_with_no_signal_pending_is_left_as_it_is():
    """The rule above hides no fault of the run's: with no signal received, the error goes on as itself."""
    from tracks.common.command import errors_of_a_signal, signals_as_interruptions

    with signals_as_interruptions(), pytest.raises(ValueError, match="^a fault of its own$"):
        with errors_of_a_signal():
            raise ValueError("a fault of its own")


@pytest.mark.slow
def test_sigterm_and_ctrl_c_at_every_stage_end_in_one_line_and_resume_to_the_same_numbers(tmp_path):
    whole = subprocess.run([sys.executable, str(TESTS / "fault_runner.py"), "toy", "none", *TOY_ARGV,
                            "--out", str(tmp_path / "whole")], env=_env(), capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stderr[-2000:]
    expected = toy_numbers(tmp_path / "whole")
    for stage in SIGNAL_STAGES:
        for name, code in (("SIGTERM", 143), ("SIGINT", 130)):
            run_dir = tmp_path / f"{stage}-{name}"
            fault = f"signal:{stage}:{name}:residual-2"
            stopped = subprocess.run([sys.executable, str(TESTS / "fault_runner.py"), "toy", fault, *TOY_ARGV,
                                      "--out", str(run_dir)], env=_env(), capture_output=True, text=True,
                                     timeout=600)
            said = _our_lines(stopped.stderr)
            assert stopped.returncode == code and said.count("\n") == 1, (stage, name, stopped.returncode, said)
            word = "terminated (SIGTERM)" if name == "SIGTERM" else "interrupted"
            if stage == "data":  # nothing written: the same command starts again
                assert said == f"{word} before anything was written\n" and not run_dir.exists()
                again = [*TOY_ARGV, "--out", str(run_dir)]
            else:
                assert said == (f"{word}; finished epochs and models are kept: continue with "
                                f"python -m tracks.toy --resume {run_dir}\n"), (stage, said)
                again = ["--resume", str(run_dir)]
            resumed = subprocess.run([sys.executable, str(TESTS / "fault_runner.py"), "toy", "none", *again],
                                     env=_env(), capture_output=True, text=True, timeout=600)
            assert resumed.returncode == 0, (stage, name, resumed.stderr[-2000:])
            assert toy_numbers(run_dir) == expected, (stage, name)


def test_a_signal_raised_inside_a_finaliser_prints_nothing_and_still_stops_the_command(capfd):
    """Python hands an exception raised in a finaliser to sys.unraisablehook ("Exception ignored ... Traceback"):
    the command's hook takes its own interruption silently and delivers it again, outside the finaliser."""
    from tracks.common.command import Terminated, signals_as_interruptions, take_interruption

    class Finalised:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)  # the handler runs here, inside the finaliser

    capfd.readouterr()
    hook = sys.unraisablehook  # pytest's own
    with signals_as_interruptions():
        with pytest.raises(Terminated):
            Finalised()  # collected at once
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # the signal comes back within REDELIVERY_SECONDS
                time.sleep(0.01)
        take_interruption()
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and sys.unraisablehook is hook


@pytest.mark.slow
def test_sigterm_and_ctrl_c_while_the_instruments_run_never_show_a_traceback(tmp_path):
    """Real signals at many moments of the toy's two instrument phases (the untrained grid measured, the trained
    nets taken apart): one line, the signal's exit code, no "Traceback" or "Exception ignored" on stderr."""
    moments = [("initialisation", seconds) for seconds in (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0, 1.4)]
    moments += [("studies", seconds) for seconds in (0.05, 0.3, 0.6, 1.0)]
    for index, (phase, seconds) in enumerate(moments):
        name, code = (("SIGTERM", 143), ("SIGINT", 130))[index % 2]
        run_dir = tmp_path / f"{phase}-{seconds}-{name}"
        stopped = subprocess.run([sys.executable, str(TESTS / "fault_runner.py"), "toy",
                                  f"instruments:{phase}:{name}:{seconds}", *TOY_ARGV, "--out", str(run_dir)],
                                 env=_env(), capture_output=True, text=True, timeout=600)
        said = _our_lines(stopped.stderr)
        assert "Traceback" not in said and "Exception ignored" not in said, (phase, seconds, name, said)
        assert stopped.returncode == code and said.count("\n") == 1, (phase, seconds, name, stopped.returncode, said)


# --------------------------------------------------------------------------- #
# The slow fault injection of a whole run
# --------------------------------------------------------------------------- #

ARGV = ["--preset", "smoke", "--data", "synthetic", "--depths", "8", "--epochs", "3", "--train-size", "128",
        "--xla", "off"]
MODELS = ("plain-8", "residual-8")
# Every point of a model's life, in order (each one is reached: the kill before stops earlier).
FAULTS = [
    "plain-8:inside-save:0", "plain-8:after-row:1", "plain-8:after-checkpoint:1", "plain-8:inside-save:2",
    "plain-8:before-record:0", "plain-8:inside-record:0", "plain-8:after-record:0",
    "residual-8:after-row:0", "residual-8:inside-save:2", "residual-8:before-record:0",
    "residual-8:after-record:0",
]
# Then a second run, interrupted at random moments (imports, data, instruments, training, saves, report).
RANDOM_FAULTS = ["random", "ctrl-c", "random", "random", "random", "random", "random", "random"]


def _start(fault, argv):
    """The vision track in a subprocess (output to files: a full pipe would block it)."""
    fault = "none" if fault in ("random", "ctrl-c") else fault
    outputs = (tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+"))
    process = subprocess.Popen([sys.executable, str(TESTS / "fault_runner.py"), "vision", fault, *map(str, argv)],
                               env=_env(), stdout=outputs[0], stderr=outputs[1])
    process.output_files = outputs
    return process


def _finish(process, timeout=600):
    """(stdout, stderr) once `process` has ended."""
    process.wait(timeout=timeout)
    outputs = []
    for stream in process.output_files:
        stream.seek(0)
        outputs.append(stream.read())
        stream.close()
    return outputs


def _state(run_dir):
    """(csv rows per model, recorded ids, safe epochs per model: checkpointed or recorded)."""
    rows = {path.stem: read_metrics_rows(path) for path in (run_dir / "metrics").glob("*.csv")}
    recorded = []
    if (run_dir / "results.json").exists():
        recorded = [m["id"] for m in json.loads((run_dir / "results.json").read_text())["models"]]
    safe = {}
    for model, model_rows in rows.items():
        saved = Checkpoints(run_dir / "backup" / model).saved()
        safe[model] = len(model_rows) if model in recorded else (saved[-1][0] if saved else 0)
    return rows, recorded, safe


def _signal_after(process, seconds, signum):
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signum)


def _lock_holder(run_dir):
    try:
        return (run_dir / ".lock").read_text().strip()
    except OSError:
        return None


def _our_lines(stderr):
    """stderr without TensorFlow's own start-up log lines."""
    tf_log = ("WARNING: All log messages before absl", "I0000 ", "W0000 ", "E0000 ")
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith(tf_log))


def _interrupt_until_done(run_dir, faults, rng, figures):
    """Starts (or resumes) the run once per fault, then once more to the end, checking after each."""
    for fault in [*faults, "none"]:
        started = (run_dir / "config.json").exists()
        before_rows, _, before_safe = _state(run_dir) if started else ({}, [], {})
        process = _start(fault, ["--resume", run_dir] if started else [*ARGV, "--out", run_dir])
        if fault == "random":
            _signal_after(process, rng.uniform(1.0, 14.0), signal.SIGKILL)
        if fault == "ctrl-c":  # once the run is open (Ctrl-C during `import tensorflow` is Python's)
            while process.poll() is None and _lock_holder(run_dir) != str(process.pid):
                time.sleep(0.1)
            _signal_after(process, rng.uniform(0.2, 3.0), signal.SIGINT)
        _, err = _finish(process)
        err = _our_lines(err)
        if process.returncode == -signal.SIGKILL:
            figures["kills"] += 1
        elif process.returncode == 130:
            figures["ctrl_c"] += 1
            assert err.count("\n") == 1, err
            assert f"continue with python -m tracks.vision --resume {run_dir}" in err or (
                "interrupted before training started" in err), err
        else:  # a random signal that came after the end
            assert process.returncode == 0 and fault in ("none", "random", "ctrl-c"), (fault, err[-3000:])
        if started:
            figures["resumes_continued" if "error:" not in err else "resumes_failed"] += 1
        rows, recorded, _ = _state(run_dir)
        assert len(set(recorded)) == len(recorded)
        for model, model_rows in rows.items():
            epochs = [row["epoch"] for row in model_rows]
            figures["rows_duplicated"] += len(epochs) - len(set(epochs))
            assert epochs == list(range(len(epochs))), (fault, model, epochs)
        for model, safe in before_safe.items():  # what was safe before the kill is still there, unchanged
            kept = rows.get(model, [])[:safe]
            figures["rows_lost"] += safe - len(kept)
            changed = sum(a != b for a, b in zip(kept, before_rows[model][:safe]))  # "seconds" would differ
            figures["finished_epochs_retrained"] += changed
            figures["models_retrained_from_scratch"] += int(safe > 0 and changed == safe)


def _differences(run_dir, whole):
    """|metric - uninterrupted metric| for every epoch row and test error."""
    results = json.loads((run_dir / "results.json").read_text())
    reference = json.loads((whole / "results.json").read_text())
    assert [m["id"] for m in results["models"]] == list(MODELS) and not (run_dir / "backup").exists()
    differences = [abs(a["test_error"] - b["test_error"]) for a, b in zip(results["models"], reference["models"])]
    for model in MODELS:
        rows = read_metrics_rows(run_dir / "metrics" / f"{model}.csv")
        reference_rows = read_metrics_rows(whole / "metrics" / f"{model}.csv")
        assert [row["epoch"] for row in rows] == [0, 1, 2]
        differences += [abs(row[key] - ref[key]) for row, ref in zip(rows, reference_rows)
                        for key in ("loss", "accuracy", "test_subset_loss", "test_subset_accuracy")]
    return differences


@pytest.mark.slow
def test_fault_injection_sigkill_at_every_point_and_at_random(tmp_path):
    reference = subprocess.run([sys.executable, str(TESTS / "fault_runner.py"), "vision", "none", *ARGV,
                                "--out", str(tmp_path / "whole")], env=_env(), capture_output=True, text=True,
                               timeout=600)
    assert reference.returncode == 0, reference.stderr[-2000:]
    figures = {"kills": 0, "ctrl_c": 0, "resumes_continued": 0, "resumes_failed": 0, "rows_lost": 0,
               "rows_duplicated": 0, "finished_epochs_retrained": 0, "models_retrained_from_scratch": 0}
    _interrupt_until_done(tmp_path / "points", FAULTS, None, figures)
    assert figures["kills"] == len(FAULTS)  # every point was reached
    _interrupt_until_done(tmp_path / "random", RANDOM_FAULTS, random.Random(14), figures)
    differences = _differences(tmp_path / "points", tmp_path / "whole")
    differences += _differences(tmp_path / "random", tmp_path / "whole")
    figures["max_difference_to_uninterrupted"] = max(differences)
    print("\nFAULT INJECTION FIGURES", json.dumps(figures))
    assert figures["resumes_failed"] == 0
    assert figures["rows_lost"] == figures["rows_duplicated"] == 0
    assert figures["finished_epochs_retrained"] == figures["models_retrained_from_scratch"] == 0
    assert figures["max_difference_to_uninterrupted"] <= 1e-5


@pytest.mark.slow
def test_fault_injection_a_second_process_on_a_run_in_training_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    first = _start("none", [*ARGV, "--epochs", "6", "--out", run_dir])
    deadline = time.monotonic() + 300
    while not list((run_dir / "metrics").glob("*.csv")):  # training has begun
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.5)
    lines = []
    for argv in (["--resume", run_dir], [*ARGV, "--out", run_dir]):
        second = subprocess.run([sys.executable, "-m", "tracks.vision", *map(str, argv)], env=_env(),
                                capture_output=True, text=True, timeout=300)
        lines.append(_our_lines(second.stderr).strip())
        assert second.returncode == 2 and _our_lines(second.stderr).count("\n") == 1, second.stderr[-2000:]
    assert f"is in use by another process (pid {first.pid})" in lines[0]
    assert "already exists and is not empty" in lines[1]
    assert first.poll() is None  # the first one trains on, undisturbed
    _, err = _finish(first)
    assert first.returncode == 0, err[-2000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert [m["epochs_trained"] for m in results["models"]] == [6, 6]
    for model in MODELS:
        assert [row["epoch"] for row in read_metrics_rows(run_dir / "metrics" / f"{model}.csv")] == list(range(6))
    print("\nCONCURRENCY", json.dumps({"second_process": lines}))
