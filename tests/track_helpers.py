"""Running a track's CLI in-process, and simulating a killed process, for the track tests."""

import dataclasses
import errno
import hashlib
import json
import os

import keras

from tracks.common import training
from tracks.common.run_directory import RunDirectory
from tracks.common.track import Track

# Where `kill_at` can stop a run, in the order they happen for one model.
KILL_POINTS = (
    "inside-save",  # half of a checkpoint file is written
    "after-row",  # the epoch's CSV row is written, its checkpoint is not
    "after-checkpoint",  # the epoch's checkpoint is written
    "before-record",  # trained and evaluated; the results entry is not written
    "inside-record",  # half of the new results.json is written
    "after-record",  # the results entry is written; the checkpoints are not yet deleted
)


def run_cli(main, argv, capsys):
    """Runs `main(argv)`; returns (exit code, stdout, stderr): argparse's refusals exit with SystemExit(2)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing in the code catches it."""


def assert_refused_in_one_line(main, argv, out, capsys, message):
    """`main(argv + --out out)` exits 2 with `message` on one stderr line, and writes nothing."""
    code, _, err = run_cli(main, [*argv, "--out", out], capsys)
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def raise_killed():
    raise Killed


def kill_at(monkeypatch, model_id, point, epoch=0, die=raise_killed):
    """Makes training die at `point` (one of `KILL_POINTS`) of `model_id`.

    The epoch points ("inside-save", "after-row", "after-checkpoint") are
    those of the end of `epoch` (0-based). `die` is how: by default it raises
    `Killed`; a subprocess passes a real SIGKILL.
    """
    assert point in KILL_POINTS, point
    save_checkpoint = training.Checkpoints.save
    save_weights = keras.Model.save_weights
    record_model = RunDirectory.record_model

    def checkpoint(self, model, epochs_done):
        if self.directory.name == model_id and epochs_done == epoch + 1:
            if point == "after-row":
                die()
            if point == "inside-save":
                monkeypatch.setattr(keras.Model, "save_weights", half_written)
        save_checkpoint(self, model, epochs_done)
        if self.directory.name == model_id and epochs_done == epoch + 1 and point == "after-checkpoint":
            die()

    def half_written(self, filepath, *args, **kwargs):
        save_weights(self, filepath, *args, **kwargs)
        with open(filepath, "r+b") as handle:
            handle.truncate(handle.seek(0, 2) // 2)
        die()

    def record(self, entry):
        if entry["id"] == model_id and point == "before-record":
            die()
        if entry["id"] == model_id and point == "inside-record":
            text = json.dumps({**self.read_results(), "models": self.read_results()["models"] + [entry]})
            (self.path / "results.json.tmp").write_text(text[: len(text) // 2])
            die()
        record_model(self, entry)
        if entry["id"] == model_id and point == "after-record":
            die()

    monkeypatch.setattr(training.Checkpoints, "save", checkpoint)
    monkeypatch.setattr(RunDirectory, "record_model", record)


# Where `signal_at` sends a signal, in the order a run reaches them.
SIGNAL_STAGES = (
    "data",  # the data are loaded; nothing is written yet
    "first-step",  # the first training step of the first model has run
    "mid-epoch",  # step 3 of the second epoch of `model_id`
    "checkpoint",  # half of `model_id`'s first checkpoint file is written
    "report",  # every model is trained and recorded; the report is being written
)


def signal_at(monkeypatch, track, stage, signum, model_id):
    """Sends `signum` to this process at `stage` (one of `SIGNAL_STAGES`) of a run of `track` (a Track).

    The signal is real (`os.kill`), so the run's own handlers answer it: Ctrl-C
    (SIGINT) raises KeyboardInterrupt, SIGTERM what the command installed.
    The mid-epoch stage needs one step per execution (`--steps-per-execution 1`).
    """
    assert stage in SIGNAL_STAGES, stage
    send = lambda: os.kill(os.getpid(), signum)  # noqa: E731
    keras_name = model_id.replace("-", "_")
    steps = {}

    if stage in ("data", "report"):
        name = {"data": "load_data", "report": "report"}[stage]
        original = getattr(track.parts, name)

        def wrapped(*args, **kwargs):
            if stage == "report":
                send()
            result = original(*args, **kwargs)
            if stage == "data":
                send()
            return result

        patched, loaded = dataclasses.replace(track.parts, **{name: wrapped}), Track.parts.fget
        monkeypatch.setattr(Track, "parts", property(lambda self: patched if self.name == track.name else loaded(self)))
    elif stage in ("first-step", "mid-epoch"):
        on_batch_end = training.EpochProgress.on_train_batch_end

        def counted(self, batch, logs=None):
            on_batch_end(self, batch, logs)
            steps[self.model.name] = steps.get(self.model.name, 0) + 1
            if stage == "first-step" and sum(steps.values()) == 1:
                send()
            if stage == "mid-epoch" and self.model.name == keras_name and batch == 2 and self.epochs_done == 1:
                send()

        def begin(self, epoch, logs=None):
            self.epochs_done = epoch
            return on_epoch_begin(self, epoch, logs)

        on_epoch_begin = training.EpochProgress.on_epoch_begin
        monkeypatch.setattr(training.EpochProgress, "on_train_batch_end", counted)
        monkeypatch.setattr(training.EpochProgress, "on_epoch_begin", begin)
    else:
        save_weights = keras.Model.save_weights

        def half_then_signal(self, filepath, *args, **kwargs):
            save_weights(self, filepath, *args, **kwargs)
            if self.name == keras_name and not steps.get("sent"):
                steps["sent"] = True
                with open(filepath, "r+b") as handle:
                    handle.truncate(handle.seek(0, 2) // 2)
                send()

        monkeypatch.setattr(keras.Model, "save_weights", half_then_signal)


def disk_full_at(monkeypatch, model_id, epochs_done):
    """Makes `model_id`'s checkpoint after `epochs_done` epochs fail as a full disk does: half written, ENOSPC."""
    save_weights = keras.Model.save_weights
    keras_name = model_id.replace("-", "_")

    def full(self, filepath, *args, **kwargs):
        if self.name == keras_name and str(filepath).endswith(f"epoch-{epochs_done:04d}.weights.h5"):
            with open(filepath, "wb") as handle:
                handle.write(b"\x89HDF\r\n\x1a\n" + bytes(1000))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filepath))
        return save_weights(self, filepath, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "save_weights", full)


def snapshot(directory):
    """{relative path: sha256} of every file under `directory` (to prove nothing changed)."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*")) if path.is_file()
    }
