"""From numpy arrays to tf.data batches, as He et al. 2015 preprocess CIFAR-10.

He et al. 2015 (arXiv 1512.03385), section 4.2, subtract the per-pixel mean
and augment with "4 pixels padded on each side, and a 32x32 crop randomly
sampled from the padded image or its horizontal flip"; they test on the
single original 32x32 view. This module does exactly that:

    x_normalised = (x - mean) / std
        mean: per-pixel mean of the training images, shape (H, W, 3)  (He et al.)
        std:  per-channel std of (x - mean) over the training images, shape (3,)

Dividing by `std` is our addition: it only rescales the input (about 60x for
CIFAR-10) so that it has unit variance. Networks with BatchNorm after the stem
do not care, but Fixup and other normalisation-free nets do (Fixup's official
code also normalises per channel). Both statistics come from the training
images actually used (after the validation hold-out and the `train_size`
subset), and the same values are applied to validation and test images.

Augmentation pads with zeros AFTER normalisation, so padded pixels are "the
mean", not black (Lee et al.'s deeply-supervised nets, which He et al. cite
for the augmentation, also pad their preprocessed images with zeros).

`training_epochs` makes one tf.data pipeline per epoch: the whole training
set stays in memory, each epoch's order is drawn from (seed, epoch) alone,
and each batch is gathered, normalised, padded, cropped and flipped with
batched ops, outside the (XLA-compiled) training step. Parallelism is fixed
and tf.data's autotuning off (tracks/common/input_pipeline.py says why).
"""

import numpy as np

from residual_keras.checks import check_int
from tracks.common.input_pipeline import PARALLEL_CALLS, without_autotune


def training_epochs(data, batch_size, *, augment=True, seed=0, padding=None):
    """A function epoch -> the training batches of that epoch (a finite tf.data pipeline).

    Epoch e is a permutation of the training images drawn from (seed, e) alone,
    cut into full batches (`drop_remainder`: one shape, no XLA recompile), with
    He et al.'s augmentation done with batched ops: zero padding of `padding`
    pixels (in normalised space, i.e. the mean), a random crop back to H x W,
    and a random horizontal flip, seeded by (seed, e, batch). Stateless random
    ops only: every model of a grid sees the same batches in the same order,
    and a run resumed at epoch e sees what an uninterrupted one would. The
    order does not depend on `augment`.

    The training set is put in memory once; each call only builds a pipeline.
    """
    import tensorflow as tf

    check_int("batch_size", batch_size, minimum=1)
    check_int("seed", seed, minimum=0)
    count = len(data.x_train)
    if batch_size > count:
        raise ValueError(
            f"batch_size {batch_size} is larger than the {count} training images; "
            f"with drop_remainder=True no batch would be produced."
        )
    height = data.x_train.shape[1]
    padding = height // 8 if padding is None else padding
    check_int("padding", padding, minimum=0)
    steps = count // batch_size

    with tf.device("/cpu:0"):  # tf.data runs on the host: keep its tensors there
        mean = tf.constant(data.mean, tf.float32)  # (H, W, 3)
        inverse_std = tf.constant(1.0 if data.std is None else 1.0 / data.std, tf.float32)
        x_train = tf.constant(data.x_train)  # the whole training set, in memory
        y_train = tf.constant(data.y_train, tf.int32)

    def train_batch(indices, batch_seed):
        images = (tf.cast(tf.gather(x_train, indices), tf.float32) - mean) * inverse_std  # (B, H, W, 3)
        labels = tf.gather(y_train, indices)  # (B,)
        if augment:
            images = random_pad_crop_flip(images, batch_seed, padding)
        return images, labels

    def epoch_batches(epoch):
        check_int("epoch", epoch, minimum=0)
        fold_in = tf.random.experimental.stateless_fold_in
        order_seed = fold_in(tf.constant([seed, 0], tf.int64), epoch)
        augment_seed = fold_in(tf.constant([seed, 1], tf.int64), epoch)
        order = tf.random.experimental.stateless_shuffle(tf.range(count, dtype=tf.int64), order_seed)
        indices = tf.data.Dataset.from_tensor_slices(order).batch(batch_size, drop_remainder=True)
        batch_seeds = tf.data.Dataset.range(steps).map(lambda step: fold_in(augment_seed, step))
        return without_autotune(
            tf.data.Dataset.zip((indices, batch_seeds))
            .map(train_batch, num_parallel_calls=PARALLEL_CALLS, deterministic=True)
        )

    return epoch_batches


def evaluation_batches(data, images, labels, batch_size, drop_remainder=False):
    """The images in order, normalised as `data.normalize`, in batches (no augmentation)."""
    import tensorflow as tf

    with tf.device("/cpu:0"):
        mean = tf.constant(data.mean, tf.float32)
        inverse_std = tf.constant(1.0 if data.std is None else 1.0 / data.std, tf.float32)
    return without_autotune(
        tf.data.Dataset.from_tensor_slices((images, np.asarray(labels, np.int32)))
        .batch(batch_size, drop_remainder=drop_remainder)
        .map(lambda x, y: ((tf.cast(x, tf.float32) - mean) * inverse_std, y),
             num_parallel_calls=PARALLEL_CALLS, deterministic=True)
    )


def random_pad_crop_flip(images, seed, padding):
    """He et al.'s augmentation for a whole batch at once.

    Zero-pads `padding` pixels on each side, takes a random H x W crop per
    image and flips it horizontally with probability 1/2. Two gathers (rows,
    then columns, the flip folded into the column order) instead of a loop.

    Args:
        images: float (B, H, W, C).
        seed: int tensor of shape (2,), for the stateless random ops.
        padding: int, pixels on each side.
    """
    import tensorflow as tf

    height, width = images.shape[1], images.shape[2]
    batch = tf.shape(images)[0]
    offset_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    padded = tf.pad(images, [[0, 0], [padding, padding], [padding, padding], [0, 0]])
    offsets = tf.random.stateless_uniform(
        (batch, 2), offset_seed, minval=0, maxval=2 * padding + 1, dtype=tf.int32
    )
    flip = tf.random.stateless_uniform((batch, 1), flip_seed) < 0.5  # (B, 1)
    rows = offsets[:, :1] + tf.range(height)  # (B, H)
    columns = offsets[:, 1:] + tf.range(width)  # (B, W)
    columns = tf.where(flip, tf.reverse(columns, axis=[1]), columns)
    cropped = tf.gather(padded, rows, axis=1, batch_dims=1)  # (B, H, W + 2p, C)
    return tf.gather(cropped, columns, axis=2, batch_dims=1)  # (B, H, W, C)
