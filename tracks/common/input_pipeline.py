"""tf.data settings the tracks' input pipelines share: fixed parallelism, no autotuning.

Why not `tf.data.AUTOTUNE`: with tf.data's autotuning on, deleting an iterator
sometimes waits for the autotuner's next wake-up. The autotuner wakes up
10 ms after the iterator is made, then after periods that double (10, 20, 40,
... ms), so these wake-ups fall at 10 * (2**k - 1) ms: ..., 1.27 s, 2.55 s,
5.11 s, 10.23 s, 20.47 s, 40.95 s. Keras makes and deletes an iterator in
every `fit` and `evaluate` call, and the tracks call `fit` once per epoch, so
an epoch that computes for 21 s could end at 40.95 s: exactly half speed,
with the CPU idle while it waits. benchmarks/NOTES.md has the measurements
(iterator lifetimes of 0.2 s and 2.7 s ending at 0.31 s and 5.11 s; none with
autotuning off).

Our pipelines do little work per batch (a gather, a normalisation, a crop) on
data already in memory, so a fixed number of parallel calls and a short
prefetch queue are all they need.
"""

from tracks.common.limits import usable_cores

# Parallel calls of a batch-level `map`: one per core the process may use.
PARALLEL_CALLS = usable_cores()
# Batches prepared ahead of the training step.
PREFETCH_BATCHES = 2


def without_autotune(dataset):
    """`dataset` with a prefetch queue of `PREFETCH_BATCHES` and tf.data's autotuning off."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(PREFETCH_BATCHES).with_options(options)


__all__ = ["PARALLEL_CALLS", "PREFETCH_BATCHES", "without_autotune"]
