"""One command line for every track: `tracks.common.cli.main(track, argv)`.

    python -m tracks.X [options]            train the grid (`--resume RUN` continues a run)
    python -m tracks.X diagnose [options]   the grid's instruments at initialisation, no training
    python -m tracks.X diagnose --model M   the same instruments on a saved model (diagnose_model.py)
    python -m tracks.X compare RUN REF      a run's numbers beside a reference run's (compare.py)
    python -m tracks.X prefetch             download the track's data set for offline runs
    python -m tracks.X <command>            the track's own commands (`Track.commands`)

Every command that writes a run goes through `run_command`: everything that
can fail on bad input is checked before the run directory is created; the
run's lock is held while it works and released however the work ends; bad
input, a damaged or unwritable file is one line (exit 2), Ctrl-C is one line
saying what was kept (exit 130), never a traceback.
"""

import argparse
import sys

from tracks.common.config import ConfigError
from tracks.common.console import fail, log, warn
from tracks.common.options import train_parser
from tracks.common.resume import start_or_resume
from tracks.common.run_dir import describe_os_error


def main(track, argv=None):
    """Runs the command `argv` (default: sys.argv[1:]) of `track`; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command, rest = (argv[0], argv[1:]) if argv else (None, [])
    if command in track.commands:
        return track.commands[command](track, rest)
    if command == "diagnose":
        return diagnose_command(track, rest)
    if command == "compare":
        from tracks.common.compare import compare_command

        return compare_command(track, rest)
    if command == "prefetch":
        return prefetch_command(track, rest)
    return train_command(track, argv)


def run_command(prog, prepare, work, *, resumable=True):
    """Runs one command that writes a run directory; returns the exit code.

    Args:
        prog: the command, for the resume hint ("python -m tracks.X").
        prepare: callable() -> (config, run, payload), checking everything
            before anything is written (see `start_or_resume`); `run` is locked.
        work: callable(config, run, payload) -> exit code or None (0), run
            while the run's lock is held.
        resumable: True for training (an interrupted run is kept and
            `--resume` continues it); False for a command whose run is
            complete or nothing (diagnose): an interrupted or failed one is discarded.
    """
    try:
        config, run, payload = prepare()
    except KeyboardInterrupt:
        warn("interrupted before anything was written")
        return 130
    except OSError as error:
        return fail(describe_os_error(error))
    except (ConfigError, ValueError) as error:
        return fail(str(error))
    with run:
        try:
            code = work(config, run, payload)
            return 0 if code is None else code
        except KeyboardInterrupt:
            if resumable:
                warn(f"interrupted; finished epochs and models are kept: continue with "
                     f"{prog} --resume {run.path}")
            else:
                run.discard()
                warn("interrupted; nothing was kept")
            return 130
        except ConfigError as error:  # a damaged file found during the run
            if not resumable:
                run.discard()
            return fail(str(error))
        except OSError as error:
            if not resumable:
                run.discard()
                return fail(describe_os_error(error))
            return fail(f"{describe_os_error(error)}; fix that, then continue with {prog} --resume {run.path}")
        except BaseException:
            if not resumable:
                run.discard()
            raise


def train_command(track, argv):
    """`python -m tracks.X [options]`: one run, or with `--seeds` one run per seed and their spread."""
    from tracks.common import seeds

    args = train_parser(track.prog, track.usage, track.config_cls, track.presets,
                        track.default_preset).parse_args(argv)

    def prepare():
        config, run, data = start_or_resume(track, args)
        return config, run, data

    return run_command(track.prog, prepare, lambda config, run, data: seeds.train(track, config, run, data))


def diagnose_command(track, argv):
    """`python -m tracks.X diagnose`: the grid's instruments at initialisation, no training.

    With `--model PATH.keras`: the same instruments on saved models (diagnose_model.py).
    """
    from tracks.common import diagnose_model

    if diagnose_model.wants_saved_models(argv):
        return diagnose_model.diagnose_saved_models(track, argv)
    prog = f"{track.prog} diagnose"
    parser = train_parser(prog, "Measure gradient flow, activation growth and the stream's Jacobian "
                          "of every grid model at initialisation (no training).", track.config_cls,
                          track.presets, track.diagnose_preset or track.default_preset)
    args = parser.parse_args(argv)
    if args.resume:
        return fail("diagnose does not resume: it trains nothing; run it again with a new --out")
    if getattr(args, "seeds", None):
        return fail("diagnose trains nothing, so --seeds has nothing to average; measure one seed with --seed N")

    def prepare():
        return start_or_resume(track, args, run_name=f"{track.name}-diagnose",
                               reuse_hint="choose another --out (diagnose always writes a new directory)")

    def diagnose(config, run, data):
        from tracks.common import instruments
        from tracks.common.runtime import setup_runtime

        setup_runtime("fp32", "off", "none", seed=config.seed)
        summary = track.measure_at_initialisation(config, data, run.path, track.grid(config))
        run.update_results(track=f"{track.name}-diagnose", dataset=data.name, dataset_title=data.title,
                           banner=data.banner, initialisation=summary)
        instruments.write_diagnose_summary(run, track.diagnose_title, summary, data.banner)
        log(f"done: {run.path / 'summary.md'}")

    return run_command(prog, prepare, diagnose, resumable=False)


def prefetch_command(track, argv):
    """`python -m tracks.X prefetch [--data-dir DIR]`: download and prepare the track's data set."""
    from tracks.common.tfds_source import prefetch

    if track.prefetch_dataset is None:
        return fail(f"{track.prog} makes its data itself: there is nothing to download")
    parser = argparse.ArgumentParser(
        prog=f"{track.prog} prefetch",
        description=f"Download and prepare {track.prefetch_dataset} into the TFDS data directory, so that "
                    "later runs (and Docker images built with PREFETCH_DATA=1) work offline.",
    )
    parser.add_argument("--data-dir", default=None,
                        help="TFDS data directory (default: $TFDS_DATA_DIR or ~/tensorflow_datasets)")
    args = parser.parse_args(argv)
    return prefetch(track.prefetch_dataset, track.download_host, args.data_dir, log=log)


__all__ = ["diagnose_command", "main", "prefetch_command", "run_command", "train_command"]
