"""Training one model of a grid, and the grid itself, without losing work.

A model trains one epoch at a time, each on the batches of that epoch only:

    for epoch in first_epoch .. epochs - 1:
        fit one epoch on epoch_data(epoch)   # batches depend on (seed, epoch) only
        append the epoch's row to metrics/<model>.csv
        save a checkpoint "after epoch + 1 epochs"

- `epoch_data(epoch)` is a finite tf.data pipeline seeded by the run seed and
  the epoch, so every model of a grid sees the same batches in the same order,
  and a model resumed at epoch k sees exactly what it would have seen.
- `Checkpoints` writes the weights and the optimizer state after every epoch,
  beside their final name, then renames them: a kill at any moment, even in
  the middle of a save, leaves the last complete checkpoint intact.
- The CSV row is written before the checkpoint. A kill between the two loses
  the checkpoint, not the row: on resume the rows of epochs the restored
  weights have not seen are dropped and trained again, so the CSV is always
  exactly the model's history, never duplicated.
- A model's checkpoints are kept until `run_grid` has recorded its results
  entry, so a kill during the test evaluation never retrains it: a model whose
  checkpoint says every epoch is done goes straight to evaluation.
- Keras' `TerminateOnNaN` stops a model whose loss becomes NaN or infinite;
  the epoch's row then has a non-finite loss, which says when: a diverging
  model is a result ("diverged at epoch k"), not a crash.
- The per-epoch evaluation that draws the curves is named for what it is
  (`EvaluateEachEpoch`): `val_accuracy` on a validation split,
  `test_subset_accuracy` on a subset of the test set, never one for the other.
- Each model's curves also go to TensorBoard, `<run>/tensorboard/<model>/train`
  and `/validation` in Keras' layout, one events file per split, with the
  residual measurements of `TrainingDynamics` (tracks/common/tensorboard.py),
  when the `tensorboard` package is installed (`tensorboard --logdir <run>/tensorboard`).

Why the loop is not Keras' `BackupAndRestore` and `CSVLogger`: both restore
or append per `fit` call, but neither keeps the CSV and the checkpoint
consistent across a kill between the two writes (CSVLogger would append a
duplicated row for a retrained epoch; here the rows the checkpoint has not
seen are dropped), nor keeps the dropout layers' random states.
"""

import csv
import math
import os
import re
import statistics
import sys
import time

import keras
import numpy as np

from residual_keras.diagnostics import TrainingDynamics

from tracks.common.command import raise_if_interrupted
from tracks.common.results import RunResults
from tracks.common.run_directory import RunFileError
from tracks.common.tensorboard import epoch_summaries


def read_metrics_rows(path):
    """The CSV rows written by `fit_with_backup`, as dicts of floats (epoch as int).

    Raises:
        RunFileError: the file is damaged.
    """
    if not path.exists():
        return []
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        return [
            {key: (int(value) if key == "epoch" else float(value))
             for key, value in row.items() if value not in ("", None)}
            for row in rows
        ]
    except (OSError, csv.Error, ValueError, TypeError, AttributeError) as error:
        raise RunFileError(
            f"{path} is damaged ({error}); delete it and the model's backup/ folder "
            f"to train that model again"
        ) from None


def write_metrics_rows(path, rows):
    """Rewrites the CSV atomically (written beside it, then renamed)."""
    fields = []
    for row in rows:
        fields += [key for key in row if key not in fields]
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


class Checkpoints:
    """A model's weights and optimizer state after each finished epoch.

    `backup/<model>/epoch-0003.weights.h5` is the state after 3 epochs. It is
    written as `partial-epoch-0003.weights.h5`, flushed to the disk, then
    renamed, so a file with a final name is always complete. The newest two
    are kept: should the newest be damaged anyway, the one before is used.

    `save_weights` leaves out the dropout layers' random-number states; they go
    to `epoch-0003.seeds.npz`, renamed before the weights (which complete a
    checkpoint), so a resumed model draws the dropout masks an uninterrupted
    one would.
    """

    KEEP = 2
    _NAME = re.compile(r"epoch-(\d+)\.weights\.h5")

    def __init__(self, directory):
        self.directory = directory

    def saved(self):
        """[(epochs, path)] of the complete checkpoints, oldest first."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            match = self._NAME.fullmatch(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def save(self, model, epochs_done):
        self.directory.mkdir(parents=True, exist_ok=True)
        seeds = _seed_states(model)
        if seeds:
            self._write(lambda path: np.savez(path, *[state.numpy() for state in seeds]),
                        self._seeds_path(epochs_done))
        self._write(model.save_weights, self.directory / f"epoch-{epochs_done:04d}.weights.h5")
        for old_epoch, old in self.saved()[: -self.KEEP]:
            old.unlink()
            self._seeds_path(old_epoch).unlink(missing_ok=True)

    def _write(self, save, final):
        """`save(path)` beside `final`, flushed to the disk, then renamed to `final`."""
        partial = final.with_name(f"partial-{final.name}")
        try:
            save(partial)
            with open(partial, "rb+") as handle:
                os.fsync(handle.fileno())
        except OSError:  # a full disk, say: the half-written file goes, the checkpoints before it stay
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, final)

    def _seeds_path(self, epochs_done):
        return self.directory / f"epoch-{epochs_done:04d}.seeds.npz"

    def restore(self, model, log):
        """Loads the newest readable checkpoint into `model`; returns its epoch (0: none).

        Raises:
            RunFileError: there are checkpoints, and none can be read.
        """
        for stray in self.directory.glob("partial-*") if self.directory.is_dir() else ():
            stray.unlink()  # a save that a kill interrupted
        candidates = self.saved()
        if candidates and model.optimizer is not None and not model.optimizer.built:
            with model.distribute_strategy.scope():  # optimizer slots mirrored like the weights
                model.optimizer.build(model.trainable_variables)
        for epochs_done, path in reversed(candidates):
            try:
                model.load_weights(path)
                self._restore_seeds(model, epochs_done)
                return epochs_done
            except Exception as error:  # h5py raises OSError, Keras ValueError, ...
                log(f"{path} cannot be read ({type(error).__name__}); trying the checkpoint before it")
        if candidates:
            raise RunFileError(
                f"no checkpoint in {self.directory} can be read; delete that folder to train "
                f"the model again from epoch 1"
            )
        return 0

    def _restore_seeds(self, model, epochs_done):
        path, seeds = self._seeds_path(epochs_done), _seed_states(model)
        if not seeds or not path.exists():
            return  # no dropout, or a checkpoint written without its seeds
        with np.load(path) as saved:
            values = [saved[f"arr_{index}"] for index in range(len(saved.files))]
        if len(values) != len(seeds):
            raise ValueError(f"{path} holds {len(values)} random states, the model has {len(seeds)}")
        for state, value in zip(seeds, values):
            state.assign(value)


def _seed_states(model):
    """The random-number states of the model's dropout layers (`keras.random.SeedGenerator`)."""
    return [variable for variable in model.variables if variable.name == "seed_generator_state"]


class EvaluateEachEpoch(keras.callbacks.Callback):
    """Evaluates the model on `dataset` after every epoch, logged as `<name>_<metric>`.

    Keras' `fit(validation_data=...)` calls every such evaluation `val_*`, in
    its progress bar, History, CSV and TensorBoard alike; when the curves are
    drawn on a subset of the test set that name would be wrong. This adds
    `test_subset_loss`, `test_subset_accuracy` (or `val_*` on a real
    validation split) to the epoch's logs. It must come before the callbacks
    that read them (progress bar, TensorBoard; History comes last anyway).
    """

    def __init__(self, dataset, name):
        super().__init__()
        self.dataset = dataset
        self.name = name

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or self.model.stop_training:  # a diverged epoch: nothing to measure
            return
        results = self.model.evaluate(self.dataset, verbose=0, return_dict=True)
        logs.update({f"{self.name}_{metric}": value for metric, value in results.items()})


class EpochProgress(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, saying "Epoch 4/8" although each `fit` trains one epoch."""

    def __init__(self, total_epochs):
        super().__init__()
        self.total_epochs = total_epochs

    def set_params(self, params):
        super().set_params({**params, "epochs": self.total_epochs})


def progress_verbosity():
    """Keras progress bars on a terminal; one line per epoch in logs and CI."""
    return 1 if sys.stdout.isatty() else 2


def fit_with_backup(model, epoch_data, *, run, model_id, epochs, curve_data=None, curve_name="val",
                    extra_callbacks=(), verbose=None, log=None):
    """Trains `model` epoch by epoch with checkpoints, a per-epoch CSV and divergence detection.

    Args:
        model: a compiled Keras model.
        epoch_data: callable(epoch) -> the finite dataset of that (0-based) epoch.
        run: the `RunDirectory`; the checkpoints go to `run.backup_dir(model_id)`
            and stay there (`run_grid` deletes them once the result is recorded).
        model_id: the model's name in the run.
        epochs: the number of epochs to reach (a resumed model trains the rest).
        curve_data: evaluated after every epoch, as `<curve_name>_<metric>`
            columns (and in the progress bar and TensorBoard).
        curve_name: what `curve_data` is: "val" for a validation split,
            "test_subset" for part of the test set, "test" for all of it.
        extra_callbacks: more Keras callbacks for each epoch's `fit`.
        verbose: Keras verbosity (default: bars on a terminal, lines otherwise).
        log: callable(str) for resume messages (default: none).

    Returns:
        dict: `history` (list of per-epoch rows, resumed epochs included),
        `diverged_epoch` (None, or the 0-based epoch whose loss went NaN/inf),
        `first_epoch` (the epoch this call started from) and `seconds`.
    """
    log = log or (lambda message: None)
    metrics_path = run.metrics_path(model_id)
    checkpoints = Checkpoints(run.backup_dir(model_id))
    first_epoch = min(checkpoints.restore(model, log), epochs)
    rows = [row for row in read_metrics_rows(metrics_path) if row["epoch"] < first_epoch]
    if [row["epoch"] for row in rows] != list(range(first_epoch)):
        raise RunFileError(
            f"{metrics_path} lacks rows of the {first_epoch} epochs that {checkpoints.directory} "
            f"holds; delete both to train {model_id} again"
        )
    write_metrics_rows(metrics_path, rows)  # drops rows of epochs the checkpoint has not seen
    if first_epoch == epochs:
        log(f"{model_id}: all {epochs} epochs were already trained")
    elif first_epoch:
        log(f"{model_id}: resuming after epoch {first_epoch} of {epochs}")

    verbose = progress_verbosity() if verbose is None else verbose
    # Order matters: the evaluation adds its columns before the others read the logs.
    callbacks = [keras.callbacks.TerminateOnNaN()]
    if curve_data is not None:
        callbacks.append(EvaluateEachEpoch(curve_data, curve_name))
    callbacks += [EpochProgress(epochs), *extra_callbacks]
    # TensorBoard last: it reads the curve's columns and the TrainingDynamics record of the epoch.
    dynamics = next((callback for callback in extra_callbacks if isinstance(callback, TrainingDynamics)), None)
    summaries = epoch_summaries(run.tensorboard_dir(model_id), first_epoch, curve_name, dynamics)
    callbacks += [summaries] if summaries else []
    start = time.perf_counter()
    try:
        for epoch in range(first_epoch, epochs):
            epoch_start = time.perf_counter()
            history = model.fit(
                epoch_data(epoch),
                initial_epoch=epoch,
                epochs=epoch + 1,
                callbacks=callbacks,
                shuffle=False,  # a dataset orders its batches itself (fit's default True only warns)
                verbose=verbose,
            ).history
            row = {"epoch": epoch, "seconds": round(time.perf_counter() - epoch_start, 3)}
            row.update({key: float(values[-1]) for key, values in history.items()})
            rows.append(row)
            write_metrics_rows(metrics_path, rows)  # the row first, then the checkpoint
            if not math.isfinite(row.get("loss", 0.0)):
                break  # TerminateOnNaN stopped it: a diverged epoch is never saved, its weights are NaN
            checkpoints.save(model, epoch + 1)
    finally:
        if summaries:
            summaries.close()
    diverged = None
    if rows and not math.isfinite(rows[-1].get("loss", 0.0)):
        diverged = rows[-1]["epoch"]
    return {
        "history": rows,
        "diverged_epoch": diverged,
        "first_epoch": first_epoch,
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


def describe_outcome(entry):
    """'done', or 'diverged at <where>' from the entry's `diverged_at` ("epoch 3", "step 500")."""
    if not entry.diverged:
        return "done"
    return f"diverged at {entry.diverged_at}" if entry.diverged_at else "diverged"


def run_grid(run, specs, train_one, log=print, cost=None, seed=None, results=RunResults):
    """Trains every spec not already finished in `run`; returns all results (a `results`).

    Args:
        run: the `RunDirectory`.
        specs: objects with an `id` attribute, in training order.
        train_one: callable(spec) -> the model's `ModelResult`.
        log: where progress lines go.
        cost: optional callable(spec) -> relative training cost (e.g. the
            depth), so that the time left is estimated from the models done.
        seed: when given, every model starts from `keras.utils.set_random_seed(seed)`,
            so its initial weights do not depend on the models trained before
            it (a resumed grid builds the same models).
    """
    cost = cost or (lambda spec: 1.0)
    finished = run.finished_models()
    for model_id in finished:
        run.discard_backup(model_id)  # recorded, then killed before the backup was deleted
    todo = [spec for spec in specs if spec.id not in finished]
    if finished:
        log(f"resuming: {len(specs) - len(todo)} of {len(specs)} models already finished")
    start = time.perf_counter()
    for done, spec in enumerate(todo):
        raise_if_interrupted()  # a Ctrl-C swallowed while the last model ended stops the run here
        index = specs.index(spec) + 1
        eta = ""
        if done:
            done_cost = sum(cost(s) for s in todo[:done])
            left_cost = sum(cost(s) for s in todo[done:])
            seconds_left = (time.perf_counter() - start) / done_cost * left_cost
            eta = f", about {seconds_left / 60:.1f} min left"
        log(f"=== model {index}/{len(specs)}: {spec.id}{eta}")
        if seed is not None:
            keras.utils.set_random_seed(seed)
        started_model = time.perf_counter()
        entry = train_one(spec)
        if entry.seconds is None:  # a track that does not time its models gets the time of its train_one
            entry.seconds = round(time.perf_counter() - started_model, 1)
        run.record_model(entry.to_json())
        run.discard_backup(spec.id)  # only now: the result is safe in results.json
        log(f"=== model {index}/{len(specs)}: {spec.id} {describe_outcome(entry)} in {entry.seconds:.0f} s")
    return results.from_json(run.read_results())
