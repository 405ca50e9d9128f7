"""Character windows as tf.data batches (nanoGPT's `get_batch`), and the validation plan.

A character language model reads a window of T characters x_1..x_T and is
trained to predict the same window shifted by one, y_t = x_{t+1}. Training
windows start at random offsets drawn from (seed, step) alone, so a resumed
run sees the batches an uninterrupted one would; validation cuts the text
into non-overlapping windows (`validation_plan`).
"""

from typing import NamedTuple

from residual_keras.checks import check_int
from tracks.common.input_pipeline import PARALLEL_CALLS, without_autotune


class ValidationPlan(NamedTuple):
    """How the validation tokens are cut into non-overlapping windows."""

    batch_size: int  # windows per validation batch
    batches: int
    windows: int  # windows used = batches * batch_size
    predicted_tokens: int  # targets scored = windows * sequence_length
    dropped_tokens: int  # targets never scored (the text's tail)


def validation_plan(num_tokens, sequence_length, batch_size, val_batch_size=None):
    """Cuts `num_tokens` into (batches, val batch size) windows, dropping as little as possible.

    A text of n tokens holds W = (n - 1) // T non-overlapping windows (each
    needs T inputs and the next token). With `val_batch_size=None` the batch
    size is the largest one <= `batch_size` that splits W into ceil(W / B)
    equal batches, so fewer than ceil(W / B) windows are dropped (at most
    B - 1 with a fixed batch size B).
    """
    windows_available = (num_tokens - 1) // sequence_length
    if windows_available < 1:
        raise ValueError(
            f"validation text of {num_tokens:,} tokens is shorter than one window of "
            f"sequence_length {sequence_length} (needs {sequence_length + 1:,})"
        )
    if val_batch_size is None:
        batches = -(-windows_available // batch_size)
        val_batch_size = windows_available // batches
    batches = windows_available // val_batch_size
    if batches < 1:
        raise ValueError(
            f"validation text of {num_tokens:,} tokens holds {windows_available} windows "
            f"of {sequence_length}, fewer than val_batch_size {val_batch_size}"
        )
    windows = batches * val_batch_size
    predicted = windows * sequence_length
    return ValidationPlan(val_batch_size, batches, windows, predicted, num_tokens - 1 - predicted)


def make_lm_datasets(
    data,
    sequence_length,
    batch_size,
    *,
    seed=0,
    val_batch_size=None,
    initial_step=0,
    log=None,
):
    """(train, val) tf.data pipelines of int32 (x, y) batches, y = x shifted by one.

    train: an endless stream of (batch_size, sequence_length) windows at
        uniformly random offsets of the training tokens, as nanoGPT's
        `get_batch`. Batch k depends only on (seed, k) (stateless random
        numbers), so a run is reproducible and `initial_step=k` resumes the
        stream where a run stopped. Call `fit(..., steps_per_epoch=...)`.
    val: finite and deterministic: consecutive non-overlapping windows from
        the start of the validation tokens, in batches of one fixed size
        (`validation_plan`; drop_remainder), so `evaluate` gives the exact
        mean loss over every scored character. Only the tail that does not
        fill a batch is dropped; `log` (if given) reports how much.

    Args:
        data: a `TextData`.
        sequence_length: int, T, characters per window.
        batch_size: int, B, windows per training batch (and the largest
            validation batch).
        seed: int, seed of the training offsets.
        val_batch_size: int or None, fixed validation batch size; None picks
            the size <= batch_size that drops the fewest windows.
        initial_step: int, index of the first training batch.
        log: optional callable for a line describing the validation coverage.
    """
    import tensorflow as tf

    sequence_length = check_int("sequence_length", sequence_length)
    batch_size = check_int("batch_size", batch_size)
    if val_batch_size is not None:
        val_batch_size = check_int("val_batch_size", val_batch_size)

    train = training_windows(data, sequence_length, batch_size, seed=seed, first_step=initial_step)

    # Validation: window k is x = tokens[kT : kT+T], y = tokens[kT+1 : kT+T+1].
    plan = validation_plan(len(data.val_tokens), sequence_length, batch_size, val_batch_size)
    scored = plan.predicted_tokens
    val_x = data.val_tokens[:scored].reshape(plan.windows, sequence_length)
    val_y = data.val_tokens[1 : scored + 1].reshape(plan.windows, sequence_length)
    val = without_autotune(
        tf.data.Dataset.from_tensor_slices((val_x, val_y)).batch(plan.batch_size, drop_remainder=True)
    )
    if log is not None:
        log(
            f"validation: {plan.batches} batches of {plan.batch_size} x {sequence_length} "
            f"score {plan.predicted_tokens:,} of {len(data.val_tokens) - 1:,} next-character "
            f"targets ({plan.dropped_tokens:,} dropped at the end)"
        )
    return train, val


def training_windows(data, sequence_length, batch_size, *, seed=0, first_step=0, steps=None):
    """Training batches `first_step`, `first_step + 1`, ... (endless when `steps` is None).

    Batch k holds `batch_size` windows at uniformly random offsets of the
    training tokens, as nanoGPT's `get_batch`: offsets i ~ U[0, n - T),
    x = tokens[i : i+T], y = tokens[i+1 : i+T+1]. The offsets are stateless
    random numbers of (seed, k) alone, so batch k is the same in every model
    of a grid and in a resumed run.
    """
    import tensorflow as tf

    sequence_length = check_int("sequence_length", sequence_length)
    batch_size = check_int("batch_size", batch_size)
    num_train = len(data.train_tokens)
    if num_train < sequence_length + 1:
        raise ValueError(
            f"{data.name}: {num_train:,} training tokens are shorter than one window of "
            f"sequence_length {sequence_length} (needs {sequence_length + 1:,})"
        )
    train_tokens = tf.constant(data.train_tokens, dtype=tf.int32)
    positions = tf.range(sequence_length + 1, dtype=tf.int32)  # (T+1,)
    seed = tf.constant(seed, dtype=tf.int64)

    def random_windows(step):
        offsets = tf.random.stateless_uniform(
            [batch_size],
            seed=tf.stack([seed, step]),
            minval=0,
            maxval=num_train - sequence_length,
            dtype=tf.int32,
        )  # (B,)
        windows = tf.gather(train_tokens, offsets[:, None] + positions)  # (B, T+1)
        return windows[:, :-1], windows[:, 1:]  # x, y: (B, T)

    steps_dataset = tf.data.Dataset.counter(start=first_step)
    if steps is not None:
        steps_dataset = steps_dataset.take(check_int("steps", steps))
    return without_autotune(
        steps_dataset.map(random_windows, num_parallel_calls=PARALLEL_CALLS, deterministic=True)
    )
