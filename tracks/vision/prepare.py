"""What a vision run settles before it trains: its data, the options checked against them, its cost.

Imported before TensorFlow (the refusal of a run too large for the machine
comes first); the data modules load when `load_data` is called.
"""

import dataclasses
import types

from tracks.common.config import option_name
from tracks.common.limits import Estimate

# The rate of ResNet-20 (width 16), images/s, behind the estimate printed before training;
# other models scale with depth x width^2. The figures' sources: docs/maintainers.md, "Timings the code assumes".
REFERENCE_IMAGES_PER_SECOND = {"cpu": 250.0, "gpu": 12000.0}
# What `resources` assumes before the data are read: CIFAR-10's sizes (a folder or the synthetic set
# of the same image size differ little), 32 x 32 x 3 uint8 images.
CIFAR_TRAIN_IMAGES, CIFAR_TEST_IMAGES, IMAGE_BYTES = 50_000, 10_000, 32 * 32 * 3


def load_data(ctx):
    """The run's images; the synthetic set (explicit, or the offline fallback) is made as large as the run needs.

    An image folder is counted first, and the options are checked against its counts before any image
    is decoded or cached: a preset's training subset or batch too large for it is lowered (said after
    loading, by `fit_defaults`), a typed one is refused, as a typed instrument sample size is.
    """
    from tracks.common.resume import refuse_given_samples
    from tracks.vision.data import load_vision_data

    config = ctx.config
    needed = (config.train_size or 0) + config.validation_size

    def accept(train_count, test_count):  # -> the training subset to keep
        available = train_count - config.validation_size
        if available < 1:
            return config.train_size  # the split's own check refuses it
        fits = _fit_to_images(config, ctx.given, available, ctx.trains)
        counts = types.SimpleNamespace(y_train=range(fits.get("train_size", config.train_size) or available),
                                       y_test=range(test_count), name=config.data)
        batch = fits.get("batch_size", config.batch_size)
        check(ctx.replace(config=dataclasses.replace(config, batch_size=batch), data=counts))  # a typed batch first
        fitted = dataclasses.replace(config, **fits)
        refuse_given_samples(sample_limits(ctx.replace(config=fitted, data=counts)), fitted, ctx.given)
        return fitted.train_size

    return load_vision_data(
        config.data, data_dir=config.data_dir, seed=config.seed, train_size=config.train_size,
        validation_size=config.validation_size, log=ctx.log, synthetic_examples=(max(10_000, needed), 2_000),
        synthetic_faintest=config.synthetic_faintest, synthetic_distractors=config.synthetic_distractors,
        synthetic_clutter=config.synthetic_clutter,
        accept=accept,
    )


def _fit_to_images(config, given, available, trains=True):
    """{field: value} lowering a preset's --train-size and --batch-size (not typed) to `available` training images."""
    changes = {}
    if "train_size" not in given and config.train_size is not None and config.train_size > available:
        changes["train_size"] = available
    training = changes.get("train_size", config.train_size) or available
    if trains and "batch_size" not in given and config.batch_size > training:
        changes["batch_size"] = training
    return changes


def fit_defaults(ctx, given):
    """A preset's --train-size or --batch-size larger than the training images a folder has: lowered to them,
    each said in one line (a typed one is refused by `check` and the split); nothing else changes."""
    config, data = ctx.config, ctx.data
    changes = _fit_to_images(config, given, len(data.y_train), ctx.trains)
    for field, value in changes.items():
        ctx.log(f"{option_name(field)}: the preset's {getattr(config, field)} is more than the {len(data.y_train)} training "
                f"images of {data.name}; using {value}")
    return changes


def check(ctx):
    config, data = ctx.config, ctx.data
    if ctx.trains and config.batch_size > len(data.y_train):  # diagnose uses no batch size
        raise ValueError(f"--batch-size {config.batch_size} is more than the {len(data.y_train)} "
                         f"training images of {data.name}; lower it")


def sample_limits(ctx):
    config, data = ctx.config, ctx.data
    training, test = f"training images of {data.name}", f"test images of {data.name}"
    limits = [("instrument_images", len(data.y_train), training),
              ("lesion_images", len(data.y_test), test)]
    if config.landscape_steps:
        limits.append(("landscape_images", len(data.y_train), training))
    if ctx.trains and config.warmup_steps and any(depth >= config.warmup_from_depth for depth in config.depths):
        # experiment.py holds the warm-up to a quarter of the run's steps: a longer one is refused or lowered here
        steps = len(data.y_train) // config.batch_size * config.epochs
        limits.append(("warmup_steps", steps // 4, f"steps of warm-up a quarter of the run's {steps} steps allow"))
    return limits


def run_fields(ctx):
    return {"train_images": len(ctx.data.y_train)}


def _seconds(config, train_images, depths, accelerator):
    rate = REFERENCE_IMAGES_PER_SECOND["gpu" if accelerator else "cpu"]
    images = (train_images // config.batch_size) * config.batch_size * config.epochs
    total = sum(images * (depth / 20) * (config.width / 16) ** 2 / rate for depth in depths)
    return total * 1.25 + 60  # evaluation, lesion studies, compilation; instruments at init


def resources(config, data=None, accelerator=False):
    """The run's memory and time: from its config alone (CIFAR-10's sizes), or from the loaded `data`."""
    if data is None:
        train = config.train_size or CIFAR_TRAIN_IMAGES - config.validation_size
    else:
        train = len(data.y_train)
    depths = [depth for depth in config.depths for _ in config.variants]
    n, width = (max(config.depths) - 2) // 6, config.width
    # Per stage (32x32 x w, 16x16 x 2w, 8x8 x 4w) and block: two 3x3 convolutions, their weights, and
    # about six activations an image kept for the backward pass (convolutions, BatchNorms, ReLUs).
    weights = n * 18 * width**2 * (1 + 4 + 16)
    activations = n * 6 * (32 * 32 * width + 16 * 16 * 2 * width + 8 * 8 * 4 * width)
    return Estimate(
        data_bytes=(train + config.validation_size + CIFAR_TEST_IMAGES) * IMAGE_BYTES,
        model_bytes=4 * (4 * weights + config.batch_size * activations),  # + gradients, momentum; float32
        cpu_seconds=_seconds(config, train, depths, accelerator) * max(1, len(config.seeds)),
    )
