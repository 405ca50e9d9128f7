"""What a person at the terminal sees: progress lines, one-line errors, times.

A leaf module: it imports nothing of the package, so every other module of
tracks/common may use it without an import cycle.
"""

import sys


def log(message):
    """Progress for the person at the terminal (the library itself never prints)."""
    print(message, flush=True)


def fail(message):
    """A one-line error for bad input, exit code 2 (as argparse does)."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


def warn(message):
    """A line on stderr that is not an error (an interruption, what was kept)."""
    print(message, file=sys.stderr, flush=True)


def format_minutes(seconds):
    """'45 s' under a minute and a half, else '3.2 min'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def announce(run, config, runtime, specs, estimated_seconds, data_line):
    """What a person sees before training starts: data, device, grid, estimate.

    (The data modules print a data-fallback banner themselves when they fall back.)
    """
    log(f"run directory: {run.path}")
    log(f"data: {data_line}")
    log(f"device: {runtime.device}, precision {runtime.precision}, XLA {'on' if runtime.xla else 'off'}, "
        f"strategy {runtime.strategy_name}")
    estimate = "" if estimated_seconds is None else f"; estimated time {format_minutes(estimated_seconds)}"
    log(f"preset {config.preset}: {len(specs)} models ({', '.join(spec.id for spec in specs)}){estimate}")


__all__ = ["announce", "fail", "format_minutes", "log", "warn"]
