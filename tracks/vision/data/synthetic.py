"""The offline fallback: 10 classes of procedurally drawn images, made in seconds.

The images have natural-image statistics where they matter for training
(brightness-dominant, correlated colours; shaded, textured backgrounds;
objects lighter or darker than the background): a deep post-activation net
at lr 0.1 dies on flat, uncorrelated colours where it survives CIFAR-10
(docs/experiments/vision.md). A flip or a shift never changes a class.

How hard the set is follows one principle (issue 53): like CIFAR-10, a
class can be half told by texture, which nets learn first, and told fully
only by shape, which they learn later (Geirhos et al. 2019 found ImageNet
nets biased towards texture). Each class is one texture seen through a
window of one of two shapes (`SYNTHETIC_CLASSES`): compact (a disc or a
square) or not (a plus or a triangle). The texture leaves 2 classes open;
the window's shape decides between them. The first generator's classes were
one pattern each, told by texture alone: the 20-layer residual net learnt
them to 2.5-2.9% training error, where on CIFAR-10 it stays at 27%, and the
56-layer net had nothing left to win (docs/experiments/vision.md).
"""

import numpy as np

TEXTURES = ("horizontal_stripes", "vertical_stripes", "checkerboard", "rings", "dots")
SHAPES = ("disc", "square", "plus", "triangle")
# Each class: one texture in one of two windows, compact or not. Every one of the
# 5 x 4 (texture, shape) pairs is used once; a texture is in 2 classes, a shape in 5.
# A flip or a shift changes none of them (the training augmentation keeps labels).
SYNTHETIC_CLASSES = tuple(
    ((texture, first), (texture, second))
    for texture in TEXTURES
    for first, second in (("disc", "square"), ("plus", "triangle"))
)
SYNTHETIC_CLASS_NAMES = tuple(
    f"{texture} in {first} or {second}" for (texture, first), (_, second) in SYNTHETIC_CLASSES
)
SYNTHETIC_TRAIN_EXAMPLES = 10_000
SYNTHETIC_TEST_EXAMPLES = 2_000


def make_synthetic_images(
    *,
    seed=0,
    image_size=32,
    train_examples=SYNTHETIC_TRAIN_EXAMPLES,
    test_examples=SYNTHETIC_TEST_EXAMPLES,
):
    """(x_train, y_train, x_test, y_test, class_names): 10 classes of texture and window shape.

    Each image is one texture from `TEXTURES` seen through a window of one
    shape from `SHAPES`; which pair an image of a class shows is drawn at
    random from the class's two in `SYNTHETIC_CLASSES`. Position, size and
    rotation of the window, and period, phase and contrast (lighter or
    darker than the background) of the texture are random (stripes keep
    their orientation within 12 degrees). The background is shaded and
    textured, of natural-image-like colour (channels correlated, brightness
    dominant), with three soft blobs of light or shadow, plus pixel noise.
    Classes are exactly balanced; the same seed gives identical arrays.
    """
    train_rng, test_rng = np.random.default_rng([seed, 100]), np.random.default_rng([seed, 101])
    x_train, y_train = _synthetic_split(train_rng, train_examples, image_size)
    x_test, y_test = _synthetic_split(test_rng, test_examples, image_size)
    return x_train, y_train, x_test, y_test, SYNTHETIC_CLASS_NAMES


def _synthetic_split(rng, count, size):
    num_classes = len(SYNTHETIC_CLASSES)
    labels = rng.permutation(np.arange(count) % num_classes).astype(np.int32)
    images = np.empty((count, size, size, 3), np.uint8)
    for start in range(0, count, 1000):  # chunks keep the float temporaries in cache
        stop = min(start + 1000, count)
        images[start:stop] = _synthetic_chunk(rng, labels[start:stop], size)
    return images, labels


def _sharp(values, softness):
    """A soft step 0 -> 1 around values = 0 (anti-aliased edges)."""
    return 1.0 / (1.0 + np.exp(-values / softness))


# (class, which of its two pairs) -> texture and shape index, as arrays for numpy indexing.
_PAIR_TEXTURE = np.array([[TEXTURES.index(t) for t, _ in pairs] for pairs in SYNTHETIC_CLASSES])
_PAIR_SHAPE = np.array([[SHAPES.index(s) for _, s in pairs] for pairs in SYNTHETIC_CLASSES])


def _synthetic_chunk(rng, labels, size):
    n = len(labels)
    f32 = np.float32
    # Pixel centres in "32x32 units", so every image_size shows the same scene.
    grid = (np.arange(size, dtype=f32) + 0.5) * (32.0 / size)
    yy, xx = grid[None, :, None], grid[None, None, :]  # (1, S, 1), (1, 1, S)

    def draw(low, high, shape=(n,)):
        value = rng.uniform(low, high, shape).astype(f32)
        return value.reshape(shape + (1, 1)) if shape == (n,) else value

    def rotated(angle_degrees, centre_x, centre_y):
        """Coordinates along (u) and across (v) an axis at the given angle."""
        angle = np.deg2rad(angle_degrees).astype(f32).reshape(n, 1, 1)
        dx, dy = xx - centre_x, yy - centre_y  # (n, S, S) after broadcasting
        return dx * np.cos(angle) + dy * np.sin(angle), -dx * np.sin(angle) + dy * np.cos(angle)

    pair = rng.integers(0, 2, n)
    texture, shape = _PAIR_TEXTURE[labels, pair], _PAIR_SHAPE[labels, pair]
    centre_x, centre_y = draw(10, 22), draw(10, 22)
    radius = draw(7, 12)
    period = draw(3.5, 6.5)
    phase = draw(0, 2 * np.pi)

    # The window: its own random rotation, so its angle says nothing of the texture's.
    u, v = rotated(rng.uniform(0, 360, n), centre_x, centre_y)
    arm = 0.4 * radius  # half the width of a plus's bars
    inside = np.stack([
        radius - np.sqrt(u * u + v * v),  # disc
        0.85 * radius - np.maximum(np.abs(u), np.abs(v)),  # square, about the disc's area
        np.maximum(np.minimum(arm - np.abs(v), radius - np.abs(u)),  # plus
                   np.minimum(arm - np.abs(u), radius - np.abs(v))),
        0.6 * radius - np.maximum.reduce([u * np.cos(a) + v * np.sin(a) for a in (0.0, 2.0944, 4.1888)]),
    ])[shape, np.arange(n)]  # triangle: inside three half-planes 120 degrees apart
    window = _sharp(inside, 0.6)

    # The texture: stripes keep their orientation (+-12 degrees); the others turn freely.
    base_angle = np.array([0, 90, 0, 0, 0], f32)[texture]
    angle = np.where(texture <= 1, base_angle + rng.uniform(-12, 12, n), rng.uniform(0, 360, n))
    u, v = rotated(angle, centre_x, centre_y)
    k = 2 * np.pi / period
    patterns = (
        lambda: _sharp(np.sin(k * v + phase), 0.25),  # horizontal / vertical stripes: vary across the axis
        lambda: _sharp(np.sin(k * v + phase), 0.25),
        lambda: _sharp(np.sin(k * u + phase) * np.sin(k * v + phase), 0.15),  # checkerboard
        lambda: _sharp(np.sin(k * np.sqrt(u * u + v * v) + phase), 0.25),  # rings
        lambda: _sharp(np.cos(k * u + phase) * np.cos(k * v) - 0.4, 0.1),  # dots
    )
    mask = np.zeros((n, size, size), f32)
    for index, pattern in enumerate(patterns):
        pick = texture == index
        if pick.any():
            mask[pick] = pattern()[pick]
    mask *= window
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
    contrast = draw(0.15, 0.4) * np.where(rng.random((n, 1, 1)) < 0.5, -1.0, 1.0).astype(f32)
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
