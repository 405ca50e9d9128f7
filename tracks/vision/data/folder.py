"""An image folder as a data source: PATH/train/<class>/* and PATH/test/<class>/*.

Decoded once (TensorFlow's decoders, or PIL for formats TensorFlow lacks),
resized to the track's image size and cached as .npz under
`cache_directory()`, keyed by the folder's file list, sizes and times, so a
second run starts in seconds and a changed folder is decoded again.
`keras.utils.image_dataset_from_directory` streams from disk instead: the
track needs the whole training set in memory as numpy (per-pixel mean,
seeded per-epoch order, fingerprints for --resume).
"""

import contextlib
import hashlib
import os
import sys
import tempfile

import numpy as np

from tracks.common.input_pipeline import PARALLEL_CALLS, without_autotune
from tracks.common.option_ranges import utf8_path_problem

# Files in a folder source that are read as images (as torchvision's ImageFolder).
IMAGE_EXTENSIONS = (
    ".bmp", ".gif", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp",
)  # fmt: skip
_CACHE_FORMAT = "residual_keras-folder-v1"


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
                unusable = utf8_path_problem(path)
                if unusable:  # TensorFlow's decoders take UTF-8 paths only
                    raise ValueError(f"image file {unusable}; rename it.")
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


def _load_folder(root, image_size, cache_dir, log, accept=None):
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
    `accept(train images, test images)` may refuse the folder (a ValueError) once its files are counted:
    before anything is decoded or written to the cache.
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
    if accept is not None:  # the options checked against the counts before any image is decoded or cached
        accept(sum(len(f) for f in train.values()), sum(len(f) for f in test.values()))
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

    with _stderr_held() as said:  # libjpeg writes to the process's stderr from C ("Corrupt JPEG data: ...")
        try:
            images = _decode_with_tf(paths, image_size)
        except tf.errors.OpError:
            images = None
    if images is not None:
        sys.stderr.write(said[0])  # a damaged file the decoders still read: what they said of it stands
        return images
    # A file they could not read: PIL names it in one line (or reads a format TensorFlow lacks), so the C
    # library's own lines, which name no file, are left out.
    log("tf.data could not decode every image; decoding with PIL instead ...")
    return _decode_with_pil(paths, image_size)


@contextlib.contextmanager
def _stderr_held():
    """File descriptor 2 sent to a temporary file while the block runs (every thread's writes, C's as well as
    Python's); yields a list that holds what was written there once the block has ended."""
    said = []
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (a daemon's closed stderr): nothing to hold
        yield [""]
        return
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield said
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                sink.seek(0)
                said.append(sink.read().decode("utf-8", errors="replace"))
    finally:
        os.close(saved)


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

    dataset = without_autotune(
        tf.data.Dataset.from_tensor_slices(list(paths))
        .map(decode, num_parallel_calls=PARALLEL_CALLS, deterministic=True)
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
