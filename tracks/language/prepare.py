"""What a language run settles before it trains: its text, the options checked against it, its cost.

Imported before TensorFlow (the refusal of a run too large for the machine
comes first); the data module loads when `load_data` is called.
"""

from tracks.common.limits import Estimate
from tracks.language.sample import check_prompt

# The rate of the 4 x 128 baby GPT, tokens/s, behind the estimate printed before training;
# other models scale with depth x width^2. The figures' sources: docs/maintainers.md, "Timings the code assumes".
REFERENCE_TOKENS_PER_SECOND = {"cpu": 20000.0, "gpu": 400000.0}


def load_data(ctx):
    from tracks.language.data import load_text_data

    config = ctx.config
    return load_text_data(config.data, data_dir=config.data_dir, log=ctx.log, sequence_length=config.sequence_length)


def fit_defaults(ctx, given):
    """The preset's prompt, when the text lacks one of its characters ('\\n' in a text without newlines):
    the text's first character instead, said in one line. A prompt you typed is checked, not changed."""
    config, data = ctx.config, ctx.data
    if "prompt" in given or not data.vocab.unknown_characters(config.prompt):
        return {}
    first = data.vocab.decode([int(data.train_tokens[0])])
    ctx.log(f"--prompt: the preset's {config.prompt!r} has characters {data.name} does not have; using "
            f"{first!r}, its first character (give --prompt to choose)")
    return {"prompt": first}


def check(ctx):
    config, data = ctx.config, ctx.data
    check_prompt(data.vocab, config.prompt)
    windows = len(data.val_tokens) - config.sequence_length
    if windows < 1:
        raise ValueError(f"--sequence-length {config.sequence_length} is longer than the "
                         f"{len(data.val_tokens)} validation characters of {data.name}; lower it")
    if len(data.train_tokens) <= config.sequence_length:
        raise ValueError(f"--sequence-length {config.sequence_length} is longer than the "
                         f"{len(data.train_tokens)} training characters of {data.name}; lower it")


def sample_limits(ctx):
    config, data = ctx.config, ctx.data
    windows = len(data.val_tokens) - config.sequence_length
    where = f"validation windows of {config.sequence_length} characters in {data.name}"
    return [("lesion_sequences", windows, where), ("instrument_sequences", windows, where)]


def run_fields(ctx):
    from tracks.language.experiment import unigram_loss

    data = ctx.data
    return {"vocab_size": data.vocab.size, "unknown_val_chars": data.unknown_val_chars,
            "unigram_loss": unigram_loss(data)}


def _seconds(config, depths, accelerator):
    rate = REFERENCE_TOKENS_PER_SECOND["gpu" if accelerator else "cpu"]
    tokens = config.steps * config.batch_size * config.sequence_length
    cost = sum((depth / 4) * (config.embed_dim / 128) ** 2 for depth in depths)
    return tokens * cost / rate * 1.15 + 60  # evaluation, samples; instruments at init


def resources(config, data=None, accelerator=False):
    """The run's memory and time from its config (the texts are a few MB: the data change neither)."""
    compared = config.variants if config.warmup_variants is None else config.warmup_variants
    per_depth = sum(1 for warmup in config.warmup_steps for variant in config.variants
                    if variant in compared or warmup == max(config.warmup_steps))
    depth, width, length = max(config.depths), config.embed_dim, config.sequence_length
    # A block: 12 width^2 weights (attention 4, MLP 8); it keeps about 16 floats a token and width
    # (LayerNorms, q, k, v, MLP) and heads x length attention scores a token for the backward pass.
    weights = depth * 12 * width**2 + (256 + length) * width
    activations = depth * length * (16 * width + 2 * config.num_heads * length)
    return Estimate(
        data_bytes=0,  # the texts are a few MB
        model_bytes=4 * (4 * weights + config.batch_size * activations),  # + gradients, AdamW's 2 slots
        cpu_seconds=_seconds(config, [d for d in config.depths for _ in range(per_depth)], accelerator)
        * max(1, len(config.seeds)),
    )
