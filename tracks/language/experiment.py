"""One language experiment: build, compile, train, evaluate and sample a grid point.

A grid point is (variant, depth, warmup). Every model sees the same batches in
the same order and the same AdamW recipe; only the block wiring differs.
"""

import dataclasses
import math
import time

import keras

from residual_keras import count_trainable_params, diagnostics, generate, transformer_lm
from tracks.common.instruments import dynamics_summary, jsonable
from tracks.common.training import fit_with_backup, throughput
from tracks.common.xla import xla_step_ran
from tracks.language.results import LanguageModel, LanguageResults

# transformer_lm arguments of each variant (see presets.VARIANTS).
VARIANT_KWARGS = {
    "pre": {"norm_position": "pre", "residual": True},
    "post": {"norm_position": "post", "residual": True},
    "plain": {"norm_position": "pre", "residual": False},
    "rezero": {"rezero": True},
}


@dataclasses.dataclass(frozen=True)
class LanguageSpec:
    variant: str
    depth: int
    warmup: int

    @property
    def id(self):
        return f"{self.variant}-{self.depth}-warmup{self.warmup}"

    @property
    def plain(self):
        """No block adds its input back (the instruments' c^l line)."""
        return self.variant == "plain"

    @property
    def cost(self):
        """The training time relative to the grid's other models: the embedding and head cost about two blocks."""
        return self.depth + 2


def grid(config):
    """Every (variant, depth, warm-up) trained: each --warmup-steps length for the
    --warmup-variants (all by default), the longest for the others."""
    compared = config.variants if config.warmup_variants is None else config.warmup_variants
    return [
        LanguageSpec(variant, depth, warmup)
        for depth in sorted(config.depths)
        for warmup in config.warmup_steps
        for variant in config.variants
        if variant in compared or warmup == max(config.warmup_steps)
    ]


def build_model(spec, ctx):
    """The (uncompiled) character Transformer of one grid point, for the run's vocabulary."""
    config = ctx.config
    return transformer_lm(
        ctx.data.vocab.size, config.sequence_length, spec.depth,
        embed_dim=config.embed_dim, num_heads=config.num_heads, dropout=config.dropout,
        init=config.init, layer_norm_epsilon=config.layer_norm_epsilon, name=spec.id.replace("-", "_"), **VARIANT_KWARGS[spec.variant],
    )


def learning_rate_schedule(config, warmup):
    """Linear warmup (if any) to the peak, then cosine decay to min_learning_rate."""
    lr = config.learning_rate
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup else lr,
        warmup_target=lr if warmup else None,
        warmup_steps=warmup,
        decay_steps=config.steps - warmup,
        alpha=config.min_learning_rate / lr,
    )


def compile_model(model, config, spec, runtime):
    optimizer = keras.optimizers.AdamW(
        learning_rate=learning_rate_schedule(config, spec.warmup),
        weight_decay=config.weight_decay, beta_1=0.9, beta_2=config.beta2,
        global_clipnorm=config.grad_clip or None,
    )
    # As nanoGPT: decay matrices and embeddings, not biases, norms or scalars.
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta", "alpha"])
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=runtime.xla,
        steps_per_execution=runtime.steps_per_execution(config.steps_per_execution),
    )


def validation_windows(config, data, count):
    """(x, y): `count` fixed validation windows, evenly spaced, and their next characters."""
    import numpy as np

    length = config.sequence_length
    starts = np.linspace(0, len(data.val_tokens) - length - 1, count).astype(int)
    windows = np.stack([data.val_tokens[start:start + length + 1] for start in starts])
    return windows[:, :-1], windows[:, 1:]


def instrument_batch(ctx):
    """(x, y): the fixed batch of validation windows the instruments use."""
    return validation_windows(ctx.config, ctx.data, ctx.config.instrument_sequences)


# Sets of blocks removed at random per k in the k-block lesion.
DELETION_DRAWS = 5


def trained_instruments(model, ctx):
    """The instruments on a trained model (results.json entries, plain numbers).

    - stream: what each sublayer writes, relative to the stream;
    - decomposition: x_L against x_0 + every sublayer's output (exact for Pre-LN);
    - logit_lens: the validation loss of the stream read out at every depth;
    - lesion, sublayers, deletion: the validation loss with one block, one
      sublayer, or k random blocks removed (Veit et al. 2016), on
      `lesion_sequences` validation windows.
    """
    config, data = ctx.config, ctx.data
    x, y = instrument_batch(ctx)
    lesion_x, lesion_y = validation_windows(config, data, config.lesion_sequences)
    lesion_data = (lesion_x, lesion_y)
    return jsonable({
        "stream": diagnostics.stream_contributions(model, x),
        "decomposition": diagnostics.stream_decomposition(model, x),
        "logit_lens": diagnostics.logit_lens(model, lesion_x, lesion_y),
        "lesion": diagnostics.lesion(model, lesion_data, metric="crossentropy", batch_size=64),
        "sublayers": diagnostics.lesion_sublayers(model, lesion_data, metric="crossentropy", batch_size=64),
        "deletion": diagnostics.delete_blocks(model, lesion_data, metric="crossentropy", batch_size=64,
                                              draws=DELETION_DRAWS, seed=config.seed),
    })


def unigram_loss(data):
    """Validation loss of predicting every character by its training frequency (nats/char)."""
    import numpy as np

    counts = np.bincount(data.train_tokens, minlength=data.vocab.size).astype("float64") + 1.0
    probabilities = counts / counts.sum()
    return float(-np.mean(np.log(probabilities[data.val_tokens])))


def bits_per_char(loss):
    return None if loss is None else loss / math.log(2)


def train_one(spec, ctx):
    """Trains one grid point; its `LanguageModel` (with its sample)."""
    from tracks.language.pipeline import make_lm_datasets, training_windows

    config, data, runtime, run, log = ctx.config, ctx.data, ctx.runtime, ctx.run, ctx.log
    ctx.shared("vocabulary", lambda: data.vocab.save(run.path / "vocab.json"))  # `sample` reads it

    _, val_ds = make_lm_datasets(data, config.sequence_length, config.batch_size, seed=config.seed)

    def epoch_data(epoch):  # the steps of evaluation interval `epoch`: batch k depends on (seed, k) only
        return training_windows(data, config.sequence_length, config.batch_size, seed=config.seed,
                                first_step=epoch * config.eval_interval, steps=config.eval_interval)

    curve_ds = val_ds.take(config.eval_batches) if config.eval_batches else val_ds
    with runtime.strategy.scope():
        model = build_model(spec, ctx)
        compile_model(model, config, spec, runtime)
    params = count_trainable_params(model)
    log(f"{spec.id}: {params:,} trainable parameters, {config.steps} steps")
    x, y = instrument_batch(ctx)
    dynamics = diagnostics.TrainingDynamics(x, y, path=run.path / "dynamics" / f"{spec.id}.csv")
    start = time.perf_counter()
    outcome = fit_with_backup(
        model, epoch_data, run=run, model_id=spec.id,
        epochs=config.steps // config.eval_interval, curve_data=curve_ds, curve_name="val",
        extra_callbacks=[dynamics], log=log,
    )
    history = outcome["history"]
    diverged = outcome["diverged_epoch"]
    tokens_per_step = config.batch_size * config.sequence_length
    result = LanguageModel(
        id=spec.id, variant=spec.variant, depth=spec.depth, warmup=spec.warmup, params=params,
        steps_trained=len(history) * config.eval_interval,
        diverged=diverged is not None,
        diverged_step=None if diverged is None else (diverged + 1) * config.eval_interval,
        diverged_at=None if diverged is None else f"step {(diverged + 1) * config.eval_interval}",
        xla=xla_step_ran(model) if runtime.xla else False,
        tokens_per_second=throughput(history, config.eval_interval * tokens_per_step),
        dynamics_seconds=dynamics.seconds,
        dynamics=dynamics_summary(dynamics.read_csv(dynamics.path)),
        fit_seconds=outcome["seconds"],
    )
    if diverged is None and history:
        result.train_loss = history[-1]["loss"]
        result.val_loss = float(model.evaluate(val_ds, verbose=0))
        result.train_bpc = bits_per_char(result.train_loss)
        result.val_bpc = bits_per_char(result.val_loss)
        prompt = data.vocab.encode(config.prompt)
        ids = generate(model, prompt, config.sample_chars, temperature=0.8, top_k=None, seed=config.seed)
        result.sample = data.vocab.decode(ids[len(prompt):])
        result = dataclasses.replace(result, **trained_instruments(model, ctx))  # a study without a field: TypeError
        best = LanguageResults.from_json(run.read_results()).best_model
        if best is None or result.val_loss < best["val_loss"]:
            run.save_model(model, "best_model.keras")
            run.update_results(best_model={"id": spec.id, "val_loss": result.val_loss})
    result.seconds = time.perf_counter() - start
    return result
