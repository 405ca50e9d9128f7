"""What both tracks' command lines share: options, errors, logging, time estimates."""

import argparse
import sys

from tracks.common.config import ConfigError, add_config_options, config_from_args
from tracks.common.run_dir import RunDirectory


def log(message):
    """Progress for the person at the terminal (the library itself never prints)."""
    print(message, flush=True)


def fail(message):
    """A one-line error for bad input, exit code 2 (as argparse does)."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


def train_parser(prog, description, config_cls, presets, default_preset, epilog=None):
    parser = argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset", default=default_preset,
        help=f"starting values for every option ({', '.join(presets)}; default: {default_preset}); "
             "options given on the command line override them",
    )
    parser.add_argument("--out", default=None, help="run directory to create (default: runs/<track>-<timestamp>)")
    parser.add_argument(
        "--resume", default=None, metavar="RUN_DIR",
        help="continue an interrupted run: finished models are skipped, the one in training "
             "resumes from its last epoch; the run's own config.json is used",
    )
    add_config_options(parser, config_cls)
    return parser


def prefetch_command(prog, dataset, argv):
    """`python -m tracks.X prefetch [--data-dir DIR]`: download and prepare the track's dataset."""
    from tracks.common.tfds_source import prefetch

    parser = argparse.ArgumentParser(
        prog=f"{prog} prefetch",
        description=f"Download and prepare {dataset} into the TFDS data directory, so that later "
                    "runs (and Docker images built with PREFETCH_DATA=1) work offline.",
    )
    parser.add_argument("--data-dir", default=None,
                        help="TFDS data directory (default: $TFDS_DATA_DIR or ~/tensorflow_datasets)")
    args = parser.parse_args(argv)
    return prefetch(dataset, args.data_dir, log=log)


def resolve_config(args, track, config_cls, presets):
    """(config, run or None): a resumed run's own config, or the preset plus options."""
    if args.resume:
        run, config = RunDirectory.resume(track, args.resume, config_cls)
        return config, run
    return config_from_args(args, presets, config_cls), None


def announce(run, config, runtime, specs, estimated_seconds, data_line):
    """What a person sees before training starts: data, device, grid, estimate.

    (The data modules print a data-fallback banner themselves when they fall back.)
    """
    log(f"run directory: {run.path}")
    log(f"data: {data_line}")
    log(f"device: {runtime.device}, precision {runtime.precision}, XLA {'on' if runtime.xla else 'off'}, "
        f"strategy {runtime.strategy_name}")
    log(f"preset {config.preset}: {len(specs)} models ({', '.join(spec.id for spec in specs)}); "
        f"estimated time {format_minutes(estimated_seconds)}")


def diagnose_command(prog, track, config_cls, presets, default_preset, argv, *,
                     load_data, initial_instruments, title, instrument_batch=None, banner_of=None):
    """`python -m tracks.X diagnose`: the grid's instruments at initialisation, no training.

    With `--model PATH.keras`: the same instruments on saved models (diagnose_model.py).

    Args:
        load_data: callable(config) -> the track's data (raises ValueError on bad input).
        initial_instruments: callable(config, data, out_dir) -> summary dict.
        title: the heading of the run's summary.md.
        instrument_batch, banner_of: callable(config, data) -> (x, y) and
            callable(data) -> plot banner, for `--model`.
    """
    from tracks.common import diagnose_model, instruments
    from tracks.common.runtime import setup_runtime

    if diagnose_model.wants_saved_models(argv):
        return diagnose_model.diagnose_saved_models(
            prog, track, config_cls, presets, default_preset, argv, load_data=load_data,
            instrument_batch=instrument_batch, banner_of=banner_of or (lambda data: None))

    parser = train_parser(f"{prog} diagnose", "Measure gradient flow, activation growth and the "
                          "stream's Jacobian of every grid model at initialisation (no training).",
                          config_cls, presets, default_preset)
    args = parser.parse_args(argv)
    if args.resume:
        return fail("diagnose does not resume: it trains nothing")
    try:
        config, _ = resolve_config(args, track, config_cls, presets)
        data = load_data(config)
        run = RunDirectory.create(f"{track}-diagnose", config, out=args.out)
    except (ConfigError, ValueError) as error:
        return fail(str(error))
    setup_runtime("fp32", "off", "none", seed=config.seed)
    summary = initial_instruments(config, data, run.path)
    run.update_results(track=f"{track}-diagnose", dataset=data.name, banner=data.banner,
                       initialisation=summary)
    instruments.write_diagnose_summary(run, title, summary, data.banner)
    log(f"done: {run.path / 'summary.md'}")
    return 0


def format_minutes(seconds):
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


__all__ = ["ConfigError", "announce", "diagnose_command", "fail", "prefetch_command", "format_minutes", "log", "resolve_config", "train_parser"]
