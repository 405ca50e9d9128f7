"""`python -m tracks.vision`: plain vs residual ResNets of growing depth on CIFAR-10.

He et al. 2015, figure 6, on your own machine: deeper plain networks train
worse (the degradation problem), deeper residual networks train better.

    python -m tracks.vision                       # the quick CPU preset
    python -m tracks.vision --preset fast         # GPU: 20/56/110, ~15 min
    python -m tracks.vision --depths 20,56 --variants plain,residual,fixup
    python -m tracks.vision --resume runs/vision-20261130-101500
    python -m tracks.vision diagnose              # unnormalised nets at 20/56/110 layers, at initialisation
    python -m tracks.vision compare runs/vision-... docs/reference/vision-cifar10-s0   # a run beside the reference
    python -m tracks.vision diagnose --model my_resnet.keras   # the same instruments on your saved model
    python -m tracks.vision prefetch              # download CIFAR-10 for offline runs
"""

import sys

from tracks.common import instruments
from tracks.common.cli import (
    announce,
    diagnose_command,
    log,
    prefetch_command,
    start_or_resume,
    train_command,
    train_parser,
)
from tracks.common.runtime import setup_runtime
from tracks.common.training import run_grid
from tracks.vision import experiment, report
from tracks.vision.presets import CPU_XLA, PRESETS, VisionConfig

TRACK = "vision"
PROG = "python -m tracks.vision"
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


def load_data(config, source=None):
    """The run's images; `source` (a resumed run's resolved source) replaces `config.data`."""
    from tracks.vision.data import load_vision_data

    # The synthetic set (explicit, or the offline fallback) is made as large as the run needs.
    needed = (config.train_size or 0) + config.validation_size
    return load_vision_data(
        source or config.data, data_dir=config.data_dir, seed=config.seed,
        train_size=config.train_size, validation_size=config.validation_size, log=log,
        synthetic_examples=(max(10_000, needed), 2_000),
    )


def prepare(args):
    """Everything that can fail on bad input, before anything is written."""
    from tracks.vision.data import fingerprint, parse_source

    return start_or_resume(args, TRACK, VisionConfig, PRESETS, parse_source=parse_source,
                           load_data=load_data, fingerprint=fingerprint, check=check_batch_size)


def check_batch_size(config, data):
    if config.batch_size > len(data.y_train):
        raise ValueError(f"--batch-size {config.batch_size} is larger than the {len(data.y_train)} "
                         f"training images; lower it")


def evaluation_datasets(config, data):
    """(curve_name, curve, test): the per-epoch evaluation set for the curves, its name, the test set.

    The curves use the val set if one is held out ("val"), else the test set
    ("test"); with `curve_eval_size`, a fixed random subset of it
    ("test_subset": test sets are often stored class by class, so the first
    images would all be one class).
    """
    from tracks.vision.data import evaluation_batches

    test = evaluation_batches(data, data.x_test, data.y_test, config.batch_size)
    held_out = data.x_val is not None
    images, labels = (data.x_val, data.y_val) if held_out else (data.x_test, data.y_test)
    name = "val" if held_out else "test"
    if config.curve_eval_size and config.curve_eval_size < len(labels):
        chosen = experiment.sample_indices(len(labels), config.curve_eval_size, config.seed)
        images, labels = images[chosen], labels[chosen]
        name = "val" if held_out else "test_subset"
    return name, evaluation_batches(data, images, labels, config.batch_size), test


def initial_instruments(config, data, out_dir):
    """The gradient, activation and Jacobian plots of every grid model at initialisation."""
    import keras

    models = []
    for spec in experiment.grid(config):
        keras.utils.set_random_seed(config.seed)
        models.append((spec.id, spec.variant, spec.depth,
                       experiment.build_model(config, spec, data.num_classes)))
    x, y = instrument_batch(config, data)
    subtitle = f"{report.run_subtitle(config, data)}; at initialisation, {len(x)} training images"
    return instruments.at_initialisation(models, x, out_dir, y=y, banner=plot_banner(data), subtitle=subtitle,
                                         log=log)


def instrument_batch(config, data):
    """(x, y): the fixed batch of training images (normalised) the instruments use."""
    indices = experiment.sample_indices(len(data.y_train), config.instrument_images, config.seed)
    return data.normalize(data.x_train[indices]), data.y_train[indices]


def plot_banner(data):
    return "SYNTHETIC DATA, NOT CIFAR-10" if data.banner else None


def train(config, run, data):
    """Trains a prepared run (once per seed with --seeds), then writes its report."""
    from tracks.common import seeds
    from tracks.vision.data import fingerprint

    return seeds.train(config, run, data, train_one_run=train_one_run, load_data=load_data,
                       fingerprint=fingerprint, report=report, plot_banner=plot_banner, log=log)


def train_one_run(config, run, data):
    """Trains the grid of one run (one seed), then writes its report."""
    from tracks.vision.data import training_epochs

    runtime = setup_runtime(config.precision, config.xla, config.strategy, seed=config.seed,
                            cpu_xla=CPU_XLA)
    num_train = len(data.y_train)
    specs = experiment.grid(config)
    announce(run, config, runtime, specs, estimate_seconds(config, num_train, runtime.accelerator),
             f"{data.name}, {num_train} training images, {len(data.y_test)} test images")
    # Every model trains on the same epochs: epoch e's batches depend on (seed, e) only.
    epoch_data = training_epochs(data, config.batch_size, augment=config.augment, seed=config.seed)
    curve_name, curve, test = evaluation_datasets(config, data)
    run.update_results(
        track=TRACK, preset=config.preset, dataset=data.name, banner=data.banner,
        train_images=num_train, **runtime.describe(),
    )
    if "initialisation" not in run.read_results():
        run.update_results(initialisation=initial_instruments(config, data, run.path))
    results = run_grid(
        run, specs,
        lambda spec: experiment.train_one(config, spec, runtime, data,
                                          (epoch_data, curve_name, curve, test), run, log),
        log=log, cost=lambda spec: spec.depth, seed=config.seed,
    )
    write_report(run, config, results, data)
    log(report.terminal_ending(run, results))


def write_report(run, config, results, data):
    figures = [("Training curves", "training_curves.png")]
    banner, subtitle = plot_banner(data), report.run_subtitle(config, data)
    report.plot_training_curves(run, config, results, run.path / "training_curves.png", banner, subtitle)
    figures += instruments.instrument_figures(run.path)
    if report.plot_lesions(config, results, run.path / "lesion.png", banner, subtitle):
        figures.append(("Lesion study of the trained networks", "lesion.png"))
    figures += report.plot_ensemble(config, results, run.path, banner, subtitle)
    figures += report.plot_landscape(config, results, run.path, banner, subtitle)
    report.write_summary(run, config, results, figures, data.banner)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["prefetch"]:
        return prefetch_command(PROG, "cifar10", argv[1:])
    if argv[:1] == ["compare"]:
        from tracks.common.compare import compare_command
        from tracks.vision.findings import vision_findings

        return compare_command(PROG, TRACK, argv[1:], report.comparison_figures,
                               lambda results, config: vision_findings(results, config.get("variants") or ()))
    if argv[:1] == ["diagnose"]:
        from tracks.vision.data import fingerprint, parse_source

        return diagnose_command(PROG, TRACK, VisionConfig, PRESETS, DIAGNOSE_PRESET, argv[1:],
                                parse_source=parse_source, load_data=load_data, fingerprint=fingerprint,
                                initial_instruments=initial_instruments,
                                title="Vision networks at initialisation",
                                instrument_batch=instrument_batch, banner_of=plot_banner)
    args = train_parser(PROG, __doc__, VisionConfig, PRESETS, DEFAULT_PRESET).parse_args(argv)
    return train_command(PROG, lambda: prepare(args), train)


if __name__ == "__main__":
    sys.exit(main())
