"""The offline fallback: 10 classes of procedurally drawn images, made in seconds.

The images have natural-image statistics where they matter for training
(brightness-dominant, correlated colours; shaded, textured backgrounds;
objects lighter or darker than the background): a deep post-activation net
at lr 0.1 dies on flat, uncorrelated colours where it survives CIFAR-10
(docs/experiments/vision.md). A flip or a shift never changes a class.
Half the objects may be faint, so that the set, as CIFAR-10, is learnt a
little more with every epoch; how faint is calibrated against CIFAR-10
(`FAINTEST_OBJECT`, docs/experiments/vision.md, issue 53). Half the images
may hold distractors, small pieces of other classes' patterns, so that, as
in CIFAR-10's cluttered scenes, a net needs more features than the object's
own: depth pays for them (docs/experiments/vision.md, issue 66).
"""

import numpy as np

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
# The faintest object's opacity (1: every object fully painted, the set of
# 0.2.0). Set on a seed no demonstration uses, so that the 20-layer
# residual net of the `class` preset ends with a training error in
# CIFAR-10's band, 20-35% (docs/experiments/vision.md, issue 53, item 5).
FAINTEST_OBJECT = 0.065
# The most distractors an image may hold (a piece's radius is 3-5 pixels in a 32 x 32 scene).
MAX_DISTRACTORS = 16
# The most background clutter (x the shading and blobs of the set of 0.2.0); beyond it most images clip.
MAX_CLUTTER = 4.0


def make_synthetic_images(
    *,
    seed=0,
    image_size=32,
    train_examples=SYNTHETIC_TRAIN_EXAMPLES,
    test_examples=SYNTHETIC_TEST_EXAMPLES,
    faintest_object=FAINTEST_OBJECT,
    distractors=0,
    clutter=1.0,
):
    """(x_train, y_train, x_test, y_test, class_names): 10 classes of pattern.

    Each image is one pattern from `SYNTHETIC_CLASS_NAMES` (textures inside a
    disc or square window, or an outlined/solid shape) with a random position,
    size, rotation (stripes: within 12 degrees of their orientation),
    period, phase and contrast (lighter or darker than the background), over
    a shaded, textured background of natural-image-like colour (channels
    correlated, brightness dominant) with three soft blobs of light or
    shadow, plus pixel noise. Half the objects are painted fully, the other
    half faintly: with an opacity drawn log-uniformly from
    [`faintest_object`, 1], so the images range from easy to barely
    visible, as CIFAR-10's do. `faintest_object=1` paints every object
    fully and gives the set of 0.2.0, image for image.

    With `distractors` > 0, half the images (drawn independently of the
    faint half) hold that many distractors under the object: each a patch
    of radius 3-5 pixels (the smallest object's is 6) of another class's
    pattern, anywhere in the image, with the object's range of contrast.
    The object is painted over them, so it is never hidden and stays the
    largest pattern in the image: the label is never in doubt, but a net
    that pools local cues over the image is misled. The distractors come
    from a stream of their own (spawned from the images' generator), so
    everything else is the set without them, image for image; at 0 nothing
    is drawn.

    `clutter` scales the background's variation that carries no label: its
    shading (the coarse 4 x 4 and 8 x 8 fields) and the strength of its
    three blobs (1: the set of 0.2.0; 0: a flat colour with its tint).
    More of it makes the object a smaller share of the image's variation,
    so a deep plain net, which sees the image through random features at
    initialisation, finds the class later (docs/experiments/vision.md,
    issue 66, screening 8); every object stays as visible to a net that
    learns its first layers. Where the brighter or darker patches pass 0 or
    255 they clip. The same random numbers are drawn whatever its value.
    Classes are exactly balanced; the same seed gives identical arrays on
    one kind of CPU. Across instruction sets numpy's vectorised sin and
    exp round differently, and a few pixels move by one level (measured:
    3 in 10 million, in 0.1% of the images, AVX-512 against no AVX2), so
    a run's data fingerprint may differ on another machine.
    """
    if not 0 < faintest_object <= 1:
        raise ValueError(f"faintest_object must be in (0, 1] (1: every object fully painted), got {faintest_object}")
    if isinstance(distractors, bool) or not isinstance(distractors, (int, np.integer)) or not (
            0 <= distractors <= MAX_DISTRACTORS):
        raise ValueError(f"distractors must be an integer in 0..{MAX_DISTRACTORS} (0: none), got {distractors!r}")
    if isinstance(clutter, bool) or not isinstance(clutter, (int, float, np.integer, np.floating)) or not (
            0 <= clutter <= MAX_CLUTTER):
        raise ValueError(f"clutter must be a number in [0, {MAX_CLUTTER:g}] (1: the background of 0.2.0), "
                         f"got {clutter!r}")
    clutter = float(clutter)
    train_rng, test_rng = np.random.default_rng([seed, 100]), np.random.default_rng([seed, 101])
    x_train, y_train = _synthetic_split(train_rng, train_examples, image_size, faintest_object, distractors, clutter)
    x_test, y_test = _synthetic_split(test_rng, test_examples, image_size, faintest_object, distractors, clutter)
    return x_train, y_train, x_test, y_test, SYNTHETIC_CLASS_NAMES


def _synthetic_split(rng, count, size, faintest_object, distractors, clutter):
    num_classes = len(SYNTHETIC_CLASS_NAMES)
    labels = rng.permutation(np.arange(count) % num_classes).astype(np.int32)
    images = np.empty((count, size, size, 3), np.uint8)
    for start in range(0, count, 1000):  # chunks keep the float temporaries in cache
        stop = min(start + 1000, count)
        images[start:stop] = _synthetic_chunk(rng, labels[start:stop], size, faintest_object, distractors, clutter)
    return images, labels


def _sharp(values, softness):
    """A soft step 0 -> 1 around values = 0 (anti-aliased edges)."""
    return 1.0 / (1.0 + np.exp(-values / softness))


def _synthetic_chunk(rng, labels, size, faintest_object, distractors, clutter):
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
        if pick.any():
            mask[pick] = pattern(label, u[pick], v[pick], distance[pick], square_distance[pick], window[pick],
                                  wave[pick], phase[pick], radius[pick], thickness[pick])
    # Colours and background resemble natural images, as CIFAR-10's do: the
    # channels move together (brightness dominates: RGB correlation ~0.9), and
    # an image's flat colour carries about a third of its energy, the rest is
    # texture, shading and the object. (A first version painted bright
    # patterns on flat, uncorrelated random colours: 84% of the input was the
    # image's colour, and a deep post-activation ResNet at lr 0.1 saw its
    # stream die in the first 80 steps; see docs/experiments/vision.md.)
    base = _luminance_colours(rng, n, 0.35, 0.65, chroma=0.05)  # (n, 1, 1, 3)
    upsample_4, upsample_8 = _bilinear_matrix(4, size), _bilinear_matrix(8, size)
    # `clutter` scales the label-free variation: the shading and the blobs (x 1.0 changes no bit).
    shading = clutter * (upsample_4 @ rng.normal(0, 0.15, (n, 4, 4)).astype(f32) @ upsample_4.T
                         + upsample_8 @ rng.normal(0, 0.08, (n, 8, 8)).astype(f32) @ upsample_8.T)
    tint = (upsample_4 @ rng.normal(0, 0.03, (n, 3, 4, 4)).astype(f32) @ upsample_4.T).transpose(0, 2, 3, 1)
    image = base + shading[..., None] + tint
    for _ in range(3):  # soft blobs of light or shadow
        blob_x, blob_y = draw(0, 32), draw(0, 32)
        blob_width = draw(1.5, 4.0)
        blob = np.exp(-((xx - blob_x) ** 2 + (yy - blob_y) ** 2) / (2 * blob_width**2))
        image += blob[..., None] * (clutter * draw(-0.3, 0.3))[..., None]
    # The object: lighter or darker than what lies under it, by a random contrast.
    contrast = draw(0.08, 0.3) * np.where(rng.random((n, 1, 1)) < 0.5, -1.0, 1.0).astype(f32)
    foreground = base + contrast[..., None] + rng.normal(0, 0.05, (n, 1, 1, 3)).astype(f32)
    mask = mask[..., None]
    # Half the objects are painted fully; the other half are faint, with an
    # opacity drawn log-uniformly from [faintest_object, 1]. So, as in
    # CIFAR-10, the images range from easy to barely visible and the set is
    # learnt a little more with every epoch, rather than all at once
    # (docs/experiments/vision.md, issue 53, item 5). At 1 nothing is drawn:
    # the set of 0.2.0.
    if faintest_object < 1:
        faint = rng.random((n, 1, 1, 1)) < 0.5
        opacity = np.exp(rng.uniform(np.log(faintest_object), 0.0, (n, 1, 1, 1)))
        mask = mask * np.where(faint, opacity, 1.0).astype(f32)
    if distractors:  # under the object, from their own stream: the rest of the image is unchanged
        image = paint_distractors(rng.spawn(1)[0], labels, image, base, xx, yy, distractors)
    image += mask * (foreground - image)  # paint the pattern over the background
    # Pixel noise, uniform with std 0.04 (uniform numbers are several times cheaper).
    image += (rng.random(image.shape, dtype=f32) - 0.5) * (0.04 * np.sqrt(12.0))
    image *= 255
    return np.clip(np.rint(image, out=image), 0, 255).astype(np.uint8)


def pattern(label, U, V, D, SD, W, k, p, r, t):
    """The opacity mask of class `label`'s pattern: u along its axis, v across it, D and SD the round and
    square distances from its centre, W its texture's window, k its wave number, p its phase, r its radius,
    t a line's half thickness (arrays of one shape, or broadcasting)."""
    if label <= 2:  # horizontal / vertical / diagonal stripes: vary along v
        return W * _sharp(np.sin(k * V + p), 0.25)
    if label == 3:  # checkerboard
        return W * _sharp(np.sin(k * U + p) * np.sin(k * V + p), 0.15)
    if label == 4:  # concentric rings
        return W * _sharp(np.sin(k * D + p), 0.25)
    if label == 5:  # dot grid
        return W * _sharp(np.cos(k * U + p) * np.cos(k * V) - 0.4, 0.1)
    if label == 6:  # solid disc
        return _sharp(0.8 * r - D, 0.6)
    if label == 7:  # square outline
        return _sharp(t - np.abs(SD - 0.8 * r), 0.5)
    if label == 8:  # plus sign
        bar_u = np.minimum(t - np.abs(V), 0.9 * r - np.abs(U))
        bar_v = np.minimum(t - np.abs(U), 0.9 * r - np.abs(V))
        return _sharp(np.maximum(bar_u, bar_v), 0.5)
    # triangle: inside three half-planes 120 degrees apart
    edges = [U * np.cos(a) + V * np.sin(a) for a in (0.0, 2.0944, 4.1888)]
    return _sharp(0.45 * r - np.maximum(np.maximum(edges[0], edges[1]), edges[2]), 0.5)


def paint_distractors(rng, labels, image, base, xx, yy, count):
    """`image` with `count` pieces of other classes' patterns painted in a random half of the images.

    Each piece: a class other than the image's own, a centre anywhere (2-30 in 32x32 units), radius
    3-5, its own rotation, period, phase and line thickness, a disc or square window, and a contrast
    drawn as the object's (0.08-0.3 lighter or darker, a small tint).
    """
    n, size = len(labels), image.shape[1]
    f32 = np.float32
    cluttered = (rng.random(n) < 0.5)[:, None, None]
    for _ in range(count):
        centre_x, centre_y = rng.uniform(2, 30, (n, 1, 1)).astype(f32), rng.uniform(2, 30, (n, 1, 1)).astype(f32)
        angle = rng.uniform(0, 2 * np.pi, (n, 1, 1)).astype(f32)
        dx, dy = xx - centre_x, yy - centre_y
        u = dx * np.cos(angle) + dy * np.sin(angle)
        v = -dx * np.sin(angle) + dy * np.cos(angle)
        other = (labels + rng.integers(1, 10, n)) % 10  # never the image's own class
        radius = rng.uniform(3, 5, (n, 1, 1)).astype(f32)
        wave = (2 * np.pi / rng.uniform(3.5, 7.0, (n, 1, 1))).astype(f32)
        phase = rng.uniform(0, 2 * np.pi, (n, 1, 1)).astype(f32)
        thickness = rng.uniform(1.2, 2.4, (n, 1, 1)).astype(f32)
        distance = np.sqrt(u * u + v * v)
        square_distance = np.maximum(np.abs(u), np.abs(v))
        window = _sharp(radius - np.where(rng.random((n, 1, 1)) < 0.5, distance, square_distance), 0.7)
        mask = np.zeros((n, size, size), f32)
        for label in range(len(SYNTHETIC_CLASS_NAMES)):
            pick = other == label
            if pick.any():
                mask[pick] = pattern(label, u[pick], v[pick], distance[pick], square_distance[pick],
                                      window[pick], wave[pick], phase[pick], radius[pick], thickness[pick])
        contrast = rng.uniform(0.08, 0.3, (n, 1, 1)).astype(f32) * np.where(
            rng.random((n, 1, 1)) < 0.5, -1.0, 1.0).astype(f32)
        colour = base + contrast[..., None] + rng.normal(0, 0.05, (n, 1, 1, 3)).astype(f32)
        image = image + (mask * cluttered)[..., None] * (colour - image)
    return image


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
