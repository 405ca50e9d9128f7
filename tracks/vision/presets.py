"""The vision track's configuration and its presets.

He et al. 2015, section 4.2: batch 128, SGD momentum 0.9, coupled weight decay
1e-4, learning rate 0.1 divided by 10 at 32k and 48k iterations, stop at 64k
(182 epochs of a 45k training split), ResNet-110 warmed up at 0.01 for about
400 iterations. `paper` is that recipe; the others shorten it.
"""

import dataclasses
import math
from typing import ClassVar, Optional

from tracks.common.config import RuntimeOptions, refuse_repeats
from tracks.common.console import log
from tracks.common.option_ranges import check_counts, check_depths, check_finite_floats, check_seed, check_seeds
from tracks.vision.variants import VARIANT_HELP, VARIANTS

SCHEDULES = ("cosine", "step")
# He et al.'s deepest CIFAR network (section 4.2): 200 blocks per stage.
MAX_DEPTH = 1202
# tracks/vision/data/synthetic.py's MAX_DISTRACTORS (a test keeps them equal; that module loads TensorFlow with its
# package).
MAX_DISTRACTORS = 16
MAX_CLUTTER = 4.0  # and its MAX_CLUTTER
# CIFAR ResNets have 6n + 2 layers (residual_keras.models.blocks_per_stage, checked here without Keras).
DEPTH_RULE = (lambda depth: (depth - 2) % 6 == 0, "depths must be 6n+2 (8, 14, 20, 32, 44, 56, 110, ..., 1202)")


@dataclasses.dataclass(frozen=True)
class VisionConfig(RuntimeOptions):
    """Everything that defines a vision run (written to config.json)."""

    preset: str = dataclasses.field(default="quick", metadata={"cli": False})
    data: str = dataclasses.field(
        default="auto",
        metadata={"help": "auto | cifar10 | synthetic | folder:PATH (default: auto = "
                  "cifar10 when available, else synthetic with a warning)"},
    )
    # The default is tracks/vision/data/synthetic.py's FAINTEST_OBJECT (a test keeps them equal; that
    # module is not imported here, as it loads TensorFlow with its package).
    synthetic_faintest: float = dataclasses.field(
        default=0.065,
        metadata={"help": "the synthetic set: half its objects are painted faintly, with an opacity drawn "
                  "log-uniformly from [this, 1]; 1 paints every object fully (the set of 0.2.0); the default "
                  "makes the set about as hard as CIFAR-10 for the class preset"},
    )
    synthetic_distractors: int = dataclasses.field(
        default=0,
        metadata={"help": "the synthetic set: half its images hold this many distractors, small pieces of other "
                  "classes' patterns under the object (0-16; 0: none), which a deeper net learns to see past"},
    )
    synthetic_clutter: float = dataclasses.field(
        default=1.0,
        metadata={"help": f"the synthetic set: its background's shading and blobs, which carry no label, x this "
                  f"(0-{MAX_CLUTTER:g}; 1: the background of 0.2.0); more keeps a deep plain net at chance longer"},
    )
    data_dir: Optional[str] = dataclasses.field(
        default=None, metadata={"help": "TFDS data directory (default: $TFDS_DATA_DIR or ~/tensorflow_datasets)"}
    )
    depths: tuple[int, ...] = dataclasses.field(
        default=(20, 56), metadata={"help": f"network depths 6n+2 in 8..{MAX_DEPTH}, e.g. 20,56,110"}
    )
    variants: tuple[str, ...] = dataclasses.field(
        default=("plain", "residual"), metadata={"help": f"comma-separated; {VARIANT_HELP}"}
    )
    width: int = dataclasses.field(default=16, metadata={"help": "filters of the first stage (paper: 16)"})
    epochs: int = dataclasses.field(default=10, metadata={"help": "training epochs per model"})
    batch_size: int = dataclasses.field(default=128, metadata={"help": "global batch size (paper: 128)"})
    learning_rate: float = dataclasses.field(default=0.1, metadata={"help": "peak SGD learning rate (paper: 0.1)"})
    schedule: str = dataclasses.field(
        default="cosine",
        metadata={"help": "cosine (decay to 0) or step (/10 at 50%% and 75%% of training, as the paper)",
                  "choices": SCHEDULES},
    )
    warmup_steps: int = dataclasses.field(
        default=0, metadata={"help": "warm-up steps before the schedule: at learning_rate/10 (step), rising linearly from "
                  "learning_rate/10 (cosine) (paper: 400 for ResNet-110)"}
    )
    warmup_from_depth: int = dataclasses.field(
        default=0, metadata={"help": "apply --warmup-steps only to depths >= this (paper: 110; 0 = all)"}
    )
    momentum: float = dataclasses.field(default=0.9, metadata={"help": "SGD momentum"})
    fixup_groups: bool = dataclasses.field(
        default=False, metadata={"help": "train the fixup variant with the official Fixup code's groups: the "
                                 "classifier's bias at lr/10, coupled weight decay on every parameter "
                                 "(tracks/vision/optimizer.py); off: decay on the kernels only, as the others"}
    )
    weight_decay: float = dataclasses.field(
        default=1e-4, metadata={"help": "coupled weight decay, as an L2 penalty (paper: 1e-4)"}
    )
    gradient_clip: float = dataclasses.field(
        default=0.0, metadata={"help": "clip each step's gradient to this global norm, penalty included "
                               "(0 = off, the papers'); for nets without normalisation (docs/experiments/vision.md)"}
    )
    train_size: Optional[int] = dataclasses.field(
        default=None, metadata={"help": "train on a subset of this many images (default: all)"}
    )
    validation_size: int = dataclasses.field(
        default=0, metadata={"help": "images held out of the training set for validation (paper: 5000)"}
    )
    curve_eval_size: Optional[int] = dataclasses.field(
        default=None,
        metadata={"help": "images of the val (or test) set evaluated after every epoch for the curves (default: all)"},
    )
    lesion_images: int = dataclasses.field(
        default=1000, metadata={"help": "test images for the lesion study of each trained model"}
    )
    instrument_images: int = dataclasses.field(
        default=32, metadata={"help": "training images for the instruments at initialisation"}
    )
    landscape_steps: int = dataclasses.field(
        default=11, metadata={"help": "grid points per direction of the loss landscape drawn around each deepest "
                                        "trained net (odd; 0 = none)"}
    )
    landscape_images: int = dataclasses.field(
        default=256, metadata={"help": "training images the loss landscape is evaluated on, at every grid point"}
    )
    augment: bool = dataclasses.field(default=True, metadata={"help": "pad-4 random crop + horizontal flip"})
    seed: int = dataclasses.field(default=0, metadata={"help": "random seed (data order, init, synthetic data; "
                                                               "0..2**32-1)"})
    seeds: tuple[int, ...] = dataclasses.field(
        default=(), metadata={"help": "train every model once per seed, e.g. 0,1,2 (each seed's run in seed-N/, "
                                      "then mean +- std and findings judged against the spread; replaces --seed)"}
    )
    steps_per_execution: int = dataclasses.field(
        default=8, metadata={"help": "training steps per compiled call (fewer Python round trips; "
                                        "measured in benchmarks/NOTES.md)"}
    )

    # config.json files written before 0.3.0 have no synthetic_faintest: their synthetic set had every
    # object fully painted (tracks.common.config.config_from_dict reads them so for --resume; compare
    # reads config.json as written: it lists the field when the reference has it and the run's
    # differs or is missing).
    # Those without synthetic_distractors (0.2.0's, and this version's before issue 66) had no distractors.
    # And those without synthetic_clutter (before issue 66's screening 8) had the background of 0.2.0.
    VALUES_BEFORE_THE_FIELD: ClassVar[dict] = {"synthetic_faintest": 1.0, "synthetic_distractors": 0,
                                               "synthetic_clutter": 1.0}

    def adapted_to(self, given):
        """The preset for a run with the options `given`: a typed --train-size below the preset's batch
        (and no --batch-size) makes the batch that size, said in one line."""
        train_size = given.get("train_size")
        if train_size is not None and "batch_size" not in given and 1 <= train_size < self.batch_size:
            log(f"--batch-size: the preset's {self.batch_size} is more than --train-size {train_size}; "
                f"using {train_size}")
            return dataclasses.replace(self, batch_size=train_size)
        return self

    def __post_init__(self):
        check_seeds(self.seeds)
        if self.seeds and self.seed != self.seeds[0]:
            raise ValueError(f"--seeds {','.join(map(str, self.seeds))} replaces --seed: give one of them")
        check_depths(self.depths, MAX_DEPTH, minimum=8, rule=DEPTH_RULE)
        if not self.variants:
            raise ValueError("--variants needs at least one variant")
        for variant in self.variants:
            if variant not in VARIANTS:
                raise ValueError(f"unknown variant {variant!r}; choose from: {', '.join(VARIANTS)}")
        refuse_repeats("--depths", self.depths)
        refuse_repeats("--variants", self.variants)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose from: {', '.join(SCHEDULES)}")
        check_counts(self, ("width", "epochs", "batch_size", "steps_per_execution", "lesion_images",
                            "instrument_images", "landscape_images"))
        if self.landscape_steps != 0 and (self.landscape_steps < 3 or self.landscape_steps % 2 == 0):
            raise ValueError(f"--landscape-steps must be odd and >= 3 (the grid holds the trained weights at "
                             f"its centre), or 0 for no landscape; got {self.landscape_steps}")
        if self.curve_eval_size is not None and self.curve_eval_size < 1:
            raise ValueError(f"--curve-eval-size must be >= 1 (or left out: all), got {self.curve_eval_size}")
        if self.train_size is not None and self.train_size < 1:
            raise ValueError(f"--train-size must be >= 1 (or left out: all), got {self.train_size}")
        if self.train_size is not None and self.train_size < self.batch_size:
            raise ValueError(f"--train-size {self.train_size} is smaller than one batch ({self.batch_size})")
        check_counts(self, ("validation_size", "warmup_steps", "warmup_from_depth"), minimum=0)
        check_seed("--seed", self.seed)
        check_finite_floats(self)
        if not 0 < self.learning_rate < math.inf:
            raise ValueError(f"--learning-rate must be > 0 and finite, got {self.learning_rate}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"--momentum must be in [0, 1), got {self.momentum}")
        if not 0 <= self.weight_decay < math.inf:
            raise ValueError(f"--weight-decay must be >= 0, got {self.weight_decay}")
        if not 0 <= self.gradient_clip < math.inf:
            raise ValueError(f"--gradient-clip must be >= 0 (0 = off), got {self.gradient_clip}")
        if not 0 < self.synthetic_faintest <= 1:
            raise ValueError(f"--synthetic-faintest must be in (0, 1] (an opacity; 1: every object fully "
                             f"painted), got {self.synthetic_faintest}")
        if not 0 <= self.synthetic_distractors <= MAX_DISTRACTORS:
            raise ValueError(f"--synthetic-distractors must be in 0..{MAX_DISTRACTORS} (pieces of other classes' "
                             f"patterns in half the images; 0: none), got {self.synthetic_distractors}")
        if not 0 <= self.synthetic_clutter <= MAX_CLUTTER:
            raise ValueError(f"--synthetic-clutter must be in [0, {MAX_CLUTTER:g}] (x the background's shading and "
                             f"blobs of 0.2.0; 1: unchanged), got {self.synthetic_clutter}")


# XLA with `--xla auto` on a CPU: XLA's CPU convolutions are slower than TensorFlow's oneDNN ones
# (benchmarks/throughput.py, benchmarks/NOTES.md). On GPUs `auto` is always XLA.
CPU_XLA = False


PRESETS = {
    # Seconds: for tests and a first look. Tiny nets, synthetic-sized data.
    "smoke": VisionConfig(
        preset="smoke", depths=(8, 14), width=4, epochs=2, batch_size=32, train_size=256,
        curve_eval_size=128, learning_rate=0.05, lesion_images=100, instrument_images=8,
        landscape_steps=3, landscape_images=32,
    ),
    # The CPU default: both halves of He et al.'s Figure 6 (the deeper plain net
    # trains worse, the deeper residual net better) in under 6 minutes on 2 cores
    # (its measured time: docs/running.md). Chosen by the sweep in docs/experiments/vision.md: depths 8 and 32
    # (one and five blocks per stage), and a linear warm-up from lr/10 over the
    # first 2 epochs (92 steps) for every model, without which the deep
    # post-activation nets start slowly or die (He et al. warmed ResNet-110 up too).
    # 6,000 images, 500 lesion images and a 9 x 9 landscape (issue 53): from 8.3 minutes
    # with 12,000, 1,000 and 11 x 11 to 4.3-4.5 on CIFAR-10. 10 epochs, not 8: both halves
    # held on 9 of 9 paired seeds (6 synthetic, 3 CIFAR-10) against 8 of 9, and on 5 of 5 fresh ones.
    # Offline (issue 66, docs/experiments/vision.md, screening 8): every object fully painted, 4
    # distractors in half the images (capacity error: the residual half), and the background's
    # label-free shading and blobs doubled (plain-32 stays at chance: the plain half). Both halves
    # by the margins (residual >= 3, plain >= 10) on 6 of 6 fresh seeds; the faint set
    # of before held by them on 7 of 13.
    "quick": VisionConfig(
        preset="quick", depths=(8, 32), width=8, epochs=10, train_size=6000, curve_eval_size=1000,
        learning_rate=0.1, schedule="cosine", warmup_steps=92, lesion_images=500, landscape_steps=9,
        synthetic_faintest=1.0, synthetic_distractors=4, synthetic_clutter=2.0,
    ),
    # He et al.'s own depths, 20 and 56, on a CPU in under 30 minutes (issue 53; its measured
    # times: docs/running.md): both halves of Figure 6 on 3 of 3 seeds of CIFAR-10 and 3 of 5 of the
    # synthetic set with its faint objects (without them the 20-layer residual net reaches the
    # set's floor: docs/experiments/vision.md, issues 41 and 53). The quick recipe, longer: 20 epochs of
    # 12,000 images, warm-up over the first 2 (186 steps). Width 8, not the paper's 16,
    # and float32: the CPU budget (width 16 costs twice the time; bfloat16 is 2.4 times
    # slower than float32 at width 8 on this kind of CPU, benchmarks/NOTES.md).
    "class": VisionConfig(
        preset="class", depths=(20, 56), width=8, epochs=20, train_size=12000, curve_eval_size=1000,
        learning_rate=0.1, schedule="cosine", warmup_steps=186, lesion_images=500, landscape_steps=9,
    ),
    # The course's deepest claim, trained: which depth-56 nets train without
    # BatchNorm (docs/experiments/vision.md, issues 25 and 41). He-initialised plain and
    # residual stacks next to Fixup and the zero-initialised pre-activation
    # net, BatchNorm's residual net as the reference; within the 15-minute CPU budget (docs/running.md).
    # Every variant: lr 0.1 at batch 64 with 156 warm-up steps and cosine decay, and each
    # step's gradient clipped to a global norm of 1 (issue 41: every failure traced began
    # with one step of norm 4-35 against 0.1-0.3; clipped, Fixup-56 and the zero-initialised
    # pre-activation net trained on 5 of 5 synthetic seeds, from 1 of 5 each). Fixup with the
    # official code's parameter groups (tracks/vision/optimizer.py). Not the papers' 0.1 at
    # batch 128, step schedule, no warm-up: measured there, those left the identity-initialised
    # nets at 1 of 5 and stalled the BatchNorm reference (89.3% against 23.5%) in 624 steps.
    # Width 8, 5,000 images, 8 epochs: the CPU budget. Offline, every object fully painted:
    # the synthetic set its seeds were measured on (issue 41; the faint objects came later).
    "nonorm": VisionConfig(
        preset="nonorm", depths=(56,), width=8, epochs=8, batch_size=64, train_size=5000,
        curve_eval_size=500, learning_rate=0.1, schedule="cosine", warmup_steps=156,
        variants=("plain-nonorm", "residual-nonorm", "fixup", "preact-zero-nonorm", "residual"),
        lesion_images=100, landscape_steps=0, fixup_groups=True, gradient_clip=1.0,
        synthetic_faintest=1.0,
    ),
    # The GPU default: Figure 6's ordering for 20/56/110 (its time on a GPU is an estimate: docs/running.md).
    "fast": VisionConfig(
        preset="fast", depths=(20, 56, 110), epochs=30, learning_rate=0.1, schedule="cosine",
        warmup_steps=400, warmup_from_depth=110,
    ),
    # The default of `diagnose`: the course's mechanism without normalisation, at
    # initialisation. A plain stack's gain moves exponentially with depth, an
    # unnormalised residual stream grows, branches that start at 0 keep exactly 1.
    "mechanism": VisionConfig(
        preset="mechanism", depths=(20, 56, 110),
        variants=("plain-nonorm", "residual-nonorm", "fixup", "preact-zero-nonorm"),
    ),
    # He et al. 2015 exactly: 64k iterations (182 epochs of 45k), /10 at 50% and 75%.
    "paper": VisionConfig(
        preset="paper", depths=(20, 32, 44, 56, 110), epochs=182, validation_size=5000,
        schedule="step", warmup_steps=400, warmup_from_depth=110,
    ),
}
