"""TensorBoard logs of a run, in `keras.callbacks.TensorBoard`'s layout, one file per split.

    <run>/tensorboard/<model>/train/       epoch_loss, epoch_accuracy, ... and residual/...
    <run>/tensorboard/<model>/validation/  epoch_loss, epoch_accuracy, ... of the curve data

The same tag names in both folders, so TensorBoard overlays the training
curve and the curve of the data evaluated after each epoch (a validation
split, or a subset of the test set: the folder is "validation" as in Keras,
whatever the CSV calls it). Steps are 0-based epochs, as Keras writes them.

Keras' own callback cannot be used here: the tracks call `fit` once per
epoch (for their checkpoints), and each call would open a new events file.
`EpochSummaries` keeps one writer per split for the whole training of a
model. On `--resume` it reads the events written before, keeps those of the
epochs the checkpoint holds, and writes them again into one new file, so a
split never holds two files or a step twice (an epoch that was logged but
not checkpointed before a crash is trained, and logged, again).

With a `TrainingDynamics` callback, its residual measurements go to train/
as well, at step = epochs trained (0 = at initialisation):
`residual/gradient_gain`, `residual/delta_rank`, and `residual/branch_ratio`
(the mean over the residual blocks) with one `residual/branch_ratio/<block>`
per block.

Writing needs the `tensorboard` package (tf.summary needs it since
TensorFlow 2.20); without it nothing is written.
"""

import importlib.util
import math
import pathlib

import keras

SPLITS = ("train", "validation")


def tensorboard_available():
    """True when the `tensorboard` package, which `tf.summary` needs to write logs, is installed."""
    return importlib.util.find_spec("tensorboard") is not None


def read_scalars(split_dir):
    """[(tag, step, value)] of every scalar in the events files of one split's folder, in file order."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    scalars = []
    for path in sorted(pathlib.Path(split_dir).glob("events.out.tfevents.*")):
        # TFRecordDataset, not tf.compat.v1.train.summary_iterator: that one prints a deprecation warning
        # (tf_record_iterator) on every --resume
        for record in tf.data.TFRecordDataset(str(path)):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.HasField("tensor"):
                    number = tf.make_ndarray(value.tensor)
                elif value.HasField("simple_value"):
                    number = value.simple_value
                else:
                    continue
                scalars.append((value.tag, int(event.step), float(number)))
    return scalars


class EpochSummaries(keras.callbacks.Callback):
    """Writes a model's epoch logs to `<log_dir>/train` and `<log_dir>/validation` (see the module).

    Args:
        log_dir: the model's folder, `<run>/tensorboard/<model>`.
        first_epoch: the first epoch this training writes; the events of
            earlier epochs are kept, those of this epoch and later dropped.
        curve_name: the prefix of the curve data's columns in the logs
            ("val", "test_subset" or "test"), written to validation/.
        dynamics: a `TrainingDynamics` callback of the same fit, or None.
    """

    def __init__(self, log_dir, first_epoch, curve_name="val", dynamics=None):
        super().__init__()
        import tensorflow as tf

        self._tf = tf
        self.log_dir = pathlib.Path(log_dir)
        self.curve_prefix = f"{curve_name}_"
        self.dynamics = dynamics
        self.writers = {}
        self._residual_steps = set()  # the TrainingDynamics records written so far
        for split in SPLITS:
            folder = self.log_dir / split
            kept = []
            if folder.exists():
                # residual/* steps count epochs trained (the record after epoch e is step e + 1)
                kept = [(tag, step, value) for tag, step, value in read_scalars(folder)
                        if step < first_epoch + (1 if tag.startswith("residual/") else 0)]
                for old in folder.glob("events.out.tfevents.*"):
                    old.unlink()
            folder.mkdir(parents=True, exist_ok=True)
            self.writers[split] = tf.summary.create_file_writer(str(folder))
            self._write(split, kept)
            self._residual_steps |= {step for tag, step, _ in kept if tag.startswith("residual/")}

    def _write(self, split, scalars):
        with self.writers[split].as_default():
            for tag, step, value in scalars:
                self._tf.summary.scalar(tag, value, step=step)
        self.writers[split].flush()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        train, validation = [], []
        for key, value in logs.items():
            try:
                number = float(value)
            except (TypeError, ValueError):  # not a scalar: nothing to plot
                continue
            if key.startswith(self.curve_prefix):
                validation.append((f"epoch_{key.removeprefix(self.curve_prefix)}", epoch, number))
            else:
                train.append((f"epoch_{key}", epoch, number))
        if self.dynamics is not None:  # its records so far: at initialisation, then after each epoch
            for record in sorted({row["epoch"] for row in self.dynamics.rows} - self._residual_steps):
                train += self._residual_scalars(record)
                self._residual_steps.add(record)
        self._write("train", train)
        self._write("validation", validation)

    def _residual_scalars(self, epochs_trained):
        """The `TrainingDynamics` record after `epochs_trained` epochs, as (tag, step, value)."""
        rows = [row for row in self.dynamics.rows if row["epoch"] == epochs_trained]
        if not rows:
            return []
        scalars = []
        for key in ("gradient_gain", "delta_rank"):
            value = rows[0].get(key)
            if value is not None and math.isfinite(value):
                scalars.append((f"residual/{key}", epochs_trained, float(value)))
        ratios = [(row["name"], row["branch_ratio"]) for row in rows
                  if row.get("branch_ratio") is not None and math.isfinite(row["branch_ratio"])]
        if ratios:
            scalars.append(("residual/branch_ratio", epochs_trained, sum(r for _, r in ratios) / len(ratios)))
            scalars += [(f"residual/branch_ratio/{name}", epochs_trained, ratio) for name, ratio in ratios]
        return scalars

    def close(self):
        for writer in self.writers.values():
            writer.close()


def epoch_summaries(log_dir, first_epoch, curve_name="val", dynamics=None):
    """An `EpochSummaries` callback, or None without the tensorboard package."""
    if not tensorboard_available():
        return None
    return EpochSummaries(log_dir, first_epoch, curve_name=curve_name, dynamics=dynamics)


__all__ = ["EpochSummaries", "SPLITS", "epoch_summaries", "read_scalars", "tensorboard_available"]
