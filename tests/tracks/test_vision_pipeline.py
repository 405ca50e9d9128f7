"""Tests for tracks/vision/data/pipeline.py: the tf.data batches a vision run trains and tests on.

The pipelines the track builds (tracks/vision/track.py): `training_epochs`
(epoch -> that epoch's training batches) and `evaluation_batches` (the
validation and test images in order).
"""

import numpy as np
import pytest

from tracks.vision import data as vision_data
from tracks.vision.data import VisionData, evaluation_batches, training_epochs


def small_data(count=24, size=8, classes=3, seed=0, validation=False):
    """A hand-made VisionData of random images (statistics as the loader computes them)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (count, size, size, 3), dtype=np.uint8)
    y = (np.arange(count) % classes).astype(np.int32)
    mean, std = vision_data.normalisation_statistics(x)
    return VisionData(
        name="synthetic",
        x_train=x,
        y_train=y,
        x_val=x[:5] if validation else None,
        y_val=y[:5] if validation else None,
        x_test=x[:10],
        y_test=y[:10],
        class_names=tuple(f"c{i}" for i in range(classes)),
        mean=mean,
        std=std,
    )


def all_batches(dataset):
    images, labels = zip(*[(x.numpy(), y.numpy()) for x, y in dataset])
    return np.concatenate(images), np.concatenate(labels)


def test_train_batches_have_one_shape_and_cover_each_image_once_per_epoch():
    data = small_data(count=26)
    train = training_epochs(data, 8, augment=False, seed=0)(0)
    shapes = [tuple(x.shape) for x, _ in train]
    assert shapes == [(8, 8, 8, 3)] * 3  # 26 // 8 full batches, remainder dropped
    images, labels = all_batches(train)
    assert images.dtype == np.float32 and labels.dtype == np.int32
    # Un-normalise and find every batch image in the training set, once.
    raw = np.rint(images * data.std + data.mean).astype(np.uint8)
    found = [int(np.flatnonzero((data.x_train == image).all(axis=(1, 2, 3)))[0]) for image in raw]
    assert len(set(found)) == 24
    np.testing.assert_array_equal(labels, data.y_train[found])


def test_each_epoch_is_a_function_of_seed_and_epoch_only(tmp_path):
    data = small_data(count=32)
    epochs = training_epochs(data, 8, seed=5)
    first = epochs(0)
    second = training_epochs(data, 8, seed=5)(0)  # built again, as another model of the grid
    epoch_1, labels_1 = all_batches(first)
    np.testing.assert_array_equal(all_batches(first)[0], epoch_1)  # iterated again: the same epoch
    np.testing.assert_array_equal(all_batches(second)[0], epoch_1)  # same seed, same epoch
    np.testing.assert_array_equal(all_batches(epochs(0))[0], epoch_1)  # asked for again
    epoch_2, _ = all_batches(epochs(1))
    assert not np.array_equal(epoch_1, epoch_2)  # a new order and new crops each epoch
    resumed = training_epochs(data, 8, seed=5)  # a run resumed at epoch 1 starts there
    np.testing.assert_array_equal(all_batches(resumed(1))[0], epoch_2)
    other = training_epochs(data, 8, seed=6)(0)
    assert not np.array_equal(all_batches(other)[0], epoch_1)


def test_augmentation_is_a_zero_padded_crop_and_flip_of_the_same_image():
    data = small_data(count=32, size=8)
    plain = training_epochs(data, 16, augment=False, seed=2, padding=2)(0)
    augmented = training_epochs(data, 16, augment=True, seed=2, padding=2)(0)
    originals, labels = all_batches(plain)
    crops, crop_labels = all_batches(augmented)
    np.testing.assert_array_equal(crop_labels, labels)  # same order, same labels
    assert crops.shape == originals.shape
    assert not np.allclose(crops, originals)
    kinds = set()
    for original, crop in zip(originals, crops):
        padded = np.pad(original, ((2, 2), (2, 2), (0, 0)))  # zeros in normalised space
        matches = []
        for dy in range(5):
            for dx in range(5):
                window = padded[dy : dy + 8, dx : dx + 8]
                for flip in (False, True):
                    if np.array_equal(window[:, ::-1] if flip else window, crop):
                        matches.append((dy, dx, flip))
        assert matches, "augmented image is not a crop/flip of its original"
        kinds.update(matches)
    assert len({flip for _, _, flip in kinds}) == 2 and len(kinds) > 5  # really random


def test_eval_sets_are_in_order_complete_normalised_and_deterministic():
    data = small_data(count=24, validation=True)
    val = evaluation_batches(data, data.x_val, data.y_val, 4)
    test = evaluation_batches(data, data.x_test, data.y_test, 4)
    images, labels = all_batches(test)
    assert [tuple(x.shape)[0] for x, _ in test] == [4, 4, 2]  # no drop for eval
    np.testing.assert_array_equal(labels, data.y_test)
    np.testing.assert_allclose(images, data.normalize(data.x_test), atol=1e-5)
    np.testing.assert_array_equal(all_batches(test)[0], images)  # deterministic
    np.testing.assert_array_equal(all_batches(val)[1], data.y_val)
    dropped = evaluation_batches(data, data.x_test, data.y_test, 4, drop_remainder=True)
    assert len(all_batches(dropped)[1]) == 8


def test_training_epochs_rejects_a_batch_larger_than_the_training_set():
    with pytest.raises(ValueError, match="batch_size 64 is larger than the 24 training images"):
        training_epochs(small_data(count=24), 64)


def test_every_pipeline_has_fixed_parallelism_and_no_autotuning():
    # With tf.data's autotuning on, deleting an iterator (Keras does it at the
    # end of every fit and evaluate call) can wait for the autotuner's next
    # wake-up: whole epochs at half speed (tracks/common/input_pipeline.py).
    data = small_data(validation=True)
    epochs = training_epochs(data, 8, seed=0)
    val = evaluation_batches(data, data.x_val, data.y_val, 8)
    test = evaluation_batches(data, data.x_test, data.y_test, 8)
    for dataset in (epochs(0), val, test, epochs(3)):
        assert dataset.options().autotune.enabled is False
