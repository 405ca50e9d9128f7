"""The language track's configuration and its presets.

nanoGPT's shakespeare_char recipe (Karpathy): AdamW, lr 1e-3 with cosine decay
to 1e-4, beta2 0.99, weight decay 0.1, gradient clipping at 1.0; the CPU "baby
GPT" is 4 layers x 4 heads x 128 wide, block 64, batch 12, 2000 iterations
(val loss about 1.88); the GPU model 6 x 6 x 384, block 256, batch 64,
dropout 0.2, 5000 iterations (val loss 1.4697).
"""

import dataclasses
import math
from typing import Optional

from tracks.common.option_ranges import (check_counts, check_depths, check_finite_floats, check_seed, check_seeds,
                                  min_head_dim)
from tracks.common.config import RuntimeOptions, refuse_repeats

MAX_DEPTH = 96  # Transformer blocks: GPT-3's deepest model has 96
# Each character is one forward pass of the model; a sample longer than a short book is a typo, not a wish.
MAX_SAMPLE_CHARS = 100_000
FLOAT32_MAX = 3.4028234663852886e38  # numpy.finfo("float32").max, without NumPy

VARIANTS = ("pre", "post", "plain", "rezero")
VARIANT_HELP = (
    "pre: Pre-LN residual x + F(LN(x)); post: Post-LN residual LN(x + F(x)); "
    "plain: Pre-LN without the residual additions; rezero: x + alpha*F(x), alpha=0 at init, no LayerNorm"
)


@dataclasses.dataclass(frozen=True)
class LanguageConfig(RuntimeOptions):
    """Everything that defines a language run (written to config.json)."""

    preset: str = dataclasses.field(default="quick", metadata={"cli": False})
    data: str = dataclasses.field(
        default="auto",
        metadata={"help": "auto | tiny_shakespeare | pydoc | text:PATH (default: auto = "
                  "tiny_shakespeare when available, else pydoc with a warning)"},
    )
    data_dir: Optional[str] = dataclasses.field(
        default=None, metadata={"help": "TFDS data directory (default: $TFDS_DATA_DIR or ~/tensorflow_datasets)"}
    )
    depths: tuple[int, ...] = dataclasses.field(default=(2, 6), metadata={"help": f"numbers of Transformer blocks, e.g. 2,6,12 (1..{MAX_DEPTH})"})
    variants: tuple[str, ...] = dataclasses.field(
        default=VARIANTS, metadata={"help": f"comma-separated; {VARIANT_HELP}"}
    )
    warmup_steps: tuple[int, ...] = dataclasses.field(
        default=(0,), metadata={"help": "learning-rate warmup lengths to compare, e.g. 0,100 (0 = no warmup)"}
    )
    warmup_variants: Optional[tuple[str, ...]] = dataclasses.field(
        default=None,
        metadata={"help": "variants trained once per --warmup-steps length (default: all); the others "
                  "train once, with the longest (e.g. pre,post: the plain twin fails either way)"},
    )
    embed_dim: int = dataclasses.field(default=128, metadata={"help": "width of the residual stream"})
    num_heads: int = dataclasses.field(default=4, metadata={"help": "attention heads (must divide --embed-dim into "
                                                                    f"heads of at least {min_head_dim()} features)"})
    sequence_length: int = dataclasses.field(default=64, metadata={"help": "context length in characters"})
    batch_size: int = dataclasses.field(default=12, metadata={"help": "global batch size (sequences)"})
    steps: int = dataclasses.field(default=2000, metadata={"help": "training steps per model"})
    eval_interval: int = dataclasses.field(default=250, metadata={"help": "steps between validation evaluations"})
    eval_batches: Optional[int] = dataclasses.field(
        default=None, metadata={"help": "validation batches per intermediate evaluation (default: all; the final one uses all)"}
    )
    learning_rate: float = dataclasses.field(default=1e-3, metadata={"help": "peak AdamW learning rate"})
    min_learning_rate: float = dataclasses.field(default=1e-4, metadata={"help": "end of the cosine decay"})
    weight_decay: float = dataclasses.field(default=0.1, metadata={"help": "AdamW (decoupled) weight decay"})
    beta2: float = dataclasses.field(default=0.99, metadata={"help": "AdamW beta2"})
    grad_clip: float = dataclasses.field(default=1.0, metadata={"help": "global gradient-norm clipping (0 = off)"})
    dropout: float = dataclasses.field(default=0.0, metadata={"help": "dropout rate"})
    layer_norm_epsilon: float = dataclasses.field(
        default=1e-5, metadata={"help": "epsilon of every LayerNorm (a stream far below sqrt(eps) is no longer rescaled)"}
    )
    init: str = dataclasses.field(
        default="gpt2",
        metadata={"help": "gpt2: N(0, 0.02), stream-writing projections /sqrt(2L) (nanoGPT); "
                  "xavier: Glorot kernels, N(0, 1) embeddings (Vaswani et al., Xiong et al.)",
                  "choices": ("gpt2", "xavier")},
    )
    seed: int = dataclasses.field(default=0, metadata={"help": "random seed (init, batches, sampling; 0..2**32-1)"})
    seeds: tuple[int, ...] = dataclasses.field(
        default=(), metadata={"help": "train every model once per seed, e.g. 0,1,2 (each seed's run in seed-N/, "
                                      "then mean +- std and findings judged against the spread; replaces --seed)"}
    )
    instrument_sequences: int = dataclasses.field(
        default=8, metadata={"help": "validation windows for the instruments (at init and after training)"}
    )
    lesion_sequences: int = dataclasses.field(
        default=64, metadata={"help": "validation windows for the lesion studies and the logit lens of each trained model"}
    )
    prompt: str = dataclasses.field(default="\n", metadata={"help": "prompt for the generated samples"})
    sample_chars: int = dataclasses.field(default=300,
                                          metadata={"help": "characters generated per model (at most 100,000)"})
    steps_per_execution: int = dataclasses.field(
        default=10, metadata={"help": "training steps per compiled call (fewer Python round trips; "
                                        "measured in benchmarks/NOTES.md)"}
    )

    def adapted_to(self, given):
        """The preset for a run with the options `given`: its warm-up comparison kept to the variants chosen.

        A preset that compares warm-up for some variants (quick: pre, post)
        run with other `--variants` (and no `--warmup-variants`) compares it
        for those of them it names, or for every variant when it names none.
        """
        if "variants" in given and "warmup_variants" not in given and self.warmup_variants is not None:
            kept = tuple(variant for variant in self.warmup_variants if variant in given["variants"])
            return dataclasses.replace(self, variants=given["variants"], warmup_variants=kept or None)
        return self

    def __post_init__(self):
        check_seeds(self.seeds)
        if self.seeds and self.seed != self.seeds[0]:
            raise ValueError(f"--seeds {','.join(map(str, self.seeds))} replaces --seed: give one of them")
        check_depths(self.depths, MAX_DEPTH)
        if not self.variants:
            raise ValueError("--variants needs at least one variant")
        for variant in self.variants:
            if variant not in VARIANTS:
                raise ValueError(f"unknown variant {variant!r}; choose from: {', '.join(VARIANTS)}")
        if not self.warmup_steps or min(self.warmup_steps) < 0:
            raise ValueError(f"--warmup-steps must be >= 0, got {self.warmup_steps}")
        refuse_repeats("--depths", self.depths)
        refuse_repeats("--variants", self.variants)
        refuse_repeats("--warmup-steps", self.warmup_steps)
        if self.warmup_variants is not None:
            refuse_repeats("--warmup-variants", self.warmup_variants)
            unknown = [v for v in self.warmup_variants if v not in self.variants]
            if unknown or not self.warmup_variants:
                raise ValueError(f"--warmup-variants must name some of --variants ({', '.join(self.variants)}), "
                                 f"got {','.join(self.warmup_variants) or 'nothing'}")
        check_counts(self, ("embed_dim", "num_heads", "sequence_length", "batch_size", "steps", "eval_interval",
                            "steps_per_execution", "instrument_sequences", "lesion_sequences", "sample_chars"))
        if self.sequence_length < 2:
            raise ValueError(f"--sequence-length must be >= 2: with one character attention has nothing to choose "
                             f"between (its softmax is 1), got {self.sequence_length}")
        check_finite_floats(self)
        if self.sample_chars > MAX_SAMPLE_CHARS:
            raise ValueError(f"--sample-chars must be at most {MAX_SAMPLE_CHARS:,}, got {self.sample_chars:,}")
        if self.eval_batches is not None and self.eval_batches < 1:
            raise ValueError(f"--eval-batches must be >= 1 (or left out: all), got {self.eval_batches}")
        check_seed("--seed", self.seed)
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"--embed-dim {self.embed_dim} is not divisible by --num-heads {self.num_heads}"
            )
        if self.embed_dim // self.num_heads < min_head_dim():
            raise ValueError(f"--embed-dim {self.embed_dim} / --num-heads {self.num_heads} gives heads of "
                             f"{self.embed_dim // self.num_heads} features; the library needs at least "
                             f"{min_head_dim()} (fewer heads, or a wider --embed-dim)")
        if self.steps % self.eval_interval:
            raise ValueError(
                f"--steps {self.steps} must be a multiple of --eval-interval {self.eval_interval}"
            )
        if max(self.warmup_steps) >= self.steps:
            raise ValueError(f"--warmup-steps {max(self.warmup_steps)} must be < --steps {self.steps}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"--dropout must be in [0, 1), got {self.dropout}")
        if not 0 < self.learning_rate < math.inf or not 0 <= self.min_learning_rate <= self.learning_rate:
            raise ValueError("need --learning-rate > 0 and 0 <= --min-learning-rate <= --learning-rate")
        if not 0 <= self.beta2 < 1:
            raise ValueError(f"--beta2 must be in [0, 1), got {self.beta2}")
        if not 0 <= self.weight_decay < math.inf:
            raise ValueError(f"--weight-decay must be >= 0, got {self.weight_decay}")
        if not 0 <= self.grad_clip < math.inf:
            raise ValueError(f"--grad-clip must be >= 0 (0 = off), got {self.grad_clip}")
        if not self.prompt:
            raise ValueError("--prompt must not be empty")
        if not 0 < self.layer_norm_epsilon <= FLOAT32_MAX:  # a larger one is inf in float32: every output 0
            raise ValueError(f"--layer-norm-epsilon must be > 0 and at most {FLOAT32_MAX:.8g} (the largest "
                             f"float32), got {self.layer_norm_epsilon}")


# XLA with `--xla auto` on a CPU: XLA fuses the GPT's many small element-wise ops
# (benchmarks/throughput.py, benchmarks/NOTES.md). On GPUs `auto` is always XLA.
CPU_XLA = True


PRESETS = {
    "smoke": LanguageConfig(
        preset="smoke", depths=(1, 2), embed_dim=32, num_heads=2, sequence_length=32,
        batch_size=8, steps=40, eval_interval=20, eval_batches=4, sample_chars=60,
    ),
    # The CPU default: both halves of the lesson within the 15-minute budget on 2 cores
    # (docs/experiments/language.md, rows L01-L05). nanoGPT's baby GPT shape
    # (128 wide, 4 heads, context 64, batch 12) at 6 layers, with the original
    # Transformer's (Xavier) initialisation and a peak lr of 2e-3: the plain
    # twin stays at the unigram loss, Post-LN without warm-up never leaves it,
    # Pre-LN trains the same with or without 100 warm-up steps. The plain twin
    # trains once, with warm-up (stuck at the unigram loss either way: row L05).
    "quick": LanguageConfig(
        preset="quick", depths=(6,), variants=("pre", "post", "plain"), warmup_steps=(0, 100),
        warmup_variants=("pre", "post"),
        init="xavier", learning_rate=2e-3, min_learning_rate=2e-4, steps=1500, eval_interval=250,
        eval_batches=50,
    ),
    # The GPU default: nanoGPT's shakespeare_char model.
    "fast": LanguageConfig(
        preset="fast", depths=(6, 12), embed_dim=384, num_heads=6, sequence_length=256,
        batch_size=64, steps=5000, eval_interval=500, eval_batches=20, dropout=0.2,
        warmup_steps=(100,),
    ),
}
