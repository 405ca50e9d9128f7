"""Image data for the vision track: CIFAR-10, an image folder, or synthetic images.

One job a module:

- `loading.py`: loading the data `--data` names (`load_vision_data`, the offline
  fallback with its banner, splits, `fingerprint` for --resume);
- `folder.py`: an image folder, decoded once and cached;
- `synthetic.py`: the offline fallback's procedurally drawn images;
- `pipeline.py`: He et al.'s preprocessing and augmentation as tf.data
  pipelines, one per epoch, seeded by (seed, epoch).
"""

from tracks.vision.data.folder import IMAGE_EXTENSIONS, cache_directory, decode_images
from tracks.vision.data.pipeline import (
    evaluation_batches,
    random_pad_crop_flip,
    training_epochs,
)
from tracks.vision.data.loading import (
    CIFAR10_CLASS_NAMES,
    VisionData,
    cifar10_unavailable_message,
    fingerprint,
    load_vision_data,
    normalisation_statistics,
    stratified_choice,
)
from tracks.vision.data.synthetic import (
    FAINTEST_OBJECT,
    SYNTHETIC_CLASS_NAMES,
    SYNTHETIC_TEST_EXAMPLES,
    SYNTHETIC_TRAIN_EXAMPLES,
    make_synthetic_images,
)

__all__ = [
    "CIFAR10_CLASS_NAMES",
    "FAINTEST_OBJECT",
    "IMAGE_EXTENSIONS",
    "SYNTHETIC_CLASS_NAMES",
    "SYNTHETIC_TEST_EXAMPLES",
    "SYNTHETIC_TRAIN_EXAMPLES",
    "VisionData",
    "cache_directory",
    "cifar10_unavailable_message",
    "decode_images",
    "evaluation_batches",
    "fingerprint",
    "load_vision_data",
    "make_synthetic_images",
    "normalisation_statistics",
    "random_pad_crop_flip",
    "stratified_choice",
    "training_epochs",
]
