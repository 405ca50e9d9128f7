"""What a toy run settles before it trains: its points, the instruments' sample, its cost."""

from tracks.common.limits import Estimate

SOURCES = ("spirals",)


def parse_source(text):
    """`--data`: the toy track has one data set, the two spirals."""
    if text not in SOURCES:
        raise ValueError(f"unknown data source {text!r}; accepted: {', '.join(SOURCES)}")
    return text


# The estimate of a run before it starts (`resources`), for the refusal of a run longer than a day on a CPU:
# a time per layer and step, plus each layer's 6 x batch x width^2 floating-point operations at CPU_FLOPS.
# The figures' sources: docs/maintainers.md, "Timings the code assumes".
SECONDS_PER_LAYER_STEP = 7.6 / (20 * 200)
CPU_FLOPS = 100e9


def load_data(ctx):
    from tracks.toy import data as spirals

    return spirals.load(ctx.config)


def sample_limits(ctx):
    return [("instrument_points", len(ctx.data.y_train), "training points")]


def resources(config, data=None, accelerator=False):
    """The run's memory and CPU time from its config (the points are drawn from it: the data change nothing)."""
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
