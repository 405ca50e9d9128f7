"""`python -m tracks.X compare RUN REFERENCE`: a run's numbers beside a reference run's, with bands.

An instructor checks a class's runs against the reference runs committed in
docs/reference/ (one per preset and data set). For every figure both runs
have (a model's training or test error, a validation loss, a gradient gain
at initialisation, each finding's verdict) the command prints the
reference's value, the run's, the tolerance band the lab sheet gives (the
reference folder's `bands.json`) and marks a value outside its band. A mark
is a reason to look (other data, options, hardware), not a failure: the
findings' verdicts are what should hold.

A `diagnose` run (results.json's track "X-diagnose": the networks at
initialisation, nothing trained) is compared with a diagnose reference, figure
by figure from its instruments (`initialisation_figures`); a training run
with a training reference. Mixing the two is refused in one line.

The data are compared by what they are, not by where they were read from:
the fingerprint each run records (config.json's `data_fingerprint`: the
classes or vocabulary, the sizes, a hash of the contents) says whether two
runs saw the same data, the same data set in another copy or subset, or
other data (`data_differences`).

Each track says which figures it has (`track.parts.figures(results)`: name ->
(value, unit)), which findings (`track.parts.findings(results)`: the track's
Finding list), how a reader names its data (`track.parts.data_title`) and
which of its config fields change what a run measures (`track.setup_fields`);
this module knows no track.
"""

import json
import math
import pathlib

from tracks.common.config import path_option
from tracks.common.console import fail, log
from tracks.common.environment import configure_process, read_environment
from tracks.common.options import OneLineParser
from tracks.common.report import format_value, text_table
from tracks.common.results import ResultsFormatError, RunResults
from tracks.common.run_directory import RunFileError, read_json

UNITS = {"percent": "percent", "nats": "float", "ratio": "ratio", "fraction": "percent"}
LOWER_BOUND = "lower bound"  # the unit of a power-iteration estimate that did not converge: shown "≥ value"

# The config fields that change what any track's run measures; a track adds its own, per kind of run
# (`Track.setup_fields`). The others, such as the seed, the data directory or XLA, do not change the numbers.
SETUP_FIELDS = ("preset", "variants", "depths")
KIND_TEXT = {"training": "a training run", "diagnose": "a diagnose run (networks at initialisation, nothing trained)"}


def _value_text(value, unit):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if unit == LOWER_BOUND:
        return f"≥ {value:.3g}"
    if unit == "ratio":
        return f"{value:.3g}"
    if unit in ("percent", "fraction"):
        return format_value(value, "percent")
    return format_value(value)


def _band_text(band, unit):
    low, high = band
    if unit in ("percent", "fraction"):
        return f"{100 * low:.0f}-{100 * high:.0f}%"
    return f"{low:.2f}-{high:.2f}" if unit == "nats" else f"{low:.3g}-{high:.3g}"


def load_run(path, what, track_name=None):
    """(results.json, config.json) of a run directory, as dicts (`typed` reads the first).

    Raises:
        RunFileError: one line, when it is not a run directory, or (with
            `track_name`) a run of another track.
    """
    path = pathlib.Path(path)
    if not (path / "results.json").is_file():
        raise RunFileError(f"{what} {path}: no results.json there, not a run directory")
    results = read_json(path / "results.json", "pass a finished run's directory")
    config = read_json(path / "config.json", "pass a finished run's directory") if (
        path / "config.json").is_file() else {}
    recorded = results.get("track") if isinstance(results, dict) else None
    if track_name is not None and run_kind_of(recorded, track_name) is None:
        raise RunFileError(f"{what} {path} is a {recorded!r} run, not a {track_name!r} run: compare runs of "
                           "this track")
    for name, data in (("results.json", results), ("config.json", config)):
        if not isinstance(data, dict):
            raise RunFileError(f"{path / name} does not describe a run (a JSON {type(data).__name__}, not an "
                               "object); pass a finished run's directory")
    return results, config


def typed(results, path, results_type=RunResults):
    """`results` (a results.json's dict, from `path`) as a `results_type`; RunFileError (one line) if it is not one."""
    try:
        return results_type.from_json(results)
    except ResultsFormatError as error:
        raise RunFileError(f"{pathlib.Path(path) / 'results.json'} does not describe a run this package "
                           f"reads: {error}") from None


def load_bands(reference):
    """{figure: (low, high)} and the rule that made them, from REFERENCE/bands.json (empty if none).

    Raises:
        RunFileError: one line naming the file, when it is not {"bands": {figure: [low, high]}, "rule": text}
            with finite numbers low <= high.
    """
    path = pathlib.Path(reference) / "bands.json"
    if not path.is_file():
        return {}, None
    data = read_json(path, "restore it from the repository")
    bands = data.get("bands", {}) if isinstance(data, dict) else None
    if not isinstance(bands, dict):
        raise RunFileError(f'{path} is damaged (not an object {{"bands": {{figure: [low, high]}}}}); '
                           "restore it from the repository")
    for name, band in bands.items():
        if not _is_band(band):
            raise RunFileError(f"{path} is damaged (the band of {name!r} is {json.dumps(band)[:80]}, not "
                               "[low, high] with finite numbers low <= high); restore it from the repository")
    rule = data.get("rule")
    return {name: tuple(band) for name, band in bands.items()}, None if rule is None else str(rule)


def _is_band(band):
    """Whether a bands.json value is [low, high]: two finite numbers, low <= high."""
    return isinstance(band, list) and len(band) == 2 and all(map(_finite_number, band)) and band[0] <= band[1]


def _finite_number(value):
    """Whether a JSON value is a number (not a boolean) that a float holds finitely."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond a float's range
        return False


def comparison_rows(reference_figures, run_figures, bands):
    """[[figure, reference, this run, band, mark]] and the number of values outside their bands.

    Each run's value is shown in its own unit ("≥ 5.67" where that run's estimate is a lower bound).
    """
    rows, outside = [], 0
    for name, (reference_value, unit) in reference_figures.items():
        value, run_unit = run_figures.get(name, (None, unit))
        band = bands.get(name)
        mark = ""
        if band is not None and value is not None and math.isfinite(value):
            if not band[0] <= value <= band[1]:
                mark, outside = "OUTSIDE", outside + 1
        elif name not in run_figures:
            mark = "not in this run"
        rows.append([name, _value_text(reference_value, unit), _value_text(value, run_unit),
                     _band_text(band, unit) if band else "—", mark])
    return rows, outside


def initialisation_figures(results):
    """{figure: (value, unit)} of the instruments at initialisation, one set per model, in the run's order.

    What a `diagnose` run measures (tracks/common/instruments.py): the gradient gain,
    the spectral norm of the stream's Jacobian ‖dx_L/dx_0‖ (a lower bound where the
    power iteration did not converge) and the stream's growth RMS(x_L) / RMS(x_0).
    """
    figures = {}
    for model_id, values in (results.initialisation or {}).items():
        figures[f"{model_id} gradient gain at initialisation"] = (values.get("gradient_gain"), "ratio")
        converged = values.get("jacobian_converged", True)
        figures[f"{model_id} ‖dx_L/dx_0‖ at initialisation"] = (
            values.get("jacobian_norm"), "ratio" if converged else LOWER_BOUND)
        figures[f"{model_id} stream growth RMS(x_L)/RMS(x_0)"] = (values.get("stream_growth"), "ratio")
    return figures


def run_kind_of(recorded, track_name):
    """"training" or "diagnose" for a results.json whose track is `recorded`; None for another track's run."""
    if recorded in (None, track_name):
        return "training"
    if recorded == f"{track_name}-diagnose":
        return "diagnose"
    return None


def _fingerprint(results, config):
    """The run's data fingerprint (config.json); only its source where the run recorded none."""
    fingerprint = config.get("data_fingerprint")
    if isinstance(fingerprint, dict):
        return fingerprint
    return {"source": results.dataset} if results.dataset is not None else {}


# A fingerprint's fields as a student reads them (the others are shown with their own names).
FIELD_WORDS = {"train_images": "training images", "val_images": "validation images",
               "test_images": "test images", "train_chars": "training characters",
               "val_chars": "validation characters", "vocab_size": "characters in the vocabulary",
               "train_points": "training points", "classes": "classes"}
NOT_THE_DATA = ("source", "sha256", "banner")  # where the data came from and a hash: compared apart


def _field_word(key):
    return FIELD_WORDS.get(key, key.replace("_", " "))


def _field_value(value):
    """12000 -> "12,000"; a list of class names -> "10 (airplane, automobile, bird, ...)"."""
    if isinstance(value, (list, tuple)):
        names = ", ".join(str(item) for item in value[:3])
        return f"{len(value)} ({names}{', ...' if len(value) > 3 else ''})"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "—" if value is None else str(value)


def _amount(key, value):
    """("classes", [...]) -> "10 classes (airplane, automobile, bird, ...)"; ("test_images", 10000) -> "10,000 test images"."""
    text = _field_value(value)
    if isinstance(value, (list, tuple)):
        count, _, names = text.partition(" ")
        return f"{count} {_field_word(key)} {names}"
    return f"{text} {_field_word(key)}"


def data_differences(reference, run, title_of=str):
    """(same_data_set, sentence): how two runs' data compare, in words; never by local paths.

    `reference` and `run` are the runs' data fingerprints (config.json's
    `data_fingerprint`: source, sizes, classes or vocabulary, sha256), `title_of`
    names a source as a reader does. The same hash: the same data, read from
    wherever. The same classes and sizes but another hash: the same data set in
    another copy (a folder of JPEGs of it, say) or another subset. Anything else
    differs, and the sentence says what: the data sets and the fields that differ.
    """
    titles = [title_of(fingerprint.get("source")) if fingerprint.get("source") is not None else "?"
              for fingerprint in (reference, run)]
    where = "" if titles[0] == titles[1] else f"; the reference read {titles[0]}, this run {titles[1]}"
    if reference.get("sha256") and reference.get("sha256") == run.get("sha256"):
        return True, f"the same data as the reference, byte for byte{where}"
    fields = [key for key in dict.fromkeys([*reference, *run]) if key not in NOT_THE_DATA]
    differing = [key for key in fields if reference.get(key) != run.get(key)]
    if not differing and (fields or titles[0] == titles[1]):
        sizes = ", ".join(_amount(key, reference[key]) for key in fields if reference[key])
        return True, ("the same data set as the reference" + (f" ({sizes})" if sizes else "") +
                      ("" if not reference.get("sha256") else
                       ", though not byte for byte (another copy of it, from another source or in another "
                       "file format, or another random subset), which moves the numbers a little") + where)
    details = [f"{_field_word(key)}: {_field_value(reference.get(key))} in the reference, "
               f"{_field_value(run.get(key))} in this run" for key in differing]
    data_sets = ("" if titles[0] == titles[1] else
                 f"the reference used {titles[0]}, this run {titles[1]}" + ("; " if details else ""))
    return False, "other data than the reference's: " + data_sets + "; ".join(details)


def _describe(results, config, title_of):
    dataset = results.dataset_title or (title_of(results.dataset) if results.dataset else "?")
    return (f"{results.track or '?'}, {config.get('preset', '?')} preset, data "
            f"{dataset}, seed {config.get('seed', '?')}")


def compare_command(track, argv):
    """The `compare` command of a `Track`; returns the exit code (0, or 2 for bad input)."""
    parser = OneLineParser(
        prog=f"{track.prog} compare",
        description="Print a run's numbers beside a reference run's (docs/reference/...), with the "
                    "lab sheet's tolerance bands, and mark what lies outside them.")
    parser.add_argument("run", type=path_option, help="the run directory to check")
    parser.add_argument("reference", type=path_option, help=f"the reference run, e.g. docs/reference/{track.name}-...")
    args = parser.parse_args(argv)
    try:
        run, run_config = load_run(args.run, "RUN", track.name)
        reference, reference_config = load_run(args.reference, "REFERENCE", track.name)
        bands, rule = load_bands(args.reference)
        run, reference = typed(run, args.run, track.results), typed(reference, args.reference, track.results)
    except RunFileError as error:
        return fail(str(error))
    kinds = {name: run_kind_of(results.track, track.name)
             for name, results in (("RUN", run), ("REFERENCE", reference))}
    if kinds["RUN"] != kinds["REFERENCE"]:
        return fail(f"RUN {args.run} is {KIND_TEXT[kinds['RUN']]} and REFERENCE {args.reference} "
                    f"{KIND_TEXT[kinds['REFERENCE']]}: compare a diagnose run with a diagnose reference "
                    f"(docs/reference/{track.name}-diagnose-...) and a training run with a training reference")
    for name, results in (("RUN", run), ("REFERENCE", reference)):
        empty = _nothing_to_compare(results, kinds[name])
        if empty:
            return fail(f"{name} {getattr(args, name.lower())} {empty}: there is nothing to compare")
    configure_process(read_environment())  # the tracks' figures and findings may use Keras
    kind, title_of = kinds["RUN"], track.parts.data_title
    log(f"reference: {args.reference} ({_describe(reference, reference_config, title_of)})")
    log(f"this run:  {args.run} ({_describe(run, run_config, title_of)})")
    same_data, data_sentence = data_differences(_fingerprint(reference, reference_config),
                                                _fingerprint(run, run_config), title_of)
    log(f"data: {data_sentence}")
    differences = [key for key in (*SETUP_FIELDS, *track.setup_fields.get(kind, ()))
                   if reference_config.get(key) != run_config.get(key) and key in reference_config]
    if not same_data:
        differences.insert(0, "data")
    if differences:
        log(f"note: the runs differ in {', '.join(differences)}: the bands are for the reference's setup")
    if kind == "diagnose":  # nothing trained: the instruments' figures, no findings
        rows, outside = comparison_rows(initialisation_figures(reference), initialisation_figures(run), bands)
        verdicts = []
    else:
        rows, outside = comparison_rows(track.parts.figures(reference), track.parts.figures(run), bands)
        verdicts = verdict_rows(track.parts.findings(reference), track.parts.findings(run))
    print(text_table(["figure", "reference", "this run", "band", ""], rows))
    if verdicts:
        print()
        print(text_table(["finding", "reference", "this run", ""], verdicts))
    print()
    if any(row[1].startswith("≥") or row[2].startswith("≥") for row in rows):
        print("≥: a lower bound (the power iteration had not converged when it stopped)")
    if rule:
        print(f"bands: {rule}")
    print(f"{outside} of {sum(1 for row in rows if row[3] != '—')} values with a band lie outside it; "
          f"{sum(1 for row in verdicts if row[3])} of {len(verdicts)} findings differ from the reference")
    return 0


def _nothing_to_compare(results, kind):
    """Why a run has no figures to compare (a run that stopped before its first model finished), or None."""
    if kind == "training" and not results.models:
        return ("has no finished model (its results.json lists none: it stopped before the first one "
                "finished; continue it with --resume)")
    if kind == "diagnose" and not results.initialisation:
        return "has no measurements at initialisation (its results.json records none: it did not finish)"
    return None


def verdict_rows(reference_findings, run_findings):
    """[[finding, reference, this run, mark]] for each finding the run could judge."""
    theirs = {finding.title: finding.holds for finding in reference_findings if finding}
    rows = []
    for finding in run_findings:
        if finding is None or finding.holds is None:
            continue
        expected = theirs.get(finding.title)
        mark = "" if expected is None or expected == finding.holds else "DIFFERS"
        rows.append([finding.title, _verdict(expected), _verdict(finding.holds), mark])
    return rows


def _verdict(holds):
    return "—" if holds is None else ("holds" if holds else "does not hold")


__all__ = ["compare_command", "comparison_rows", "data_differences", "initialisation_figures", "load_bands",
           "load_run", "run_kind_of", "typed"]
