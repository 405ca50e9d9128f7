"""Image data for the vision track: CIFAR-10, an image folder, or synthetic shapes.

He et al. 2015 (arXiv 1512.03385), section 4.2, train on the 50k CIFAR-10
training images (45k/5k when they hold out a validation set), subtract the
per-pixel mean, and augment with "4 pixels padded on each side, and a 32x32
crop randomly sampled from the padded image or its horizontal flip"; they test
on the single original 32x32 view. This module does exactly that:

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

Sources (`parse_source`):
    "cifar10"      TensorFlow Datasets' cifar10 (50k train / 10k test).
    "folder:PATH"  PATH/train/<class>/*.png|jpg|... and PATH/test/<class>/...
                   Decoded once, then cached as .npz (see `cache_directory`).
    "synthetic"    procedurally generated 10-class images, made in about a second.
    "auto"         cifar10 when it is prepared locally or downloadable, otherwise
                   synthetic with a loud `banner` (decided in seconds, offline too).

`load_vision_data` returns numpy arrays in a `VisionData`; `training_epochs`
turns them into one tf.data pipeline per epoch: the whole training set stays
in memory, each epoch's order is drawn from (seed, epoch) alone, and each
batch is gathered, normalised, padded, cropped and flipped with batched ops,
outside the (XLA-compiled) training step. `fingerprint` identifies the data
a run used, so that `--resume` can refuse different data.
"""

import dataclasses
import hashlib
import os
import tempfile

import numpy as np

from tracks.common import tfds_source

SOURCE_FORMS = ("auto", "cifar10", "synthetic", "folder:PATH")

CIFAR10_CLASS_NAMES = (
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip

# A flip or a shift never changes the class of any of these (the training
# augmentation must not change labels), so "rising" and "falling" diagonals
# are one class.
SYNTHETIC_CLASS_NAMES = (
    "horizontal_stripes", "vertical_stripes", "diagonal_stripes",
    "checkerboard", "concentric_rings", "dot_grid",
    "solid_disc", "square_outline", "plus_sign", "triangle",
)  # fmt: skip
SYNTHETIC_TRAIN_EXAMPLES = 10_000
SYNTHETIC_TEST_EXAMPLES = 2_000

# Files in a folder source that are read as images (as torchvision's ImageFolder).
IMAGE_EXTENSIONS = (
    ".bmp", ".gif", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp",
)  # fmt: skip
_CACHE_FORMAT = "residual_keras-folder-v1"


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


def parse_source(source):
    """Validate a data source early; returns it normalised.

    Returns "auto", "cifar10", "synthetic" or "folder:/absolute/path" (the
    folder must exist). Raises `ValueError` naming the bad value and the
    accepted forms.
    """
    if not isinstance(source, str):
        raise ValueError(
            f"data source must be a string, one of {', '.join(SOURCE_FORMS)}; got {source!r}."
        )
    text = source.strip()
    if text.lower() in ("auto", "cifar10", "synthetic"):
        return text.lower()
    if text.lower().startswith("folder:"):
        path = text[len("folder:") :].strip()
        if not path:
            raise ValueError(
                f"data source {source!r} has no path: use folder:PATH, PATH holding "
                f"train/ and test/."
            )
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(path):
            raise ValueError(
                f"data source {source!r}: {path} is not a directory (expected "
                f"PATH/train/<class>/ and PATH/test/<class>/)."
            )
        return f"folder:{path}"
    raise ValueError(f"unknown data source {source!r}; accepted: {', '.join(SOURCE_FORMS)}.")


def cifar10_unavailable_message(directory):
    """One line: why cifar10 cannot be used here, and the ways to get it."""
    host = tfds_source.DOWNLOAD_HOSTS["cifar10"]
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

    Returns:
        A `VisionData`.

    Raises:
        ValueError: a bad argument, a broken image folder, or "cifar10"
            requested where it is neither prepared nor downloadable.
    """
    source = parse_source(source)
    _check_int("seed", seed, minimum=0)
    _check_int("validation_size", validation_size, minimum=0)
    _check_int("image_size", image_size, minimum=8)
    if train_size is not None:
        _check_int("train_size", train_size, minimum=1)

    banner = None
    if source in ("auto", "cifar10"):
        directory = tfds_source.data_dir(data_dir)
        status = tfds_source.tfds_status("cifar10", directory, timeout=status_timeout)
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
        )
        log(f"synthetic: {train_examples} train / {test_examples} test images (seed {seed})")
    elif source.startswith("folder:"):
        name = source
        arrays = _load_folder(source[len("folder:") :], image_size, cache_dir, log)

    x_train, y_train, x_test, y_test, class_names = arrays
    x_train, y_train, x_val, y_val = _split(x_train, y_train, seed, train_size, validation_size)
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


def _check_int(name, value, *, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")


def normalisation_statistics(x_train):
    """(mean, std): float32 per-pixel mean (H, W, 3), per-channel std of x - mean (3,)."""
    count = len(x_train)
    # Exact integer sums (and fast: 45k CIFAR images in about 0.2 s).
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


def _split(x, y, seed, train_size, validation_size):
    """Hold out `validation_size`, then keep `train_size` of the rest."""
    y = np.asarray(y, np.int32)
    needed = validation_size + (train_size or 1)
    if needed > len(x):
        raise ValueError(
            f"validation_size {validation_size} + train_size {train_size} exceeds "
            f"the {len(x)} training images."
        )
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


def cache_directory(explicit=None):
    """Cache folder: `explicit`, else $RESIDUAL_KERAS_CACHE, else ~/.cache/residual_keras."""
    if explicit:
        return os.path.expanduser(explicit)
    return os.environ.get("RESIDUAL_KERAS_CACHE") or os.path.expanduser("~/.cache/residual_keras")


def _list_split(root, split):
    """{class name: sorted [(path, size, mtime_ns)]} for root/split; checks the tree."""
    split_dir = os.path.join(root, split)
    if not os.path.isdir(split_dir):
        raise ValueError(
            f"image folder {root} has no {split}/ directory "
            f"(expected {root}/{split}/<class>/<images>)."
        )
    classes = sorted(
        entry.name
        for entry in os.scandir(split_dir)
        if entry.is_dir() and not entry.name.startswith(".")
    )
    if not classes:
        raise ValueError(
            f"image folder {split_dir} has no class folders "
            f"(expected {split_dir}/<class>/<images>)."
        )
    listing = {}
    for name in classes:
        files = []
        for directory, subdirectories, filenames in os.walk(os.path.join(split_dir, name)):
            subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
            for filename in sorted(filenames):
                if filename.startswith(".") or not filename.lower().endswith(IMAGE_EXTENSIONS):
                    continue
                path = os.path.join(directory, filename)
                stat = os.stat(path)
                if stat.st_size == 0:
                    raise ValueError(f"image file {path} is empty (0 bytes).")
                files.append((path, stat.st_size, stat.st_mtime_ns))
        if not files:
            raise ValueError(
                f"class folder {os.path.join(split_dir, name)} has no images "
                f"(looked for {', '.join(IMAGE_EXTENSIONS)})."
            )
        listing[name] = files
    return listing


def _load_folder(root, image_size, cache_dir, log):
    """(x_train, y_train, x_test, y_test, class_names) from root/{train,test}/<class>/.

    Kept instead of `keras.utils.image_dataset_from_directory`, which gives a
    batched tf.data pipeline of float images decoded again every epoch (or
    cached per process) and resizes by stretching unless told to crop. The
    track needs the images as one uint8 array in memory: He et al.'s
    per-pixel mean is taken over exactly the training images used, the
    validation split is stratified, every epoch's order comes from (seed,
    epoch), and `fingerprint` identifies the data for `--resume`; the decoded
    arrays are cached across runs (keyed by paths, sizes and mtimes), the
    class folders of train/ and test/ are checked to agree, and a file that
    cannot be decoded is named in a one-line error (PIL fallback).
    """
    train = _list_split(root, "train")
    test = _list_split(root, "test")
    if list(train) != list(test):
        only_train = sorted(set(train) - set(test))
        only_test = sorted(set(test) - set(train))
        raise ValueError(
            f"image folder {root}: train/ and test/ have different classes "
            f"(only in train: {only_train}, only in test: {only_test})."
        )
    class_names = tuple(train)
    if len(class_names) < 2:
        raise ValueError(
            f"image folder {root} has one class only ({class_names[0]!r}); a classifier needs "
            f"at least two (one folder per class in train/ and test/)."
        )

    key = hashlib.sha256(f"{_CACHE_FORMAT}\n{root}\n{image_size}\n".encode())
    for split, listing in (("train", train), ("test", test)):
        for name, files in listing.items():
            for path, size, mtime in files:
                key.update(f"{split}\t{os.path.relpath(path, root)}\t{size}\t{mtime}\n".encode())
    count = sum(len(f) for f in train.values()) + sum(len(f) for f in test.values())
    cache_file = os.path.join(cache_directory(cache_dir), f"folder-{key.hexdigest()[:24]}.npz")

    if os.path.exists(cache_file):
        try:
            with np.load(cache_file, allow_pickle=False) as cached:
                arrays = [cached[k] for k in ("x_train", "y_train", "x_test", "y_test")]
            log(f"{root}: {count} images loaded from the cache {cache_file}")
            return (*arrays, class_names)
        except Exception as error:  # a truncated or foreign file: decode again
            log(f"ignoring the unreadable cache {cache_file}: {type(error).__name__}: {error}")

    log(f"{root}: decoding {count} images to {image_size}x{image_size} (cached afterwards) ...")
    arrays = []
    for listing in (train, test):
        paths = [path for files in listing.values() for path, _, _ in files]
        sizes = [len(files) for files in listing.values()]
        labels = np.repeat(np.arange(len(listing), dtype=np.int32), sizes)
        arrays += [decode_images(paths, image_size, log), labels]
    folder = os.path.dirname(cache_file)
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as handle:
            x_train, y_train, x_test, y_test = arrays
            np.savez(handle, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
        os.replace(handle.name, cache_file)  # atomic: a reader never sees half a file
        log(f"cached the decoded images in {cache_file}")
    except OSError as error:
        log(f"could not write the cache {cache_file}: {error}")
    return (*arrays, class_names)


def decode_images(paths, image_size, log=print):
    """uint8 (len(paths), image_size, image_size, 3) from image files.

    Fast path: tf.data decodes in parallel (JPEG, PNG, GIF, BMP). If any file
    fails there (another format, or a broken file), everything is decoded
    again with PIL, which reads more formats and names a broken file.
    """
    import tensorflow as tf

    try:
        return _decode_with_tf(paths, image_size)
    except tf.errors.OpError:
        log("tf.data could not decode every image; decoding with PIL instead ...")
    return _decode_with_pil(paths, image_size)


def _decode_with_tf(paths, size):
    import tensorflow as tf

    def decode(path):
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        height, width = tf.shape(image)[0], tf.shape(image)[1]

        def shorter_side_to_size_then_centre_crop():
            scale = size / tf.cast(tf.minimum(height, width), tf.float32)

            def scaled(length):
                scaled_length = tf.round(tf.cast(length, tf.float32) * scale)
                return tf.maximum(size, tf.cast(scaled_length, tf.int32))

            resized = tf.image.resize(image, (scaled(height), scaled(width)), antialias=True)
            cropped = tf.image.resize_with_crop_or_pad(resized, size, size)
            return tf.cast(tf.clip_by_value(tf.round(cropped), 0, 255), tf.uint8)

        same_size = tf.logical_and(tf.equal(height, size), tf.equal(width, size))
        image = tf.cond(same_size, lambda: image, shorter_side_to_size_then_centre_crop)
        return tf.ensure_shape(image, (size, size, 3))

    dataset = (
        tf.data.Dataset.from_tensor_slices(list(paths))
        .map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .batch(4096)
    )
    return np.concatenate([batch.numpy() for batch in dataset]).astype(np.uint8)


def _decode_with_pil(paths, size):
    from PIL import Image, ImageOps

    images = np.empty((len(paths), size, size, 3), np.uint8)
    for index, path in enumerate(paths):
        try:
            with Image.open(path) as image:
                image.draft("RGB", (size, size))  # JPEG: decode at a reduced scale
                image = image.convert("RGB")
                if image.size != (size, size):
                    image = ImageOps.fit(image, (size, size), Image.Resampling.BILINEAR)
                images[index] = np.asarray(image)
        except Exception as error:  # PIL raises many types for a broken file
            reason = f"{type(error).__name__}: {error}".replace("\n", " ")
            raise ValueError(f"image file {path} cannot be decoded: {reason}") from None
    return images


# --------------------------------------------------------------------------- #
# Synthetic images
# --------------------------------------------------------------------------- #


def make_synthetic_images(
    *,
    seed=0,
    image_size=32,
    train_examples=SYNTHETIC_TRAIN_EXAMPLES,
    test_examples=SYNTHETIC_TEST_EXAMPLES,
):
    """(x_train, y_train, x_test, y_test, class_names): 10 classes of pattern.

    Each image is one pattern from `SYNTHETIC_CLASS_NAMES` (textures inside a
    disc or square window, or an outlined/solid shape) with a random position,
    size, rotation (stripes: within 12 degrees of their orientation),
    period, phase and contrast (lighter or darker than the background), over
    a shaded, textured background of natural-image-like colour (channels
    correlated, brightness dominant) with three soft blobs of light or
    shadow, plus pixel noise.
    Classes are exactly balanced; the same seed gives identical arrays.
    """
    train_rng, test_rng = np.random.default_rng([seed, 100]), np.random.default_rng([seed, 101])
    x_train, y_train = _synthetic_split(train_rng, train_examples, image_size)
    x_test, y_test = _synthetic_split(test_rng, test_examples, image_size)
    return x_train, y_train, x_test, y_test, SYNTHETIC_CLASS_NAMES


def _synthetic_split(rng, count, size):
    num_classes = len(SYNTHETIC_CLASS_NAMES)
    labels = rng.permutation(np.arange(count) % num_classes).astype(np.int32)
    images = np.empty((count, size, size, 3), np.uint8)
    for start in range(0, count, 1000):  # chunks keep the float temporaries in cache
        stop = min(start + 1000, count)
        images[start:stop] = _synthetic_chunk(rng, labels[start:stop], size)
    return images, labels


def _sharp(values, softness):
    """A soft step 0 -> 1 around values = 0 (anti-aliased edges)."""
    return 1.0 / (1.0 + np.exp(-values / softness))


def _synthetic_chunk(rng, labels, size):
    n = len(labels)
    f32 = np.float32
    # Pixel centres in "32x32 units", so every image_size shows the same scene.
    grid = (np.arange(size, dtype=f32) + 0.5) * (32.0 / size)
    yy, xx = grid[None, :, None], grid[None, None, :]  # (1, S, 1), (1, 1, S)

    def draw(low, high, shape=(n,)):
        value = rng.uniform(low, high, shape).astype(f32)
        return value.reshape(shape + (1, 1)) if shape == (n,) else value

    centre_x, centre_y = draw(10, 22), draw(10, 22)
    radius = draw(6, 12)
    period = draw(3.5, 7.0)
    phase = draw(0, 2 * np.pi)
    # Orientation: stripes keep theirs (+-12 degrees); everything else is random.
    base_angle = np.array([0, 90, 45, 0, 0, 0, 0, 0, 0, 0], f32)[labels]
    base_angle = np.where(labels == 2, base_angle + 90 * rng.integers(0, 2, n), base_angle)
    angle = np.where(labels <= 2, base_angle + rng.uniform(-12, 12, n), rng.uniform(0, 360, n))
    angle = np.deg2rad(angle).astype(f32).reshape(n, 1, 1)
    # Local coordinates: u along the pattern's axis, v across it.
    dx, dy = xx - centre_x, yy - centre_y  # (n, S, S) after broadcasting
    u = dx * np.cos(angle) + dy * np.sin(angle)
    v = -dx * np.sin(angle) + dy * np.cos(angle)
    distance = np.sqrt(u * u + v * v)
    square_distance = np.maximum(np.abs(u), np.abs(v))
    wave = 2 * np.pi / period

    # Textures live in a disc or square window, so the window is no clue.
    window_distance = np.where(rng.random((n, 1, 1)) < 0.5, distance, square_distance)
    window = _sharp(radius - window_distance, 0.7)
    thickness = draw(1.2, 2.4)
    mask = np.zeros((n, size, size), f32)
    for label in range(len(SYNTHETIC_CLASS_NAMES)):
        pick = labels == label
        if not pick.any():
            continue
        U, V, D, SD, W = u[pick], v[pick], distance[pick], square_distance[pick], window[pick]
        k, p, r, t = wave[pick], phase[pick], radius[pick], thickness[pick]
        if label <= 2:  # horizontal / vertical / diagonal stripes: vary along v
            pattern = W * _sharp(np.sin(k * V + p), 0.25)
        elif label == 3:  # checkerboard
            pattern = W * _sharp(np.sin(k * U + p) * np.sin(k * V + p), 0.15)
        elif label == 4:  # concentric rings
            pattern = W * _sharp(np.sin(k * D + p), 0.25)
        elif label == 5:  # dot grid
            pattern = W * _sharp(np.cos(k * U + p) * np.cos(k * V) - 0.4, 0.1)
        elif label == 6:  # solid disc
            pattern = _sharp(0.8 * r - D, 0.6)
        elif label == 7:  # square outline
            pattern = _sharp(t - np.abs(SD - 0.8 * r), 0.5)
        elif label == 8:  # plus sign
            bar_u = np.minimum(t - np.abs(V), 0.9 * r - np.abs(U))
            bar_v = np.minimum(t - np.abs(U), 0.9 * r - np.abs(V))
            pattern = _sharp(np.maximum(bar_u, bar_v), 0.5)
        else:  # triangle: inside three half-planes 120 degrees apart
            edges = [U * np.cos(a) + V * np.sin(a) for a in (0.0, 2.0944, 4.1888)]
            pattern = _sharp(0.45 * r - np.maximum(np.maximum(edges[0], edges[1]), edges[2]), 0.5)
        mask[pick] = pattern
    # Colours and background resemble natural images, as CIFAR-10's do: the
    # channels move together (brightness dominates: RGB correlation ~0.9), and
    # an image's flat colour carries about a third of its energy, the rest is
    # texture, shading and the object. (A first version painted bright
    # patterns on flat, uncorrelated random colours: 84% of the input was the
    # image's colour, and a deep post-activation ResNet at lr 0.1 saw its
    # stream die in the first 80 steps; see docs/experiments/vision.md.)
    base = _luminance_colours(rng, n, 0.35, 0.65, chroma=0.05)  # (n, 1, 1, 3)
    upsample_4, upsample_8 = _bilinear_matrix(4, size), _bilinear_matrix(8, size)
    shading = (upsample_4 @ rng.normal(0, 0.15, (n, 4, 4)).astype(f32) @ upsample_4.T
               + upsample_8 @ rng.normal(0, 0.08, (n, 8, 8)).astype(f32) @ upsample_8.T)
    tint = (upsample_4 @ rng.normal(0, 0.03, (n, 3, 4, 4)).astype(f32) @ upsample_4.T).transpose(0, 2, 3, 1)
    image = base + shading[..., None] + tint
    for _ in range(3):  # soft blobs of light or shadow
        blob_x, blob_y = draw(0, 32), draw(0, 32)
        blob_width = draw(1.5, 4.0)
        blob = np.exp(-((xx - blob_x) ** 2 + (yy - blob_y) ** 2) / (2 * blob_width**2))
        image += blob[..., None] * draw(-0.3, 0.3)[..., None]
    # The object: lighter or darker than what lies under it, by a random contrast.
    contrast = draw(0.08, 0.3) * np.where(rng.random((n, 1, 1)) < 0.5, -1.0, 1.0).astype(f32)
    foreground = base + contrast[..., None] + rng.normal(0, 0.05, (n, 1, 1, 3)).astype(f32)
    mask = mask[..., None]
    image += mask * (foreground - image)  # paint the pattern over the background
    # Pixel noise, uniform with std 0.04 (uniform numbers are several times cheaper).
    image += (rng.random(image.shape, dtype=f32) - 0.5) * (0.04 * np.sqrt(12.0))
    image *= 255
    return np.clip(np.rint(image, out=image), 0, 255).astype(np.uint8)


def _luminance_colours(rng, n, low, high, chroma):
    """(n, 1, 1, 3) colours: a brightness in [low, high] plus a small per-channel tint."""
    brightness = rng.uniform(low, high, (n, 1, 1, 1)).astype(np.float32)
    return brightness + rng.normal(0, chroma, (n, 1, 1, 3)).astype(np.float32)


def _bilinear_matrix(source, target):
    """(target, source) matrix that upsamples `source` samples to `target` linearly."""
    position = np.clip((np.arange(target) + 0.5) * source / target - 0.5, 0, source - 1)
    low = np.floor(position).astype(int)
    high = np.minimum(low + 1, source - 1)
    weight = (position - low).astype(np.float32)
    matrix = np.zeros((target, source), np.float32)
    matrix[np.arange(target), low] += 1 - weight
    matrix[np.arange(target), high] += weight
    return matrix


# --------------------------------------------------------------------------- #
# tf.data pipelines
# --------------------------------------------------------------------------- #


def make_datasets(
    data, batch_size, *, augment=True, seed=0, padding=None, eval_drop_remainder=False, epoch=0
):
    """(train, val, test) tf.data pipelines of (float32 normalised images, int32 labels).

    Train: the batches of training epoch `epoch` (see `training_epochs`).
    Val (None when data.x_val is None) and test: the images in order,
    normalised, not augmented (see `evaluation_batches`).

    Args:
        data: a `VisionData`.
        batch_size: int, at most the number of training images.
        augment: bool. Pad-crop-flip the training batches. Default True.
        seed: int. Shuffle and augmentation seed. Default 0.
        padding: int or None. Pixels padded on each side; None is H // 8
            (4 for 32x32, as He et al.).
        eval_drop_remainder: bool. Drop a short last val/test batch (keeps
            one shape under XLA but skips up to batch_size - 1 images).
            Default False.
        epoch: int >= 0, the training epoch whose batches `train` holds. Default 0.
    """
    train = training_epochs(data, batch_size, augment=augment, seed=seed, padding=padding)(epoch)
    val = None
    if data.x_val is not None:
        val = evaluation_batches(data, data.x_val, data.y_val, batch_size, eval_drop_remainder)
    test = evaluation_batches(data, data.x_test, data.y_test, batch_size, eval_drop_remainder)
    return train, val, test


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

    _check_int("batch_size", batch_size, minimum=1)
    _check_int("seed", seed, minimum=0)
    count = len(data.x_train)
    if batch_size > count:
        raise ValueError(
            f"batch_size {batch_size} is larger than the {count} training images; "
            f"with drop_remainder=True no batch would be produced."
        )
    height = data.x_train.shape[1]
    padding = height // 8 if padding is None else padding
    _check_int("padding", padding, minimum=0)
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
        _check_int("epoch", epoch, minimum=0)
        fold_in = tf.random.experimental.stateless_fold_in
        order_seed = fold_in(tf.constant([seed, 0], tf.int64), epoch)
        augment_seed = fold_in(tf.constant([seed, 1], tf.int64), epoch)
        order = tf.random.experimental.stateless_shuffle(tf.range(count, dtype=tf.int64), order_seed)
        indices = tf.data.Dataset.from_tensor_slices(order).batch(batch_size, drop_remainder=True)
        batch_seeds = tf.data.Dataset.range(steps).map(lambda step: fold_in(augment_seed, step))
        return (
            tf.data.Dataset.zip((indices, batch_seeds))
            .map(train_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .prefetch(tf.data.AUTOTUNE)
        )

    return epoch_batches


def evaluation_batches(data, images, labels, batch_size, drop_remainder=False):
    """The images in order, normalised as `data.normalize`, in batches (no augmentation)."""
    import tensorflow as tf

    with tf.device("/cpu:0"):
        mean = tf.constant(data.mean, tf.float32)
        inverse_std = tf.constant(1.0 if data.std is None else 1.0 / data.std, tf.float32)
    return (
        tf.data.Dataset.from_tensor_slices((images, np.asarray(labels, np.int32)))
        .batch(batch_size, drop_remainder=drop_remainder)
        .map(lambda x, y: ((tf.cast(x, tf.float32) - mean) * inverse_std, y),
             num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )


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
