"""The toy track's options and presets: plain vs residual MLPs on two spirals."""

import dataclasses

from tracks.common.config import RuntimeOptions, refuse_repeats
from tracks.common.option_ranges import check_counts, check_depths, check_finite_floats, check_seed, check_seeds

VARIANTS = ("plain", "residual")
MAX_DEPTH = 256  # layers: 4x the deep preset's deepest; the degradation shows far below it


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
