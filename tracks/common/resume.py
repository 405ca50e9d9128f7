"""A new run or a resumed one, checked before anything is written.

`check_run` does, with the standard library only, everything that can fail
on the options: the config and its ranges, the `--data` value, the
strategy's requirements, the estimate against the machine (`limits.py`)
and, for `--resume`, the run's own config.json; it returns a `CheckedRun`.
Then `start_or_resume` sets up TensorFlow, loads the data, checks what needs
them and the resumed run's data fingerprint, and only then creates the run.
`--resume RUN` continues RUN with its own config.json; only the options of
`APPLIED_ON_RESUME` (how a run computes, not what) may be given with it, and
the data must be those the run was trained on.
"""

import dataclasses
import os
import pathlib
from typing import Any, Optional

from tracks.common.config import ConfigError, config_from_args, given_options, option_name
from tracks.common.console import log
from tracks.common.environment import check_cache_directory, check_strategy, configure_process
from tracks.common.limits import refuse_beyond_machine
from tracks.common.option_ranges import check_integer_sizes, tensorflow_path_problem
from tracks.common.options import APPLIED_ON_RESUME
from tracks.common.run import load
from tracks.common.run_directory import RunDirectory, RunFileError
from tracks.common.track import RunContext


@dataclasses.dataclass(frozen=True)
class CheckedRun:
    """A run whose options are checked, not started yet: what `check_run` gives `start_or_resume`."""

    config: Any  # the track's config: the preset and the options given, or a resumed run's own
    run: Optional[RunDirectory] = None  # a resumed run, locked; None: a new run, made once the data are checked
    recorded: Optional[dict] = None  # the data fingerprint the resumed run recorded (None: none, or a new run)
    run_name: Optional[str] = None  # config.json's name and the new directory's prefix (None: the track's name)
    reuse_hint: Optional[str] = None  # what the refusal of a non-empty --out suggests (None: the default)

    def release(self):
        """Gives back a resumed run's lock (a new run holds none yet)."""
        if self.run is not None:
            self.run.release()


def resolve_config(args, run_name, config_cls, presets):
    """The `CheckedRun` of the options given (its config not yet checked against the machine or the data).

    A new run: the preset plus the options given. `--resume RUN`: RUN's own
    config (RUN is locked), with the options of `APPLIED_ON_RESUME` applied;
    any other option is refused before anything is read or written.
    """
    if not args.resume:
        config = config_from_args(args, presets, config_cls)
        try:
            check_integer_sizes(config)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return CheckedRun(config, run_name=run_name)
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
    run, config, recorded = RunDirectory.resume(run_name, args.resume, config_cls)
    try:
        check_integer_sizes(config)
    except ValueError as error:
        run.release()
        raise RunFileError(f"{run.config_path} does not describe a {run_name} run ({error}); restore it from a "
                           f"copy, or start a new run") from None
    if given:
        try:
            config = dataclasses.replace(config, **given)
        except (TypeError, ValueError) as error:
            run.release()
            raise ConfigError(str(error)) from None
        log("resume: applying " + ", ".join(f"{option_name(name)} {value}" for name, value in given.items())
            + " (how the run computes, not what it computes; written to config.json)")
    return CheckedRun(config, run, recorded, run_name=run_name)


def check_run(track, args, run_name=None, reuse_hint=None):
    """The options checked, before TensorFlow loads: a `CheckedRun`.

    A new run's config is checked against the machine (`Track.resources`,
    refused unless `--force`); a resumed run was when it started. A resumed
    run comes back locked (its lock file is the only thing written).

    Args:
        track: the `Track` (its config, presets, `parse_source` and `resources`).
        args: the parsed `train_parser` options.
        run_name: the name written to config.json and the default directory's
            prefix (default: the track's name; "<name>-diagnose" for diagnose).
        reuse_hint: what the error for a non-empty --out suggests.

    Raises:
        ConfigError: one line for the user; no run is left locked.
    """
    checked = resolve_config(args, run_name or track.name, track.config_cls, track.presets)
    try:
        try:
            config = dataclasses.replace(checked.config, data=track.parse_source(checked.config.data))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        check_strategy(config.strategy)
        refuse_data_dir_not_a_folder(getattr(config, "data_dir", None))
        if str(config.data).startswith("folder:"):
            check_cache_directory()
        if checked.run is None:
            RunDirectory.check_new(args.out, *([reuse_hint] if reuse_hint else []))
            refuse_out_inside_data(args.out, config.data)
            refuse_too_large(track, config, getattr(args, "force", False))
    except BaseException:
        checked.release()
        raise
    return dataclasses.replace(checked, config=config, reuse_hint=reuse_hint)


def refuse_data_dir_not_a_folder(data_dir, purpose="for the data sets"):
    """`ConfigError` for a `--data-dir` that names a file or nothing (`--data auto` would fall back to its offline
    data set without a word on why; `prefetch` would try the network first). A folder that does not exist yet is
    fine: a download makes it. `purpose`: what the folder is for, as the message says it."""
    if data_dir is not None and (not data_dir.strip() or os.path.isfile(os.path.expanduser(data_dir))):
        raise ConfigError(f"--data-dir {data_dir!r} names no folder {purpose}; give a folder's path")
    unusable = data_dir is not None and tensorflow_path_problem(data_dir)
    if unusable:
        raise ConfigError(f"--data-dir {unusable}; give another folder")


def refuse_out_inside_data(out, data):
    """`ConfigError` for a run directory inside the images it trains on (`--data folder:`, its train/ or test/): the
    next run on them would read the run's folder as a class. `out` None: the default, under runs/ here."""
    if not str(data).startswith("folder:"):
        return
    folder = pathlib.Path(str(data)[len("folder:"):]).expanduser().resolve()
    where = pathlib.Path("runs" if out is None else out).expanduser().resolve()
    for split in (folder / "train", folder / "test"):
        if where == split or split in where.parents:
            raise ConfigError(f"the run directory {where} would be inside {split}, part of the image folder it reads "
                              "(--data): the next run on it would read the run as a class; give an --out outside it")


def refuse_too_large(track, config, force):
    """`refuse_beyond_machine` for the run's estimate (`Track.resources`); sizes so large that the estimate
    overflows a float are refused even with --force (no machine holds them; the range checks keep the options
    below that)."""
    try:
        refuse_beyond_machine(track.resources(config), force=force)
    except OverflowError:
        raise ConfigError("this run's sizes are too large to estimate (its time or memory overflows a float): "
                          "lower them") from None


def start_or_resume(track, args, checked, environment, *, trains=True):
    """TensorFlow set up, the data loaded and checked, then the run directory: (config, run, data).

    Nothing is written before the data and (for `--resume`) the run's data
    fingerprint have been checked.

    Args:
        track: the `Track` (its config, presets and data).
        args: the parsed `train_parser` options.
        checked: the `CheckedRun` of `check_run`.
        environment: `environment.read_environment()`, for `configure_process`.
        trains: False for diagnose: the training options' checks do not apply.

    Raises:
        ConfigError, ValueError, OSError: one line for the user; no run is left locked.
    """
    config, run, recorded = checked.config, checked.run, checked.recorded
    try:
        configure_process(environment)  # TensorFlow loads here, once every option is checked
        if getattr(config, "data_dir", None) is not None:  # a track without downloads has no data_dir
            config = dataclasses.replace(config, data_dir=os.path.abspath(os.path.expanduser(config.data_dir)))
        given = given_options(args, track.config_cls)
        data = load(track, config, recorded.get("source") if recorded else None, trains=trains, given=given)
        config = dataclasses.replace(config, **track.parts.fit_defaults(RunContext(config, data=data), given))
        track.parts.check(RunContext(config, data=data, trains=trains))
        config = fit_samples(track, config, data, given, trains=trains)
        actual = {**track.parts.fingerprint(data), "banner": data.banner}
        if run is None:
            kwargs = {} if checked.reuse_hint is None else {"reuse_hint": checked.reuse_hint}
            return config, RunDirectory.create(checked.run_name or track.name, config, out=args.out,
                                               data_fingerprint=actual, **kwargs), data
        if recorded is None:
            log(f"{run.config_path} records no data fingerprint: the data cannot be checked; "
                f"recording the data used from now on")
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


def fit_samples(track, config, data, given, trains=True):
    """`config` with each count of `sample_limits` (an instrument sample size, a warm-up) that the data or the
    run cannot hold lowered to what they can.

    A count the user gave (`given`) is refused instead: they asked for that many.

    Raises:
        ValueError: a given sample size above what the data have.
    """
    limits = track.parts.sample_limits(RunContext(config, data=data, trains=trains))
    refuse_given_samples(limits, config, given)
    lowered = {}
    for field, available, where in limits:
        count = getattr(config, field)
        if count > available:
            lowered[field] = available
            log(f"{option_name(field)}: the preset's {count} is more than the {available} {where}; "
                f"using {available}")
    return dataclasses.replace(config, **lowered) if lowered else config


def refuse_given_samples(limits, config, given):
    """ValueError for the first count of `limits` ((field, available, where), `sample_limits`) that the user
    typed (`given`) above what is available: they asked for that many."""
    for field, available, where in limits:
        count = getattr(config, field)
        if field in given and count > available:
            raise ValueError(f"{option_name(field)} {count} is more than the {available} {where}; lower it")


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


__all__ = ["CheckedRun", "check_run", "fit_samples", "refuse_data_dir_not_a_folder", "refuse_given_samples",
           "refuse_other_data", "refuse_out_inside_data", "refuse_too_large", "resolve_config", "start_or_resume"]
