"""Where the images come from: `load_vision_data` and the fallback (`--data` is parsed in tracks/vision/source.py).

Sources:
    "cifar10"      TensorFlow Datasets' cifar10 (50k train / 10k test).
    "folder:PATH"  PATH/train/<class>/*.png|jpg|... and PATH/test/<class>/...
                   (folder.py: decoded once, then cached).
    "synthetic"    procedurally generated 10-class images (synthetic.py).
    "auto"         cifar10 when it is prepared locally or downloadable, otherwise
                   synthetic with a loud `banner` (decided in seconds, offline too).

`load_vision_data` returns numpy arrays in a `VisionData`, with the
training-set statistics the pipeline normalises with (pipeline.py);
`fingerprint` identifies the data a run used, so that `--resume` can refuse
different data.
"""

import dataclasses
import hashlib

import numpy as np

from residual_keras.checks import check_int
from tracks.common import tfds_source
from tracks.vision.data.folder import _load_folder
from tracks.vision.source import CIFAR10_HOST  # where TFDS downloads it: `prefetch` and the offline check ask it
from tracks.vision.data.synthetic import (
    FAINTEST_OBJECT,
    SYNTHETIC_TEST_EXAMPLES,
    SYNTHETIC_TRAIN_EXAMPLES,
    make_synthetic_images,
)
from tracks.common.track import source_title
from tracks.vision.source import SOURCE_FORMS, parse_source


CIFAR10_CLASS_NAMES = (
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip


TITLES = {"cifar10": "CIFAR-10", "synthetic": "synthetic images"}


def dataset_title(name):
    """A source name ("cifar10", "folder:/abs/path", "synthetic") as a reader names it, without local paths."""
    return source_title(name, TITLES, {"folder": "image folder"})


@dataclasses.dataclass(frozen=True, eq=False)
class VisionData:
    """An image classification data set held in memory as numpy arrays.

    Attributes:
        name: "cifar10", "folder:/abs/path" or "synthetic".
        x_train: uint8 (N, H, W, 3) training images.
        y_train: int32 (N,) training labels in [0, num_classes).
        x_val: uint8 images held out of the training set, or None.
        y_val: int32 labels of `x_val`, or None.
        x_test: uint8 (M, H, W, 3) test images.
        y_test: int32 (M,) test labels.
        class_names: one name per label.
        mean: float32 (H, W, 3) per-pixel mean of `x_train` (He et al.).
        banner: a loud warning when "auto" fell back to synthetic data, else None.
        std: float32 (3,) per-channel std of `x_train - mean`; None means 1.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]
    mean: np.ndarray
    banner: str | None = None
    std: np.ndarray | None = None

    @property
    def title(self):
        """The data as a reader names them, without local paths: "CIFAR-10", "cifar10-jpeg (image folder)"."""
        return dataset_title(self.name)

    @property
    def plot_banner(self):
        """The fallback's warning as the figures show it, or None."""
        return "SYNTHETIC DATA, NOT CIFAR-10" if self.banner else None

    @property
    def description(self):
        """The line `data: ...` printed before training."""
        return f"{self.name}, {len(self.y_train)} training images, {len(self.y_test)} test images"

    @property
    def num_classes(self):
        return len(self.class_names)

    @property
    def image_shape(self):
        """(H, W, 3)."""
        return tuple(self.x_train.shape[1:])

    def normalize(self, images):
        """float32 `(images - mean) / std`, as the model sees them (numpy)."""
        scale = 1.0 if self.std is None else self.std
        return ((np.asarray(images, np.float32) - self.mean) / scale).astype(np.float32)

    def __repr__(self):
        val = 0 if self.x_val is None else len(self.x_val)
        return (
            f"VisionData(name={self.name!r}, train={len(self.x_train)}, val={val}, "
            f"test={len(self.x_test)}, classes={self.num_classes}, "
            f"image_shape={self.image_shape}, synthetic_fallback={self.banner is not None})"
        )


# --------------------------------------------------------------------------- #
# Choosing a source
# --------------------------------------------------------------------------- #


def cifar10_unavailable_message(directory):
    """One line: why cifar10 cannot be used here, and the ways to get it."""
    host = CIFAR10_HOST
    return (
        f"cifar10 is not prepared in {directory} and {host} is unreachable; "
        f"prepare it where there is network with "
        f"python -m tracks.vision prefetch --data-dir DIR "
        f"and copy DIR here, point --data-dir (or TFDS_DATA_DIR) at a prepared copy, "
        f"or use the source folder:PATH or synthetic."
    )


def load_vision_data(
    source="auto",
    *,
    data_dir=None,
    seed=0,
    train_size=None,
    validation_size=0,
    image_size=32,
    log=print,
    cache_dir=None,
    status_timeout=5.0,
    synthetic_examples=(SYNTHETIC_TRAIN_EXAMPLES, SYNTHETIC_TEST_EXAMPLES),
    synthetic_faintest=FAINTEST_OBJECT,
    synthetic_distractors=0,
    synthetic_clutter=1.0,
    accept=None,
):
    """Load a data set into memory and split it.

    Args:
        source: "auto" | "cifar10" | "synthetic" | "folder:PATH" (see
            `parse_source`). Default "auto".
        data_dir: str or None. TFDS data directory; None uses $TFDS_DATA_DIR,
            then ~/tensorflow_datasets.
        seed: int >= 0. Makes the synthetic images, the validation hold-out
            and the `train_size` subset (all deterministic from it).
        train_size: int or None. Keep this many training images (a
            class-stratified random subset, taken after the hold-out).
            None keeps them all.
        validation_size: int >= 0. Images held out of the training set,
            class-stratified (He et al.: 5000 of 50000). 0 gives x_val None.
        image_size: int. Images are H = W = image_size (folder images are
            resized on the shorter side and centre-cropped). Default 32.
        log: callable(str) for progress and warnings. Default print.
        cache_dir: where decoded folder sources are cached; None uses
            $RESIDUAL_KERAS_CACHE, then ~/.cache/residual_keras.
        status_timeout: seconds allowed to find out whether the cifar10
            download host answers. Default 5.
        synthetic_examples: (train, test) numbers of synthetic images made
            (before the hold-out and subset). Default (10000, 2000).
        synthetic_faintest: float in (0, 1]. The synthetic set's faintest
            object (`make_synthetic_images`' `faintest_object`). Default
            `FAINTEST_OBJECT`.
        synthetic_distractors: int in 0..16. Pieces of other classes'
            patterns in half the synthetic images (`make_synthetic_images`'
            `distractors`). Default 0: none.
        synthetic_clutter: float in [0, 4]. The synthetic background's
            label-free shading and blobs, x those of 0.2.0
            (`make_synthetic_images`' `clutter`). Default 1.
        accept: callable(train images, test images) -> the `train_size` to keep (a caller may lower a
            default to what the folder has), raising ValueError to refuse; called for a folder source once
            its files are counted, before any image is decoded or cached.

    Returns:
        A `VisionData`.

    Raises:
        ValueError: a bad argument, a broken image folder, or "cifar10"
            requested where it is neither prepared nor downloadable.
    """
    source = parse_source(source)
    check_int("seed", seed, minimum=0)
    check_int("validation_size", validation_size, minimum=0)
    check_int("image_size", image_size, minimum=8)
    if train_size is not None:
        check_int("train_size", train_size, minimum=1)

    banner = None
    if source in ("auto", "cifar10"):
        directory = tfds_source.data_dir(data_dir)
        status = tfds_source.tfds_status("cifar10", CIFAR10_HOST, directory, timeout=status_timeout)
        if status == "unavailable":
            message = cifar10_unavailable_message(directory)
            if source == "cifar10":
                raise ValueError(message)
            banner = _fallback_banner(message)
        else:
            try:
                name, arrays = "cifar10", _load_cifar10(directory, status, image_size, log)
            except Exception as error:  # a failed download, a damaged copy
                message = (
                    f"cifar10 could not be loaded from {directory} ({status}): "
                    f"{type(error).__name__}: {error}"
                ).replace("\n", " ")
                if source == "cifar10":
                    raise ValueError(message) from error
                banner = _fallback_banner(message)
        if banner is not None:
            bar = "!" * 78
            log(f"{bar}\n{banner}\n{bar}")
            source = "synthetic"

    if source == "synthetic":
        name = "synthetic"
        train_examples, test_examples = synthetic_examples
        arrays = make_synthetic_images(
            seed=seed,
            image_size=image_size,
            train_examples=train_examples,
            test_examples=test_examples,
            faintest_object=synthetic_faintest,
            distractors=synthetic_distractors,
            clutter=synthetic_clutter,
        )
        clutter = f", {synthetic_distractors} distractors in half the images" if synthetic_distractors else ""
        clutter += f", background clutter x{synthetic_clutter:g}" if synthetic_clutter != 1 else ""
        log(f"synthetic: {train_examples} train / {test_examples} test images (seed {seed}, "
            f"faintest object {synthetic_faintest:g}{clutter})")
    elif source.startswith("folder:"):
        name = source
        def counted(train_count, test_count):  # the caller's checks, then the split, before the cache is written
            nonlocal train_size
            if accept is not None:
                train_size = accept(train_count, test_count)
            check_split(train_count, train_size, validation_size)

        arrays = _load_folder(source[len("folder:") :], image_size, cache_dir, log, counted)

    x_train, y_train, x_test, y_test, class_names = arrays
    x_train, y_train, x_val, y_val = split_train_validation(x_train, y_train, seed, train_size, validation_size)
    mean, std = normalisation_statistics(x_train)
    return VisionData(
        name=name,
        x_train=x_train,
        y_train=y_train,
        x_val=x_val,
        y_val=y_val,
        x_test=x_test,
        y_test=y_test.astype(np.int32),
        class_names=tuple(class_names),
        mean=mean,
        banner=banner,
        std=std,
    )


def _fallback_banner(reason):
    return (
        "WARNING: USING SYNTHETIC IMAGES, NOT CIFAR-10. Results are not comparable "
        f"with any paper. Reason: {reason}"
    )


def normalisation_statistics(x_train):
    """(mean, std): float32 per-pixel mean (H, W, 3), per-channel std of x - mean (3,)."""
    count = len(x_train)
    # Exact integer sums.
    total = x_train.sum(axis=0, dtype=np.uint64)
    total_squares = np.zeros(x_train.shape[1:], np.uint64)
    for start in range(0, count, 1024):  # 1024 * 255^2 fits in uint32
        chunk = x_train[start : start + 1024].astype(np.uint32)
        chunk *= chunk
        total_squares += chunk.sum(axis=0)
    mean = total / count
    # E[(x - m)^2] per channel = mean over pixels of (E[x^2] - m^2)
    variance = (total_squares / count - np.square(mean)).mean(axis=(0, 1))
    std = np.sqrt(np.maximum(variance, 1e-6))
    return mean.astype(np.float32), std.astype(np.float32)


# --------------------------------------------------------------------------- #
# Splits
# --------------------------------------------------------------------------- #


def stratified_choice(labels, count, rng):
    """Sorted indices of `count` examples, each class in proportion, chosen at random."""
    labels = np.asarray(labels)
    order = rng.permutation(len(labels))
    grouped = order[np.argsort(labels[order], kind="stable")]  # by class, random within
    sizes = np.bincount(labels)
    starts = np.cumsum(sizes) - sizes
    rank = np.arange(len(labels)) - np.repeat(starts, sizes)  # position within its class
    fraction = (rank + 0.5) / np.repeat(sizes, sizes)
    # Smallest fractions first = proportional allocation; ties broken at random.
    chosen = grouped[np.lexsort((rng.random(len(labels)), fraction))[:count]]
    return np.sort(chosen)


def check_split(count, train_size, validation_size):
    """ValueError when `validation_size` held out and `train_size` kept do not fit in `count` training images."""
    if validation_size + (train_size or 1) > count:
        if not validation_size:
            raise ValueError(f"--train-size {train_size} is more than the {count} training images; lower it")
        raise ValueError(
            f"--validation-size {validation_size} + --train-size {train_size or 1} is more than the {count} "
            f"training images; lower them"
        )


def split_train_validation(x, y, seed, train_size, validation_size):
    """Hold out `validation_size`, then keep `train_size` of the rest."""
    y = np.asarray(y, np.int32)
    check_split(len(x), train_size, validation_size)
    x_val = y_val = None
    if validation_size:
        held_out = stratified_choice(y, validation_size, np.random.default_rng([seed, 1]))
        keep = np.ones(len(x), bool)
        keep[held_out] = False
        x_val, y_val = x[held_out], y[held_out]
        x, y = x[keep], y[keep]
    if train_size is not None and train_size < len(x):
        subset = stratified_choice(y, train_size, np.random.default_rng([seed, 2]))
        x, y = x[subset], y[subset]
    return x, y, x_val, y_val


# --------------------------------------------------------------------------- #
# CIFAR-10 from TensorFlow Datasets
# --------------------------------------------------------------------------- #


def _load_cifar10(directory, status, image_size, log):
    """(x_train, y_train, x_test, y_test, class_names) from tfds."""
    import tensorflow_datasets as tfds

    if status == "downloadable":
        log(f"downloading and preparing cifar10 (about 170 MB) into {directory} ...")
    arrays = []
    for split in ("train", "test"):
        dataset = tfds.load(
            "cifar10",
            split=split,
            data_dir=directory,
            as_supervised=True,
            download=status == "downloadable",
        )
        # batch(10_000), not batch_size=-1: the same code then also runs under
        # tfds.testing.mock_data, whose datasets have no known size.
        images, labels = [], []
        for image_batch, label_batch in dataset.batch(10_000):
            images.append(image_batch.numpy())
            labels.append(label_batch.numpy())
        images = np.concatenate(images).astype(np.uint8)
        if image_size != images.shape[1]:
            images = _resize_images(images, image_size)
        arrays += [images, np.concatenate(labels).astype(np.int32)]
    log(f"cifar10 from {directory}: {len(arrays[0])} train / {len(arrays[2])} test images")
    return (*arrays, CIFAR10_CLASS_NAMES)


def _resize_images(images, size):
    """uint8 (N, h, w, 3) -> uint8 (N, size, size, 3), bilinear with antialiasing."""
    import tensorflow as tf

    out = [
        tf.image.resize(images[start : start + 4096], (size, size), antialias=True).numpy()
        for start in range(0, len(images), 4096)
    ]
    return np.clip(np.rint(np.concatenate(out)), 0, 255).astype(np.uint8)


# --------------------------------------------------------------------------- #
# Image folders
# --------------------------------------------------------------------------- #


def fingerprint(data):
    """What identifies the data a run trained on: source, sizes and a hash of every array.

    Written to config.json when a run starts; `--resume` refuses data whose
    fingerprint differs (another folder, a changed image, another split).
    """
    digest = hashlib.sha256()
    for array in (data.x_train, data.y_train, data.x_val, data.y_val, data.x_test, data.y_test):
        if array is not None:
            digest.update(str(array.shape).encode())
            digest.update(np.ascontiguousarray(array).data)
    return {
        "source": data.name,
        "train_images": len(data.y_train),
        "val_images": 0 if data.y_val is None else len(data.y_val),
        "test_images": len(data.y_test),
        "classes": list(data.class_names),
        "sha256": digest.hexdigest(),
    }
