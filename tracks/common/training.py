"""Training one model of a grid, and the grid itself, without losing work.

- `EpochLog` writes one CSV row per epoch (metrics and seconds). On resume it
  drops rows of epochs the restored weights have not seen, so the CSV is
  always exactly the model's history, never duplicated.
- `DivergenceMonitor` stops a model whose loss becomes NaN or infinite: a
  diverging model is a result ("diverged at epoch k"), not a crash.
- Keras' `BackupAndRestore` saves weights and optimizer state after every
  epoch, so an interrupted model resumes from its last finished epoch.
- `run_grid` trains the models in order, skips those already in
  results.json, and prints an overall "model i/N" line with an ETA.
"""

import csv
import math
import statistics
import sys
import time

import keras


class EpochLog(keras.callbacks.Callback):
    """Appends per-epoch logs to a CSV file; truncates it on resume."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        self._truncated = False
        self._start = None

    def on_epoch_begin(self, epoch, logs=None):
        if not self._truncated:
            rows = read_metrics_rows(self.path)
            write_metrics_rows(self.path, [row for row in rows if int(row["epoch"]) < epoch])
            self._truncated = True
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        row = {"epoch": epoch, "seconds": round(time.perf_counter() - self._start, 3)}
        for key, value in (logs or {}).items():
            row[key] = float(value)
        rows = read_metrics_rows(self.path) + [row]
        write_metrics_rows(self.path, rows)


def read_metrics_rows(path):
    """The CSV rows written by `EpochLog`, as dicts of floats (epoch as int)."""
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [
        {key: (int(value) if key == "epoch" else float(value)) for key, value in row.items() if value != ""}
        for row in rows
    ]


def write_metrics_rows(path, rows):
    fields = []
    for row in rows:
        fields += [key for key in row if key not in fields]
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


class DivergenceMonitor(keras.callbacks.Callback):
    """Stops training when the loss stops being finite; remembers the epoch."""

    def __init__(self):
        super().__init__()
        self.diverged_epoch = None
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def _check(self, logs):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)) and self.diverged_epoch is None:
            self.diverged_epoch = self._epoch
            self.model.stop_training = True

    def on_train_batch_end(self, batch, logs=None):
        self._check(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._check(logs)


def progress_verbosity():
    """Keras progress bars on a terminal; one line per epoch in logs and CI."""
    return 1 if sys.stdout.isatty() else 2


def fit_with_backup(model, train_data, *, run, model_id, epochs, steps_per_epoch=None,
                    validation_data=None, extra_callbacks=(), verbose=None):
    """`model.fit` with resumable backup, per-epoch CSV and divergence detection.

    Returns:
        dict: `history` (list of per-epoch rows, resumed epochs included),
        `diverged_epoch` (None, or the 0-based epoch whose loss went NaN/inf)
        and `seconds` (wall time of this call).
    """
    metrics_path = run.metrics_path(model_id)
    monitor = DivergenceMonitor()
    callbacks = [
        EpochLog(metrics_path),  # before the backup: a row may be rewritten, never lost
        keras.callbacks.BackupAndRestore(str(run.backup_dir(model_id)), delete_checkpoint=True),
        monitor,
        *extra_callbacks,
    ]
    start = time.perf_counter()
    model.fit(
        train_data,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        validation_data=validation_data,
        callbacks=callbacks,
        shuffle=False,  # the tf.data pipelines shuffle (seeded) themselves
        verbose=progress_verbosity() if verbose is None else verbose,
    )
    history = read_metrics_rows(metrics_path)
    diverged = monitor.diverged_epoch
    if diverged is None and history and not math.isfinite(history[-1].get("loss", 0.0)):
        diverged = history[-1]["epoch"]
    return {
        "history": history,
        "diverged_epoch": diverged,
        "seconds": time.perf_counter() - start,
    }


def throughput(history, samples_per_epoch):
    """Samples per second from the median epoch time (the first epoch, which
    includes compilation, is left out when there are others)."""
    seconds = [row["seconds"] for row in history if "seconds" in row]
    if len(seconds) > 1:
        seconds = seconds[1:]
    if not seconds:
        return None
    return samples_per_epoch / statistics.median(seconds)


def run_grid(run, specs, train_one, log=print, cost=None):
    """Trains every spec not already finished in `run`; returns all results.

    Args:
        run: the `RunDirectory`.
        specs: objects with an `id` attribute, in training order.
        train_one: callable(spec) -> dict, the model's results entry
            (must include "id").
        log: where progress lines go.
        cost: optional callable(spec) -> relative training cost (e.g. the
            depth), so that the time left is estimated from the models done.
    """
    cost = cost or (lambda spec: 1.0)
    finished = run.finished_models()
    todo = [spec for spec in specs if spec.id not in finished]
    if finished:
        log(f"resuming: {len(specs) - len(todo)} of {len(specs)} models already finished")
    start = time.perf_counter()
    for done, spec in enumerate(todo):
        index = specs.index(spec) + 1
        eta = ""
        if done:
            done_cost = sum(cost(s) for s in todo[:done])
            left_cost = sum(cost(s) for s in todo[done:])
            seconds_left = (time.perf_counter() - start) / done_cost * left_cost
            eta = f", about {seconds_left / 60:.1f} min left"
        log(f"=== model {index}/{len(specs)}: {spec.id}{eta}")
        entry = train_one(spec)
        run.record_model(entry)
        status = (
            f"diverged at epoch {entry['diverged_epoch'] + 1}"
            if entry.get("diverged_epoch") is not None
            else "done"
        )
        log(f"=== model {index}/{len(specs)}: {spec.id} {status} in {entry['seconds']:.0f} s")
    backups = run.path / "backup"
    if backups.is_dir() and not any(backups.iterdir()):
        backups.rmdir()
    return run.read_results()
