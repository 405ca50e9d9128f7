"""One command line for every track: `tracks.common.cli.main(track, argv)`.

    python -m tracks.X [options]            train the grid (`--resume RUN` continues a run)
    python -m tracks.X diagnose [options]   the grid's instruments at initialisation, no training
    python -m tracks.X diagnose --model M   the same instruments on a saved model (diagnose_model.py)
    python -m tracks.X compare RUN REF      a run's numbers beside a reference run's (compare.py)
    python -m tracks.X prefetch             download the track's data set for offline runs
    python -m tracks.X <command>            the track's own commands (`Track.commands`: f(track, argv))

Each command reads and checks its arguments and the environment with the
standard library first (a refusal is one line, exit code 2, before
TensorFlow loads and before anything is written), then calls
`environment.configure_process` once, then works. Every command that writes a
run goes through `command.run_command` (the lock, one-line errors, Ctrl-C
and SIGTERM), given plain functions: how the run starts
(`resume.start_or_resume`) and what it does (`seeds.train`,
`run.diagnose_one_run`); diagnose --model too.
"""

import functools
import sys

from tracks.common import seeds
from tracks.common.command import (errors_of_a_signal, interruption, run_command, signals_as_interruptions,
                                   take_interruption)
from tracks.common.compare import compare_command
from tracks.common.config import ConfigError, path_option
from tracks.common.console import fail, log, warn
from tracks.common.environment import check_tensorflow_installed, configure_process, read_environment
from tracks.common.options import OneLineParser, train_parser
from tracks.common.resume import check_run, refuse_data_dir_not_a_folder, start_or_resume
from tracks.common.run import diagnose_one_run
from tracks.common.run_directory import refuse_a_long_path
from tracks.common.tfds_source import prefetch


def main(track, argv=None):
    """Runs the command `argv` (default: sys.argv[1:]) of `track`; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command, rest = (argv[0], argv[1:]) if argv else (None, [])
    try:
        environment = read_environment()
        if command not in ("-h", "--help", "--version"):
            check_tensorflow_installed()
    except ConfigError as error:
        return fail(str(error))
    with signals_as_interruptions():
        try:
            with errors_of_a_signal():
                if command in track.commands:
                    return track.commands[command](track, rest)
                if command == "diagnose":
                    return diagnose_command(track, rest, environment)
                if command == "compare":
                    return compare_command(track, rest)
                if command == "prefetch":
                    return prefetch_command(track, rest, environment)
                return train_command(track, argv, environment)
        except KeyboardInterrupt as error:  # a command that writes no run (a run's commands say what was kept)
            take_interruption()
            word, code = interruption(error)
            warn(word)
            return code
        except OSError as error:
            return refuse_a_long_path(error)


def train_command(track, argv, environment):
    """`python -m tracks.X [options]`: one run, or with `--seeds` one run per seed and their spread."""
    args = train_parser(track.prog, track.usage, track.config_cls, track.presets,
                        track.default_preset).parse_args(argv)
    try:
        checked = check_run(track, args)
    except ConfigError as error:
        return fail(str(error))
    return run_command(track.prog, functools.partial(start_or_resume, track, args, checked, environment),
                       functools.partial(seeds.train, track))


def diagnose_command(track, argv, environment):
    """`python -m tracks.X diagnose`: the grid's instruments at initialisation, no training.

    With `--model PATH.keras`: the same instruments on saved models (diagnose_model.py).
    """
    if any(arg == "--model" or arg.startswith("--model=") for arg in argv):
        # Imported here: numpy and the saved-model checks, for --model only (the grid's diagnose needs neither
        # before TensorFlow loads).
        from tracks.common.diagnose_model import diagnose_saved_models

        return diagnose_saved_models(track, argv, environment)
    prog = f"{track.prog} diagnose"
    parser = train_parser(prog, "Measure gradient flow, activation growth and the stream's Jacobian "
                          "of every grid model at initialisation (no training).", track.config_cls,
                          track.presets, track.diagnose_preset or track.default_preset)
    parser.add_argument("--model", metavar="PATH.keras", action="append", type=path_option,
                        help="measure a saved model (or several) instead of the grid: the same instruments, "
                             "on the track's data (diagnose --model PATH --help lists its options)")
    args = parser.parse_args(argv)
    if args.resume:
        return fail("diagnose does not resume: it trains nothing; run it again with a new --out")
    if getattr(args, "seeds", None):
        return fail("diagnose trains nothing, so --seeds has nothing to average; measure one seed with --seed N")
    args.force = True  # nothing is trained: the training estimate does not apply
    try:
        checked = check_run(track, args, f"{track.name}-diagnose",
                            "choose another --out (diagnose always writes a new directory)")
    except ConfigError as error:
        return fail(str(error))
    return run_command(prog, functools.partial(start_or_resume, track, args, checked, environment, trains=False),
                       functools.partial(diagnose_one_run, track), resumable=False)


def prefetch_command(track, argv, environment):
    """`python -m tracks.X prefetch [--data-dir DIR]`: download and prepare the track's data set."""
    if track.prefetch is None:
        return fail(f"{track.prog} makes its data itself: there is nothing to download")
    dataset, host = track.prefetch
    parser = OneLineParser(
        prog=f"{track.prog} prefetch",
        description=f"Download and prepare {dataset} into the TFDS data directory, so that "
                    "later runs (and Docker images built with PREFETCH_DATA=1) work offline.",
    )
    parser.add_argument("--data-dir", default=None,
                        help="TFDS data directory (default: $TFDS_DATA_DIR or ~/tensorflow_datasets)")
    args = parser.parse_args(argv)
    try:
        refuse_data_dir_not_a_folder(args.data_dir, purpose=f"to keep {dataset} in")
    except ConfigError as error:
        return fail(str(error))
    configure_process(environment)
    return prefetch(dataset, host, args.data_dir, log=log)


__all__ = ["diagnose_command", "main", "prefetch_command", "train_command"]
