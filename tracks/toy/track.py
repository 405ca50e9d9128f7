"""`python -m tracks.toy`: plain vs residual MLPs on two spirals, degradation in a minute or two.

The degradation problem small enough to run live in a lecture: the deep
plain MLP fits its own training points worse than the shallow one, its
residual twin (the same layers, plus the shortcut) does not; the decision
boundaries show it, and every instrument of the other tracks measures it.

    python -m tracks.toy                        # 2 and 20 layers (run times: docs/running.md)
    python -m tracks.toy --preset deep          # depths 2, 8, 32, 64: several minutes
    python -m tracks.toy --depths 4,16 --epochs 5
    python -m tracks.toy --seeds 0,1            # every model once per seed, then mean +- std
    python -m tracks.toy diagnose               # the instruments at initialisation only
"""

import dataclasses

from tracks.common.checks import check_counts, check_depths, check_finite_floats, check_seed, check_seeds
from tracks.common.config import RuntimeOptions, refuse_repeats
from tracks.common.console import log
from tracks.common.limits import Estimate
from tracks.common.track import Track

VARIANTS = ("plain", "residual")
MAX_DEPTH = 256  # layers: 4x the deep preset's deepest; the degradation shows far below it

# The estimate of a run before it starts (`resources`), for the refusal of a run longer than a day on a CPU:
# a time per layer and step, plus each layer's 6 x batch x width^2 floating-point operations at CPU_FLOPS.
# The figures' sources: docs/maintainers.md, "Timings the code assumes".
SECONDS_PER_LAYER_STEP = 7.6 / (20 * 200)
CPU_FLOPS = 100e9


def _option(default, text, **extra):
    return dataclasses.field(default=default, metadata={"help": text, **extra})


@dataclasses.dataclass(frozen=True)
class ToyConfig(RuntimeOptions):
    """Everything that defines a toy run (written to config.json)."""

    preset: str = dataclasses.field(default="quick", metadata={"cli": False})
    data: str = _option("spirals", "spirals (two interleaved spirals, drawn from the seed)")
    points: int = _option(512, "training points (and as many test points)")
    noise: float = _option(0.02, "standard deviation of the points around their spiral")
    depths: tuple[int, ...] = _option((2, 20), f"layers of the MLPs, e.g. 2,8,32,64 (1..{MAX_DEPTH})")
    variants: tuple[str, ...] = _option(VARIANTS, "plain, residual or both")
    width: int = _option(32, "units of every layer")
    epochs: int = _option(4, "epochs (each `--steps-per-epoch` steps)")
    steps_per_epoch: int = _option(50, "training steps per epoch")
    batch_size: int = _option(128, "points per step")
    learning_rate: float = _option(3e-3, "Adam's learning rate")
    instrument_points: int = _option(64, "training points for the instruments")
    seed: int = _option(0, "random seed (the points, the initialisation, the batch order; 0..2**32-1)")
    seeds: tuple[int, ...] = _option((), "train every model once per seed, e.g. 0,1 (replaces --seed)")
    steps_per_execution: int = _option(25, "training steps per compiled call")

    def __post_init__(self):
        check_seeds(self.seeds)
        if self.seeds and self.seed != self.seeds[0]:
            raise ValueError(f"--seeds {','.join(map(str, self.seeds))} replaces --seed: give one of them")
        check_depths(self.depths, MAX_DEPTH)
        unknown = [variant for variant in self.variants if variant not in VARIANTS]
        if not self.variants or unknown:
            raise ValueError(f"--variants: choose from {', '.join(VARIANTS)}; got {','.join(self.variants) or 'none'}")
        refuse_repeats("--depths", self.depths)
        refuse_repeats("--variants", self.variants)
        check_counts(self, ("points", "width", "epochs", "steps_per_epoch", "batch_size", "instrument_points",
                            "steps_per_execution"))
        check_seed("--seed", self.seed)
        check_finite_floats(self)
        if self.batch_size > self.points:
            raise ValueError(f"--batch-size {self.batch_size} is more than the {self.points} training points "
                             f"(--points); lower it")
        if not 0 <= self.noise < 1:
            raise ValueError(f"--noise must be in [0, 1), got {self.noise}")
        if not 0 < self.learning_rate < 1:
            raise ValueError(f"--learning-rate must be in (0, 1), got {self.learning_rate}")


PRESETS = {
    "smoke": ToyConfig(preset="smoke", depths=(2, 4), points=128, width=8, epochs=2, steps_per_epoch=5,
                       batch_size=64, instrument_points=16, steps_per_execution=5),
    # The default, for a lecture: the plain 20-layer MLP degrades, its residual twin does not (seeds 0, 1, 2;
    # at 16 layers the plain MLP trained on seed 1).
    "quick": ToyConfig(preset="quick"),
    # The whole range: degradation grows with depth (64 layers: minutes, most of it TensorFlow tracing the graph).
    "deep": ToyConfig(preset="deep", depths=(2, 8, 32, 64), epochs=8, steps_per_epoch=25),
}


class ToyTrack(Track):
    name = "toy"
    usage = __doc__
    config_cls = ToyConfig
    presets = PRESETS
    diagnose_title = "Plain and residual MLPs at initialisation"
    cpu_xla = False  # measured: tracing dominates these small steps, and XLA adds its compilation
    cpu_graph_optimizer = False  # Grappler off: faster first steps (measured: docs/maintainers.md)
    instrument_options = {"jacobian_depths": 4}  # the Jacobian along 4 depths: seconds, not half a minute

    def parse_source(self, text):
        from tracks.toy import data as spirals

        return spirals.parse_source(text)

    def load_data(self, config, source=None):
        from tracks.toy import data as spirals

        return spirals.load(config)

    def fingerprint(self, data):
        from tracks.toy import data as spirals

        return spirals.fingerprint(data)

    def sample_limits(self, config, data):
        return [("instrument_points", len(data.y_train), "training points")]

    def resources(self, config):
        models = len(config.variants) * max(1, len(config.seeds))
        steps, width = config.epochs * config.steps_per_epoch, config.width
        layer_step = SECONDS_PER_LAYER_STEP + 6 * config.batch_size * width**2 / CPU_FLOPS
        deepest = max(config.depths)
        weights = 4 * (deepest * width * (width + 1) + 5 * width + 2)  # float32 bytes; + input and classifier
        return Estimate(
            data_bytes=2 * config.points * (2 * 4 + 4),  # training and test points: 2 floats and a label each
            model_bytes=4 * weights + 4 * 4 * config.batch_size * width * deepest,  # + Adam, gradients; activations
            cpu_seconds=models * sum(depth * steps * layer_step for depth in config.depths),
        )

    def describe_data(self, data):
        return f"two spirals, {len(data.y_train)} training and {len(data.y_test)} test points"

    def grid(self, config):
        from tracks.toy import experiment

        return experiment.grid(config)

    def build_model(self, config, spec, data):
        from tracks.toy import experiment

        return experiment.build_model(config, spec)

    def is_plain(self, spec):
        return spec.variant == "plain"

    def instrument_batch(self, config, data):
        from tracks.toy import experiment

        return experiment.instrument_batch(config, data)

    def trainer(self, config, run, data, runtime):
        from tracks.toy import experiment

        epoch_data = experiment.epochs_of(config, data)
        return lambda spec: experiment.train_one(config, spec, runtime, data, epoch_data, run, log)

    def subtitle(self, config, data):
        return f"two spirals, seed {config.seed}: {len(data.y_train)} points, width {config.width} ({config.preset} preset)"

    def write_report(self, run, config, results, data):
        from tracks.toy import report

        report.write_report(run, config, results, data, self.subtitle(config, data))

    def results_table(self, results):
        from tracks.toy import report

        return report.results_table(results)

    def write_seeds_report(self, run, config, seed_runs, data):
        from tracks.toy import report

        return report.write_seeds_report(run, config, seed_runs, data)

    def seeds_terminal_ending(self, run, results):
        from tracks.toy import report

        return report.seeds_terminal_ending(run, results)

    def comparison_figures(self, results):
        from tracks.toy import report

        return report.comparison_figures(results)

    def findings(self, results, config):
        from tracks.toy import findings

        return findings.toy_findings(results)


TRACK = ToyTrack()
