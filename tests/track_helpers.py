"""Running a track's CLI in-process, and simulating a killed process, for the track tests."""

import hashlib
import json

import keras

from tracks.common import training
from tracks.common.run_dir import RunDirectory

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
    """Runs `main(argv)`; returns (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
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


def snapshot(directory):
    """{relative path: sha256} of every file under `directory` (to prove nothing changed)."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*")) if path.is_file()
    }
