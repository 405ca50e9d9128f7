"""`python -m tracks.vision`: plain vs residual ResNets of growing depth on CIFAR-10.

He et al. 2015, figure 6, on your own machine: deeper plain networks train
worse (the degradation problem), deeper residual networks train better.

    python -m tracks.vision                       # the quick CPU preset
    python -m tracks.vision --preset fast         # GPU: 20/56/110, ~15 min
    python -m tracks.vision --depths 20,56 --variants plain,residual,fixup
    python -m tracks.vision --resume runs/vision-20261130-101500
    python -m tracks.vision diagnose              # unnormalised nets at 20/56/110 layers, at initialisation
    python -m tracks.vision diagnose --model my_resnet.keras   # the same instruments on your saved model
    python -m tracks.vision prefetch              # download CIFAR-10 for offline runs
"""

import sys

from tracks.common import instruments
from tracks.common.cli import (
    ConfigError,
    announce,
    diagnose_command,
    fail,
    log,
    prefetch_command,
    resolve_config,
    train_parser,
)
from tracks.common.run_dir import RunDirectory
from tracks.common.runtime import CPU_XLA, setup_runtime
from tracks.common.training import run_grid
from tracks.vision import experiment, report
from tracks.vision.presets import PRESETS, VisionConfig

TRACK = "vision"
DEFAULT_PRESET = "quick"
DIAGNOSE_PRESET = "mechanism"  # `diagnose --preset quick` measures the quick grid instead

# Measured training throughput of ResNet-20 (width 16), images/s, for the
# estimate printed before training; other models scale with depth x width^2.
REFERENCE_IMAGES_PER_SECOND = {"cpu": 250.0, "gpu": 12000.0}


def estimate_seconds(config, num_train, accelerator):
    rate = REFERENCE_IMAGES_PER_SECOND["gpu" if accelerator else "cpu"]
    total = 0.0
    for spec in experiment.grid(config):
        cost = (spec.depth / 20) * (config.width / 16) ** 2
        images = (num_train // config.batch_size) * config.batch_size * config.epochs
        total += images * cost / rate
    return total * 1.25 + 60  # evaluation, lesion studies, compilation; instruments at init


def load_data(config):
    from tracks.vision.data import load_vision_data, parse_source

    parse_source(config.data)
    # The synthetic set (explicit, or the offline fallback) is made as large as the run needs.
    needed = (config.train_size or 0) + config.validation_size
    return load_vision_data(
        config.data, data_dir=config.data_dir, seed=config.seed,
        train_size=config.train_size, validation_size=config.validation_size, log=log,
        synthetic_examples=(max(10_000, needed), 2_000),
    )


def prepare(args):
    """Everything that can fail on bad input, before anything is written."""
    config, run = resolve_config(args, TRACK, VisionConfig, PRESETS)
    data = load_data(config)
    if run is None:
        run = RunDirectory.create(TRACK, config, out=args.out)
    return config, run, data


def curve_dataset(config, data, datasets):
    """The per-epoch evaluation set for the curves: val if held out, else test.

    With `curve_eval_size`, a fixed random subset (test sets are often
    stored class by class, so the first images would all be one class).
    """
    _, val_ds, test_ds = datasets
    curve = val_ds if val_ds is not None else test_ds
    if config.curve_eval_size:
        import tensorflow as tf

        total = len(data.y_val if data.x_val is not None else data.y_test)
        size = min(config.curve_eval_size, total)
        curve = (curve.unbatch().shuffle(total, seed=config.seed, reshuffle_each_iteration=False)
                 .take(size).batch(config.batch_size).cache()
                 .apply(tf.data.experimental.assert_cardinality(-(-size // config.batch_size))))
    return curve


def initial_instruments(config, data, out_dir):
    """The gradient, activation and Jacobian plots of every grid model at initialisation."""
    import keras

    models = []
    for spec in experiment.grid(config):
        keras.utils.set_random_seed(config.seed)
        models.append((spec.id, spec.variant, spec.depth,
                       experiment.build_model(config, spec, data.num_classes)))
    x, y = instrument_batch(config, data)
    return instruments.at_initialisation(models, x, out_dir, y=y, banner=plot_banner(data), log=log)


def instrument_batch(config, data):
    """(x, y): the fixed batch of training images (normalised) the instruments use."""
    indices = experiment.sample_indices(len(data.y_train), config.instrument_images, config.seed)
    return data.normalize(data.x_train[indices]), data.y_train[indices]


def plot_banner(data):
    return "SYNTHETIC DATA, NOT CIFAR-10" if data.banner else None


def train(args):
    try:
        config, run, data = prepare(args)
    except (ConfigError, ValueError) as error:
        return fail(str(error))
    from tracks.vision.data import make_datasets

    runtime = setup_runtime(config.precision, config.xla, config.strategy, seed=config.seed,
                            cpu_xla=CPU_XLA[TRACK])
    banner = data.banner
    num_train = len(data.y_train)
    specs = experiment.grid(config)
    announce(run, config, runtime, specs, estimate_seconds(config, num_train, runtime.accelerator),
             f"{data.name}, {num_train} training images, {len(data.y_test)} test images")
    datasets = make_datasets(data, config.batch_size, augment=config.augment, seed=config.seed)
    train_ds, _, test_ds = datasets
    curve = curve_dataset(config, data, datasets)
    run.update_results(
        track=TRACK, preset=config.preset, dataset=data.name, banner=banner,
        train_images=num_train, **runtime.describe(),
    )
    if "initialisation" not in run.read_results():
        run.update_results(initialisation=initial_instruments(config, data, run.path))
    results = run_grid(
        run, specs,
        lambda spec: experiment.train_one(config, spec, runtime, data, (train_ds, curve, test_ds), run, log),
        log=log, cost=lambda spec: spec.depth,
    )
    write_report(run, config, results, data)
    log(f"done: {run.path / 'summary.md'}")
    return 0


def write_report(run, config, results, data):
    figures = [("Training curves", "training_curves.png")]
    report.plot_training_curves(run, config, results, run.path / "training_curves.png", plot_banner(data))
    figures += instruments.instrument_figures(run.path)
    if report.plot_lesions(config, results, run.path / "lesion.png", plot_banner(data)):
        figures.append(("Lesion study of the trained networks", "lesion.png"))
    figures += report.plot_ensemble(config, results, run.path, plot_banner(data))
    report.write_summary(run, config, results, figures, data.banner)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = train_parser(
        "python -m tracks.vision", __doc__, VisionConfig, PRESETS, DEFAULT_PRESET,
    )
    if argv[:1] == ["prefetch"]:
        return prefetch_command("python -m tracks.vision", "cifar10", argv[1:])
    if argv[:1] == ["diagnose"]:
        return diagnose_command("python -m tracks.vision", TRACK, VisionConfig, PRESETS, DIAGNOSE_PRESET,
                                argv[1:], load_data=load_data, initial_instruments=initial_instruments,
                                title="Vision networks at initialisation",
                                instrument_batch=instrument_batch, banner_of=plot_banner)
    args = parser.parse_args(argv)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
