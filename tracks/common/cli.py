"""What both tracks' command lines share: options, errors, logging, time estimates.

How a training command treats its run directory:

1. `start_or_resume` does everything that can fail on bad input first (the
   options, the strategy's requirements, loading the data, the resumed run's
   config and data fingerprint) and only then creates or locks the run.
2. `train_command` trains while holding the run's lock. Ctrl-C is one line
   saying how to resume (exit 130); a damaged or unwritable file is one line
   naming it (exit 2); nothing is ever a traceback for the user.
"""

import argparse
import dataclasses
import os
import sys

from tracks.common.config import ConfigError, add_config_options, config_from_args, given_options, option_name
from tracks.common.run_dir import RunDirectory, describe_os_error

# Options that say how or where a run computes, not what it computes: given
# with --resume they apply (another machine, another number of GPUs). Every
# other option comes from the run's config.json.
APPLIED_ON_RESUME = ("data_dir", "xla", "strategy", "steps_per_execution")


def log(message):
    """Progress for the person at the terminal (the library itself never prints)."""
    print(message, flush=True)


def fail(message):
    """A one-line error for bad input, exit code 2 (as argparse does)."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


class _PresetParser(argparse.ArgumentParser):
    """An ArgumentParser whose --help gives every config option's value in the chosen preset.

    The options default to None (so that "not given" is visible to
    `config_from_args`); their effective defaults come from the preset named
    by `--preset` on the same command line (or the track's default preset),
    so the help is completed just before parsing.
    """

    def setup_preset_help(self, config_cls, presets):
        self._presets = presets
        fields = {field.name for field in dataclasses.fields(config_cls) if field.metadata.get("cli") is not False}
        self._config_actions = [action for action in self._actions if action.dest in fields]
        self._base_help = {action.dest: action.help or "" for action in self._config_actions}

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        preset = _preset_named_in(argv) or self.get_default("default_preset")
        if preset in getattr(self, "_presets", {}):
            config = self._presets[preset]
            for action in self._config_actions:
                value = _shown(getattr(config, action.dest)).replace("%", "%%")
                action.help = f"{self._base_help[action.dest]} [{preset}: {value}]".strip()
        return super().parse_known_args(argv, namespace)


def _preset_named_in(argv):
    """The value of --preset in `argv`, or None."""
    for index, item in enumerate(argv):
        if item == "--preset" and index + 1 < len(argv):
            return argv[index + 1]
        if item.startswith("--preset="):
            return item.split("=", 1)[1]
    return None


def _shown(value):
    """A config value as it would be typed on the command line."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def train_parser(prog, description, config_cls, presets, default_preset, epilog=None):
    parser = _PresetParser(
        prog=prog, description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset", default=None,
        help=f"starting values for every option ({', '.join(presets)}; default: {default_preset}); "
             "options given on the command line override them",
    )
    parser.set_defaults(default_preset=default_preset)
    parser.add_argument("--version", action="version", version=version_line())
    parser.add_argument("--out", default=None, help="run directory to create (default: runs/<track>-<timestamp>)")
    parser.add_argument(
        "--resume", default=None, metavar="RUN_DIR",
        help="continue an interrupted run: finished models are skipped, the one in training "
             "resumes from its last epoch; the run's own config.json is used (of the other "
             f"options only {', '.join(option_name(name) for name in APPLIED_ON_RESUME)} may be given)",
    )
    add_config_options(parser, config_cls)
    parser.setup_preset_help(config_cls, presets)
    return parser


def version_line():
    """'residual-keras 0.1.0 (keras 3.15.1, tensorflow 2.21.0)' for --version."""
    import keras
    import tensorflow as tf

    from residual_keras import __version__

    return f"residual-keras {__version__} (keras {keras.__version__}, tensorflow {tf.__version__})"


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
    """(config, run or None, recorded data fingerprint or None).

    A new run: the preset plus the options given. `--resume RUN`: RUN's own
    config (RUN is locked), with the options of `APPLIED_ON_RESUME` applied;
    any other option is refused before anything is read or written.
    """
    if not args.resume:
        return config_from_args(args, presets, config_cls), None, None
    if args.out is not None:
        raise ConfigError("--out and --resume cannot be combined: a resumed run stays in its directory")
    given = given_options(args, config_cls)
    refused = (["--preset"] if args.preset is not None else []) + [
        option_name(name) for name in given if name not in APPLIED_ON_RESUME
    ]
    if refused:
        raise ConfigError(
            f"--resume continues {args.resume} with its own config.json; {', '.join(refused)} cannot "
            f"change there (leave them out, or start a new run with --out); only "
            f"{', '.join(option_name(name) for name in APPLIED_ON_RESUME)} may be given"
        )
    run, config, recorded = RunDirectory.resume(track, args.resume, config_cls)
    if given:
        try:
            config = dataclasses.replace(config, **given)
        except (TypeError, ValueError) as error:
            run.release()
            raise ConfigError(str(error)) from None
        log("resume: applying " + ", ".join(f"{option_name(name)} {value}" for name, value in given.items())
            + " (how the run computes, not what it computes; written to config.json)")
    return config, run, recorded


def start_or_resume(args, track, config_cls, presets, *, parse_source, load_data, fingerprint,
                    check=None, reuse_hint=None):
    """Everything that can fail on bad input, then the run directory: (config, run, data).

    Nothing is written before the options, the strategy, the data and (for
    `--resume`) the run's data fingerprint have been checked.

    Args:
        parse_source: the track's `parse_source` (makes data paths absolute).
        load_data: callable(config, source) -> data; `source` is the source a
            resumed run resolved when it started ("auto" is not resolved again),
            None for a new run.
        fingerprint: callable(data) -> dict identifying the data.
        check: optional callable(config, data) raising `ValueError` (e.g. the prompt).

    Raises:
        ConfigError, ValueError, OSError: one line for the user; no run is left locked.
    """
    from tracks.common.runtime import check_strategy

    config, run, recorded = resolve_config(args, track, config_cls, presets)
    try:
        check_strategy(config.strategy)
        config = dataclasses.replace(
            config, data=parse_source(config.data),
            data_dir=None if config.data_dir is None else os.path.abspath(os.path.expanduser(config.data_dir)),
        )
        data = load_data(config, recorded.get("source") if recorded else None)
        if check is not None:
            check(config, data)
        actual = {**fingerprint(data), "banner": data.banner}
        if run is None:
            kwargs = {} if reuse_hint is None else {"reuse_hint": reuse_hint}
            return config, RunDirectory.create(track, config, out=args.out, data_fingerprint=actual,
                                               **kwargs), data
        if recorded is None:
            log(f"{run.config_path} records no data fingerprint (an older run): the data cannot be "
                f"checked; recording the data used from now on")
        else:
            refuse_other_data(run, recorded, actual)
            data = dataclasses.replace(data, banner=recorded.get("banner"))
            actual["banner"] = data.banner
        run.update_config(config, actual)
        return config, run, data
    except BaseException:
        if run is not None:
            run.release()
        raise


def refuse_other_data(run, recorded, actual):
    """`ConfigError` when the data found now differ from those a run was trained on."""
    keys = [*recorded, *(key for key in actual if key not in recorded)]  # source, sizes, then the hash
    for key in (key for key in keys if key != "banner"):
        if recorded.get(key) != actual.get(key):
            raise ConfigError(
                f"--resume {run.path}: the data differ from those the run was trained on "
                f"({key}: {str(recorded.get(key))[:80]} then, {str(actual.get(key))[:80]} now); "
                f"restore those data (config.json's data_fingerprint describes them) or start a new run"
            )


def train_command(prog, prepare, train):
    """Runs a track's training and returns the exit code.

    Args:
        prog: the command, for the resume hint ("python -m tracks.vision").
        prepare: callable() -> (config, run, data), checking everything
            before anything is written (see `start_or_resume`).
        train: callable(config, run, data), run while the run's lock is held.
    """
    try:
        config, run, data = prepare()
    except KeyboardInterrupt:
        print("interrupted before training started", file=sys.stderr, flush=True)
        return 130
    except OSError as error:
        return fail(f"{describe_os_error(error)}")
    except (ConfigError, ValueError) as error:
        return fail(str(error))
    try:
        train(config, run, data)
        return 0
    except KeyboardInterrupt:
        print(f"interrupted; finished epochs and models are kept: continue with "
              f"{prog} --resume {run.path}", file=sys.stderr, flush=True)
        return 130
    except ConfigError as error:  # a damaged file found during the run
        return fail(str(error))
    except OSError as error:
        return fail(f"{describe_os_error(error)}; fix that, then continue with {prog} --resume {run.path}")
    finally:
        run.release()


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
                     parse_source, load_data, fingerprint, initial_instruments, title,
                     instrument_batch=None, banner_of=None):
    """`python -m tracks.X diagnose`: the grid's instruments at initialisation, no training.

    With `--model PATH.keras`: the same instruments on saved models (diagnose_model.py).

    Args:
        parse_source, load_data, fingerprint: as for `start_or_resume`.
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
        return fail("diagnose does not resume: it trains nothing; run it again with a new --out")
    if getattr(args, "seeds", None):
        return fail("diagnose trains nothing, so --seeds has nothing to average; measure one seed with --seed N")

    def prepare():
        return start_or_resume(args, f"{track}-diagnose", config_cls, presets, parse_source=parse_source,
                               load_data=load_data, fingerprint=fingerprint,
                               reuse_hint="choose another --out (diagnose always writes a new directory)")

    def diagnose(config, run, data):
        setup_runtime("fp32", "off", "none", seed=config.seed)
        summary = initial_instruments(config, data, run.path)
        run.update_results(track=f"{track}-diagnose", dataset=data.name, banner=data.banner,
                           initialisation=summary)
        instruments.write_diagnose_summary(run, title, summary, data.banner)
        log(f"done: {run.path / 'summary.md'}")

    return train_command(f"{prog} diagnose", prepare, diagnose)


def format_minutes(seconds):
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


__all__ = ["ConfigError", "announce", "diagnose_command", "fail", "prefetch_command", "format_minutes", "log",
           "resolve_config", "start_or_resume", "train_command", "train_parser"]
