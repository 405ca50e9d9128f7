"""Running a track's CLI in-process, and simulating a killed process, for the track tests."""

import keras

from tracks.common import training


def run_cli(main, argv, capsys):
    """Runs `main(argv)`; returns (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing in the code catches it."""


def kill_at(monkeypatch, model_id, epoch, *, after_backup):
    """Makes training die at the end of `epoch` of `model_id`.

    after_backup=False: after the CSV row is written, before the backup is
    saved (the worst case: the row must be rewritten, not duplicated).
    after_backup=True: after the backup (the epoch must not be trained again).
    """
    original_end = training.EpochLog.on_epoch_end
    original_backup_end = keras.callbacks.BackupAndRestore.on_epoch_end

    def epoch_log_end(self, this_epoch, logs=None):
        original_end(self, this_epoch, logs)
        if not after_backup and self.path.stem == model_id and this_epoch == epoch:
            raise Killed

    def backup_end(self, this_epoch, logs=None):
        original_backup_end(self, this_epoch, logs)
        if after_backup and self.backup_dir.endswith(model_id) and this_epoch == epoch:
            raise Killed

    monkeypatch.setattr(training.EpochLog, "on_epoch_end", epoch_log_end)
    monkeypatch.setattr(keras.callbacks.BackupAndRestore, "on_epoch_end", backup_end)
