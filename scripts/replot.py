"""Draw a finished run's figures again from what its directory keeps: nothing is trained or measured.

    python scripts/replot.py RUN_DIR [RUN_DIR ...]            # redraws the figures in RUN_DIR
    python scripts/replot.py RUN_DIR --out DIR                # in a copy of RUN_DIR made in DIR
    python scripts/replot.py RUN_DIR --measure-initialisation [--data SOURCE]   # the Jacobians too

A run directory keeps its numbers: results.json (every model's results, the
studies of the trained nets, the instruments at initialisation), metrics/
(the learning curves) and dynamics/ (the instruments while training). This
script draws the run's figures from them with the code the tracks draw them
with: each track's `report.draw_figures` (the report's figures) and
`tracks.common.instrument_report.plot_initialisation` (those at
initialisation). So when a figure's code changes, the maintainers redraw
docs/reference/ with it, and an instructor redraws a class's runs, in
seconds and without training. Only PNG files are written: summary.md,
results.json and the CSV files stay as they are. Under docs/reference/
they are written as save_reference.py writes them: 8-bit palette PNGs.

What the figures print about the data (its name, the fallback banner, the
number of training images) comes from results.json, so the data need not be
at hand; the toy track's figure of decision boundaries draws the training
points again from the run's seed, checked against config.json's fingerprint.
Where results.json names the data by a source without its path
(`text:PATH`, as docs/reference/ records them) and no title, `--data
SOURCE` gives the run's data (loaded, checked against the fingerprint) to
name them as the run did.

Two figures cannot be drawn from a run directory: jacobian.png and
jacobian_blocks.png. results.json keeps each model's ||d x_L / d x_0||, not
the norms block by block and along the depth that these figures draw, so
they are left as they are and named in the output. With
`--measure-initialisation` they are measured again: the grid's models are
built at initialisation from the run's seed and measured on the run's
batch with the track's own code (`tracks.common.run.measure_at_initialisation`,
nothing is trained), in a scratch directory; the two figures are kept only
when every model's gradient gain, ||d x_L / d x_0|| and stream growth
come out as results.json has them (within a relative 1e-3), so that they
show the run's own models. That needs the run's data: its recorded source,
or `--data SOURCE` for another copy of the same data (checked against
config.json's fingerprint), and a minute or so of CPU per run. The
synthetic set made again on another CPU can differ from the run's in a few
pixels (numpy's vectorised sin and exp round by instruction set: 3 pixels
in 10 million moved by one level, AVX-512 against no AVX2), so its digest
differs; data that differ in the digest alone (same source, sizes, classes
and banner) are measured anyway, with a line, since the numbers decide.

A `--seeds` run's own directory is refused (its mean +- std curves are drawn
from its seed-N/ runs): give the seed-N/ directories.

Exit status: 0 when every run was redrawn, 2 when an option or a RUN_DIR
is refused (one line each): --out a file or a folder that cannot be
written in, a RUN_DIR that is not a finished run of a track, a
results.json without the numbers the figures draw, --data that are not
the run's. All of it is checked before anything is written: before the
copy in --out is made, and before the first figure is drawn.
"""

import argparse
import contextlib
import dataclasses
import importlib
import json
import pathlib
import shutil
import sys
from typing import Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The reference runs in the repository: their figures are redrawn as 8-bit palette PNGs, as save_reference.py
# saves them (a third of matplotlib's size; the figures have few colours).
REFERENCE = (ROOT / "docs" / "reference").resolve()
# Figures a run draws that results.json does not keep the numbers of (see the docstring).
NOT_KEPT = ("jacobian.png", "jacobian_blocks.png")
# What a new measurement at initialisation must give again (relative difference) for its Jacobians to be kept.
MEASURED_AGAIN = ("gradient_gain", "jacobian_norm", "stream_growth")
TOLERANCE = 1e-3
# The tracks whose report draws the data themselves (the toy track's points), not only their name.
DRAWS_THE_DATA = ("toy",)
# The lists results.json keeps of each model at initialisation that the figures draw.
DRAWN_AT_INITIALISATION = ("stream_rms", "stream_grad_norms", "block_weight_grad_norms")


class ReplotError(Exception):
    """A RUN_DIR that cannot be redrawn: one line for the user."""


@dataclasses.dataclass(frozen=True)
class RecordedData:
    """What the figures say about a run's data, as results.json recorded it (the data are not loaded).

    `y_train` only has the training set's length (the vision subtitle counts the images).
    """

    name: str
    title: str
    banner: Optional[str]
    plot_banner: Optional[str]
    y_train: Sequence


def _plot_banner(track_name, banner):
    """The data's warning as the figures show it: the rule of the track's own data class."""
    if banner is None:
        return None
    classes = {"vision": ("tracks.vision.data.loading", "VisionData"), "language": ("tracks.language.data", "TextData")}
    module, name = classes[track_name]
    return getattr(importlib.import_module(module), name).plot_banner.fget(RecordedData("", "", banner, None, ()))


def _read(run_path):
    """(track, base track name, config, results as a dict, diagnose) of a run directory, or ReplotError."""
    from tracks.common.config import ConfigError, config_from_dict
    from tracks.common.run_directory import RunDirectory, read_json
    from tracks.registry import TRACKS, track as track_named

    if not (run_path / "config.json").is_file():
        raise ReplotError(f"{run_path}: no config.json there, not a run directory")
    if any(run_path.glob("seed-*/config.json")):
        raise ReplotError(f"{run_path} is a --seeds run: redraw its seed-N/ directories one by one")
    run = RunDirectory(run_path, None)
    try:
        recorded = read_json(run.config_path, "restore it from a copy")
        name = recorded.get("track") if isinstance(recorded, dict) else None
        base = str(name).removesuffix("-diagnose")
        if base not in TRACKS:
            raise ReplotError(f"{run_path}: config.json names no track of this package ({name!r})")
        track = track_named(base)
        config = config_from_dict(track.config_cls, recorded)
        results = run.read_results()
    except ConfigError as error:
        raise ReplotError(str(error)) from None
    if not results.get("initialisation"):
        raise ReplotError(f"{run_path}: results.json has no numbers at initialisation: the run did not get that far")
    if not isinstance(results["initialisation"], dict):
        raise ReplotError(f"{run.results_path} is damaged: its initialisation is not a table of models; "
                          f"restore it from a copy")
    return track, base, config, results, name.endswith("-diagnose")


def _series(run_path, track, config, summary):
    """{label: (variant, depth)} of the models results.json measured at initialisation, in the order measured
    (the grid's, once each); ReplotError for a model the grid does not have, or one without a list drawn."""
    series = {}
    for spec in track.parts.grid(config):
        series.setdefault(f"{spec.variant}-{spec.depth}", (spec.variant, spec.depth))
    missing = [label for label in summary if label not in series]
    if missing:
        raise ReplotError(f"{run_path}: results.json measured {', '.join(missing)} at initialisation, which "
                          f"config.json's grid does not have")
    for label, numbers in summary.items():
        lacks = _lacks(numbers)
        if lacks:
            raise ReplotError(f"{run_path / 'results.json'} is damaged: the {label} model at initialisation has no "
                              f"{', '.join(lacks)} to draw (a list by depth); restore it from a copy")
    return series


def _lacks(numbers):
    """The lists the figures draw (DRAWN_AT_INITIALISATION) that one model's numbers at initialisation lack."""
    if not isinstance(numbers, dict):
        return list(DRAWN_AT_INITIALISATION)
    lacks = [key for key in DRAWN_AT_INITIALISATION if not isinstance(numbers.get(key), list)]
    rows = numbers.get("stream_rms")  # a row per depth, the batch's examples: the batch's size is read from it
    if "stream_rms" not in lacks and not (rows and all(isinstance(row, list) for row in rows)):
        lacks.append("stream_rms")
    return lacks


def _loaded(track, config, run_path, source=None, trains=True, log=None):
    """(config, data): the run's data loaded by the track (from `source` if given), checked to be the run's.

    `log`: given when the models are measured again (see `_same_data`), where it says why data whose
    digest differs are accepted."""
    from tracks.common.track import RunContext

    if source is not None:
        try:
            config = dataclasses.replace(config, data=track.parse_source(source))
        except ValueError as error:
            raise ReplotError(f"--data {source}: {error}") from None
    try:
        data = track.parts.load_data(RunContext(config, trains=trains))
    except (OSError, ValueError) as error:
        raise ReplotError(f"{run_path}: cannot load its data {config.data} ({error}); give a copy with --data") from None
    differs = _same_data(run_path, track, data, measured_again=log is not None)
    if differs:
        log(differs)
    return config, data


def _data(track, base, config, results, run_path, source=None):
    """The run's data as its figures need them: loaded and checked (`source`, the toy points), else recorded."""
    if source is not None or base in DRAWS_THE_DATA:
        return _loaded(track, config, run_path, source, trains=not results.get("track", "").endswith("-diagnose"))[1]
    name = results.get("dataset") or config.data
    title = results.get("dataset_title") or track.parts.data_title(name)
    if title == name and ":" in name:  # a recorded source without its path (text:PATH): no title to show
        raise ReplotError(f"{run_path}: results.json names its data only as {name}: give them with --data SOURCE "
                          f"(the run's data, checked against config.json's fingerprint) to name them in the figures")
    return RecordedData(name, title, results.get("banner"), _plot_banner(base, results.get("banner")),
                        range(results.get("train_images") or 0))


@contextlib.contextmanager
def _locked(run_path, track_name):
    """The run's lock while its figures are drawn: not while it trains (it draws them itself at the end)."""
    from tracks.common.config import ConfigError
    from tracks.common.run_directory import LOCK_NAME, RunDirectory

    had_lock = (run_path / LOCK_NAME).exists()
    run = RunDirectory(run_path, track_name)
    try:
        run.lock()
    except ConfigError as error:
        raise ReplotError(str(error)) from None
    try:
        yield run
    finally:
        run.release()
        if not had_lock:  # a lock file this script made: gone again
            (run_path / LOCK_NAME).unlink(missing_ok=True)


def _same_data(run_path, track, data, measured_again=False):
    """ReplotError unless `data` are those config.json's fingerprint describes (their digest).

    With `measured_again` (the models are measured and compared with results.json's numbers, which is the
    real check), data that differ from the run's in their digest only, with the same source, sizes, classes
    and banner, are accepted with a line: the synthetic set made on another CPU (numpy's vectorised sin and
    exp round differently from one instruction set to another, and a few pixels in a million move by one
    level). Returns that line, or None when the digests agree.
    """
    recorded = json.loads((run_path / "config.json").read_text()).get("data_fingerprint") or {}
    found = track.parts.fingerprint(data)
    # The digest of the data, and whether they are a fallback (its banner goes on the figures).
    if bool(recorded.get("banner")) == bool(data.banner):
        if recorded.get("sha256") == found.get("sha256"):
            return None
        described = {key: value for key, value in recorded.items() if key not in ("sha256", "banner")}
        if measured_again and described == {key: value for key, value in found.items() if key != "sha256"}:
            return (f"{run_path}: the data loaded ({found.get('source')}) have the run's source, sizes and classes "
                    f"but not its digest (a synthetic set made on another CPU differs in a few pixels); measuring "
                    f"again, kept only if every number matches results.json's")
    raise ReplotError(f"{run_path}: the data loaded ({found.get('source')}) are not the run's (config.json's "
                      f"data_fingerprint differs); give a copy of the run's data with --data")


def measure_jacobians(run_path, source=None, log=print):
    """jacobian.png and jacobian_blocks.png measured again at initialisation; the files written (see the docstring)."""
    import tempfile

    from tracks.common.run import measure_at_initialisation
    from tracks.common.run_directory import RunDirectory
    from tracks.common.runtime import setup_runtime
    from tracks.common.track import RunContext

    track, base, config, results, diagnose = _read(run_path)
    config, data = _loaded(track, config, run_path, source, trains=not diagnose, log=log)
    if diagnose:  # as `diagnose` and a training run set the process up before they measure
        runtime = setup_runtime("fp32", "off", "none", seed=config.seed)
    else:
        runtime = setup_runtime(config.precision, config.xla, config.strategy, seed=config.seed,
                                cpu_xla=track.cpu_xla, cpu_graph_optimizer=track.cpu_graph_optimizer,
                                cpu_bf16=track.cpu_bf16)
    with tempfile.TemporaryDirectory() as scratch:
        ctx = RunContext(config, run=RunDirectory(scratch, base), data=data, runtime=runtime, log=lambda line: None)
        measured = measure_at_initialisation(track, ctx, track.parts.grid(config), diagnose=diagnose)
        differ = []
        for label, saved in results["initialisation"].items():
            for key in MEASURED_AGAIN:
                old, new = saved.get(key), measured.get(label, {}).get(key)
                if (old is None) != (new is None) or old is not None and abs(new - old) > TOLERANCE * abs(old):
                    differ.append(f"{label}'s {key} {new} (results.json: {old})")
        if differ:
            raise ReplotError(f"{run_path}: measured again at initialisation, {'; '.join(differ[:3])}: not the run's "
                              f"models (other code or versions?); {', '.join(NOT_KEPT)} left as they were")
        with _locked(run_path, results.get("track")):
            for name in NOT_KEPT:
                shutil.copyfile(pathlib.Path(scratch) / name, run_path / name)
    log(f"{run_path}: measured again at initialisation ({len(results['initialisation'])} models, every "
        f"{', '.join(MEASURED_AGAIN)} within {TOLERANCE:g} of results.json): drew {', '.join(NOT_KEPT)}")
    return list(NOT_KEPT)


@dataclasses.dataclass(frozen=True)
class CheckedRun:
    """A run directory read and checked, nothing written yet: what its figures are drawn from."""

    track: object  # the track (tracks.registry)
    base: str  # the track's name: "vision" for a vision-diagnose run
    config: object  # config.json, as the track's config
    results: dict  # results.json
    record: object  # results.json read by the track's results class; None for a diagnose run
    series: dict  # {label: (variant, depth)} of the models measured at initialisation (see `_series`)
    diagnose: bool
    data: object  # the run's data, loaded and checked, or RecordedData


def check_run(run_path, source=None):
    """The run at `run_path` ready to be drawn again (`source`: as in `replot`); ReplotError for anything
    that would stop its figures, raised before anything is written."""
    from tracks.common.results import ResultsFormatError

    track, base, config, results, diagnose = _read(run_path)
    series = _series(run_path, track, config, results["initialisation"])
    record = None
    if not diagnose:
        try:
            record = track.results.from_json(results)
        except ResultsFormatError as error:
            raise ReplotError(f"{run_path}: {error}") from None
    data = _data(track, base, config, results, run_path, source)
    return CheckedRun(track, base, config, results, record, series, diagnose, data)


def replot(run_path, source=None, log=print):
    """Draws the figures of one run directory again; returns the files drawn.

    `source`: the run's data from another place (loaded, checked, and named in the figures as the run named
    them); without it, what results.json says of them.
    """
    return draw(run_path, check_run(run_path, source), log)


def draw(run_path, checked, log=print):
    """Draws the figures of `checked` (a CheckedRun) in `run_path`, the run's directory or a copy of it."""
    from tracks.common.instrument_report import plot_initialisation
    from tracks.common.run import diagnose_subtitle, instrument_subtitle
    from tracks.common.track import RunContext

    track, summary = checked.track, checked.results["initialisation"]
    with _locked(run_path, checked.results.get("track")) as run:
        ctx = RunContext(checked.config, run=run, data=checked.data)
        examples = range(len(next(iter(summary.values()))["stream_rms"][0]))  # the batch measured: its size only
        subtitle = (diagnose_subtitle if checked.diagnose else instrument_subtitle)(track, ctx, examples)
        drawn = plot_initialisation(run_path, summary, checked.series, banner=checked.data.plot_banner,
                                    subtitle=subtitle,
                                    depth_scaling=track.instrument_options.get("depth_scaling", True))
        if not checked.diagnose:
            module = importlib.import_module(f"tracks.{checked.base}.report")
            figures = module.draw_figures(checked.record, ctx)
            drawn += [name for _, name in figures if name not in drawn and name not in NOT_KEPT]
    if run_path.resolve().is_relative_to(REFERENCE):  # kept in the repository: as small as save_reference makes them
        from scripts.save_reference import small_png

        for name in drawn:
            small_png(run_path / name, run_path / name)
    kept = [name for name in NOT_KEPT if (run_path / name).exists()]
    log(f"{run_path}: drew {', '.join(drawn)}"
        + (f"; left as they were (their numbers are not kept): {', '.join(kept)}" if kept else ""))
    return drawn


def _copy(run_path, out):
    """A copy of `run_path` made in `out` (--out) for its figures to be drawn in; ReplotError where it cannot."""
    from tracks.common.run_directory import describe_os_error

    target = out / run_path.resolve().name
    if target.exists():
        raise ReplotError(f"--out {out}: {target} exists already; choose another --out")
    if target.resolve().is_relative_to(run_path.resolve()):
        raise ReplotError(f"--out {out} is inside {run_path}, the run it would copy; choose another --out")
    try:
        shutil.copytree(run_path, target)
    except OSError as error:  # a full disk, say: no half copy is left behind
        shutil.rmtree(target, ignore_errors=True)
        raise ReplotError(f"--out {out}: cannot copy {run_path} there ({describe_os_error(error)})") from None
    return target


def main(argv=None):
    from tracks.common.option_ranges import out_problem
    from tracks.common.options import OneLineParser  # a bad argument: one line, exit 2

    parser = OneLineParser(prog="python scripts/replot.py", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", metavar="RUN_DIR", nargs="+", type=pathlib.Path, help="a finished run's directory")
    parser.add_argument("--out", type=pathlib.Path, default=None,
                        help="copy each RUN_DIR into this directory first and redraw the copy (RUN_DIR is not touched)")
    parser.add_argument("--measure-initialisation", action="store_true",
                        help="measure the models at initialisation again (no training) for jacobian.png and "
                             "jacobian_blocks.png, kept where the numbers match results.json's")
    parser.add_argument("--data", metavar="SOURCE", default=None,
                        help="the run's data from another place (e.g. folder:PATH), checked against config.json's "
                             "fingerprint: needed to measure again, and to name data that results.json names "
                             "without their path")
    args = parser.parse_args(argv)
    where = args.out is not None and out_problem(args.out)  # a file, or a folder that is not writable
    if where:
        print(f"error: {where}", file=sys.stderr)
        return 2
    failed = 0
    for run_path in args.runs:
        try:
            checked = check_run(run_path, args.data)  # every option and the run: refused before anything is copied
            if args.out is not None:
                run_path = _copy(run_path, args.out)
            draw(run_path, checked)
            if args.measure_initialisation:
                measure_jacobians(run_path, args.data)
        except ReplotError as error:
            print(f"error: {error}", file=sys.stderr)
            failed += 1
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
