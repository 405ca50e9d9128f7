"""`python -m tracks.vision`: plain vs residual ResNets of growing depth on CIFAR-10.

He et al. 2015, figure 6, on your own machine: deeper plain networks train
worse (the degradation problem), deeper residual networks train better.

    python -m tracks.vision                       # the quick CPU preset
    python -m tracks.vision --preset fast         # GPU: 20/56/110, 30 epochs
    python -m tracks.vision --depths 20,56 --variants plain,residual,fixup
    python -m tracks.vision --resume runs/vision-20261130-101500
    python -m tracks.vision diagnose              # unnormalised nets at 20/56/110 layers, at initialisation
    python -m tracks.vision compare runs/vision-... docs/reference/vision-cifar10-s0   # a run beside the reference
    python -m tracks.vision diagnose --model my_resnet.keras   # the same instruments on your saved model
    python -m tracks.vision prefetch              # download CIFAR-10 for offline runs
"""

from tracks.common.console import log
from tracks.common.limits import Estimate
from tracks.common.track import Track
from tracks.vision.presets import CPU_XLA, PRESETS, VisionConfig
from tracks.vision.variants import VARIANTS

# The rate of ResNet-20 (width 16), images/s, behind the estimate printed before training;
# other models scale with depth x width^2. The figures' sources: docs/maintainers.md, "Timings the code assumes".
REFERENCE_IMAGES_PER_SECOND = {"cpu": 250.0, "gpu": 12000.0}
# What `resources` assumes before the data are read: CIFAR-10's sizes (a folder or the synthetic set
# of the same image size differ little), 32 x 32 x 3 uint8 images.
CIFAR_TRAIN_IMAGES, CIFAR_TEST_IMAGES, IMAGE_BYTES = 50_000, 10_000, 32 * 32 * 3


class VisionTrack(Track):
    name = "vision"
    usage = __doc__
    config_cls = VisionConfig
    presets = PRESETS
    diagnose_preset = "mechanism"  # `diagnose --preset quick` measures the quick grid instead
    diagnose_title = "Vision networks at initialisation"
    instrument_examples = "training images"  # the batch the instruments read
    prefetch_dataset = "cifar10"
    cpu_xla = CPU_XLA

    # Data ---------------------------------------------------------------------

    def parse_source(self, text):
        from tracks.vision.source import parse_source

        return parse_source(text)

    def load_data(self, config, source=None):
        from tracks.vision.data import load_vision_data

        # The synthetic set (explicit, or the offline fallback) is made as large as the run needs.
        needed = (config.train_size or 0) + config.validation_size
        return load_vision_data(
            source or config.data, data_dir=config.data_dir, seed=config.seed,
            train_size=config.train_size, validation_size=config.validation_size, log=log,
            synthetic_examples=(max(10_000, needed), 2_000),
        )

    @property
    def download_host(self):
        from tracks.vision.data.sources import CIFAR10_HOST

        return CIFAR10_HOST

    def fingerprint(self, data):
        from tracks.vision.data import fingerprint

        return fingerprint(data)

    def check(self, config, data):
        if config.batch_size > len(data.y_train):
            raise ValueError(f"--batch-size {config.batch_size} is more than the {len(data.y_train)} "
                             f"training images of {data.name}; lower it")

    def sample_limits(self, config, data):
        training, test = f"training images of {data.name}", f"test images of {data.name}"
        limits = [("instrument_images", len(data.y_train), training),
                  ("lesion_images", len(data.y_test), test)]
        if config.landscape_steps:
            limits.append(("landscape_images", len(data.y_train), training))
        return limits

    def banner(self, data):
        return "SYNTHETIC DATA, NOT CIFAR-10" if data.banner else None

    def data_title(self, name):
        from tracks.vision.data.sources import dataset_title

        return dataset_title(name)

    def describe_data(self, data):
        return f"{data.name}, {len(data.y_train)} training images, {len(data.y_test)} test images"

    # Models ---------------------------------------------------------------------

    def grid(self, config):
        from tracks.vision import experiment

        return experiment.grid(config)

    def build_model(self, config, spec, data):
        from tracks.vision import experiment

        return experiment.build_model(config, spec, data.num_classes)

    def is_plain(self, spec):
        return VARIANTS[spec.variant].plain

    def instrument_batch(self, config, data):
        from tracks.vision import experiment

        return experiment.instrument_batch(config, data)

    # Training ---------------------------------------------------------------------

    def estimate_seconds(self, config, data, specs, accelerator):
        return self._seconds(config, len(data.y_train), [spec.depth for spec in specs], accelerator)

    def _seconds(self, config, train_images, depths, accelerator):
        rate = REFERENCE_IMAGES_PER_SECOND["gpu" if accelerator else "cpu"]
        images = (train_images // config.batch_size) * config.batch_size * config.epochs
        total = sum(images * (depth / 20) * (config.width / 16) ** 2 / rate for depth in depths)
        return total * 1.25 + 60  # evaluation, lesion studies, compilation; instruments at init

    def resources(self, config):
        train = config.train_size or CIFAR_TRAIN_IMAGES - config.validation_size
        depths = [depth for depth in config.depths for _ in config.variants]
        n, width = (max(config.depths) - 2) // 6, config.width
        # Per stage (32x32 x w, 16x16 x 2w, 8x8 x 4w) and block: two 3x3 convolutions, their weights, and
        # about six activations an image kept for the backward pass (convolutions, BatchNorms, ReLUs).
        weights = n * 18 * width**2 * (1 + 4 + 16)
        activations = n * 6 * (32 * 32 * width + 16 * 16 * 2 * width + 8 * 8 * 4 * width)
        return Estimate(
            data_bytes=(train + config.validation_size + CIFAR_TEST_IMAGES) * IMAGE_BYTES,
            model_bytes=4 * (4 * weights + config.batch_size * activations),  # + gradients, momentum; float32
            cpu_seconds=self._seconds(config, train, depths, False) * max(1, len(config.seeds)),
        )

    def run_fields(self, config, data):
        return {"train_images": len(data.y_train)}

    def trainer(self, config, run, data, runtime):
        from tracks.vision import experiment

        from tracks.vision.data import training_epochs

        # Every model trains on the same epochs: epoch e's batches depend on (seed, e) only.
        epoch_data = training_epochs(data, config.batch_size, augment=config.augment, seed=config.seed)
        datasets = (epoch_data, *self.evaluation_datasets(config, data))
        return lambda spec: experiment.train_one(config, spec, runtime, data, datasets, run, log)

    def evaluation_datasets(self, config, data):
        """(curve_name, curve, test): the per-epoch evaluation set for the curves, its name, the test set.

        The curves use the val set if one is held out ("val"), else the test set
        ("test"); with `curve_eval_size`, a fixed random subset of it
        ("test_subset": test sets are often stored class by class, so the first
        images would all be one class).
        """
        from tracks.vision import experiment

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

    # The report ----------------------------------------------------------------------

    def subtitle(self, config, data):
        from tracks.vision import report

        return report.run_subtitle(config, data)

    def write_report(self, run, config, results, data):
        from tracks.vision import report

        from tracks.common import instruments

        figures = [("Training curves", "training_curves.png")]
        banner, subtitle = self.banner(data), report.run_subtitle(config, data)
        report.plot_training_curves(run, config, results, run.path / "training_curves.png", banner, subtitle)
        figures += instruments.instrument_figures(run.path)
        if report.plot_lesions(config, results, run.path / "lesion.png", banner, subtitle):
            figures.append(("Lesion study of the trained networks", "lesion.png"))
        figures += report.plot_ensemble(config, results, run.path, banner, subtitle)
        figures += report.plot_landscape(config, results, run.path, banner, subtitle)
        report.write_summary(run, config, results, figures, data.banner)

    def results_table(self, results):
        from tracks.vision import report

        return report.results_table(results)

    def terminal_ending(self, run, results):
        from tracks.vision import report

        return report.terminal_ending(run, results)

    def write_seeds_report(self, run, config, seed_runs, data):
        from tracks.vision import report

        return report.write_seeds_report(run, config, seed_runs, banner=data.banner, plot_banner=self.banner(data))

    def seeds_terminal_ending(self, run, results):
        from tracks.vision import report

        return report.seeds_terminal_ending(run, results)

    def comparison_figures(self, results):
        from tracks.vision import report

        return report.comparison_figures(results)

    def findings(self, results, config):
        from tracks.vision.findings import vision_findings

        return vision_findings(results, config.get("variants") or ())


TRACK = VisionTrack()
