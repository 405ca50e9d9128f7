"""`python -m tracks.X compare RUN REFERENCE`: a run's numbers beside a reference run's, with bands.

An instructor checks a class's runs against the reference runs committed in
docs/reference/ (one per preset and data set). For every figure both runs
have (a model's training or test error, a validation loss, a gradient gain
at initialisation, each finding's verdict) the command prints the
reference's value, the run's, the tolerance band the lab sheet gives (the
reference folder's `bands.json`) and marks a value outside its band. A mark
is a reason to look (other data, options, hardware), not a failure: the
findings' verdicts are what should hold.

Each track says which figures it has (`figures_of(results)`: name -> (value,
unit)) and which findings (`findings_of(results, config)`: the track's
Finding list); this module knows no track.
"""

import argparse
import json
import math
import pathlib

from tracks.common.console import fail, log
from tracks.common.report import format_value, text_table
from tracks.common.run_dir import RunFileError, read_json

UNITS = {"percent": "percent", "nats": "float", "ratio": "ratio", "fraction": "percent"}


def _value_text(value, unit):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
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


def load_run(path, what):
    """(results, config) of a run directory; RunFileError (one line) when it is not one."""
    path = pathlib.Path(path)
    if not (path / "results.json").is_file():
        raise RunFileError(f"{what} {path}: no results.json there, not a run directory")
    results = read_json(path / "results.json", "pass a finished run's directory")
    config = read_json(path / "config.json", "pass a finished run's directory") if (
        path / "config.json").is_file() else {}
    if not isinstance(results, dict) or not isinstance(results.get("models"), list):
        raise RunFileError(f"{path / 'results.json'} does not describe a run (no list of models)")
    return results, config


def load_bands(reference):
    """{figure: (low, high)} and the rule that made them, from REFERENCE/bands.json (empty if none)."""
    path = pathlib.Path(reference) / "bands.json"
    if not path.is_file():
        return {}, None
    data = read_json(path, "restore it from the repository")
    return {name: tuple(band) for name, band in data.get("bands", {}).items()}, data.get("rule")


def comparison_rows(reference_figures, run_figures, bands):
    """[[figure, reference, this run, band, mark]] and the number of values outside their bands."""
    rows, outside = [], 0
    for name, (reference_value, unit) in reference_figures.items():
        value = run_figures.get(name, (None, unit))[0]
        band = bands.get(name)
        mark = ""
        if band is not None and value is not None and math.isfinite(value):
            if not band[0] <= value <= band[1]:
                mark, outside = "OUTSIDE", outside + 1
        elif name not in run_figures:
            mark = "not in this run"
        rows.append([name, _value_text(reference_value, unit), _value_text(value, unit),
                     _band_text(band, unit) if band else "—", mark])
    return rows, outside


def _describe(results, config):
    return (f"{results.get('track', '?')}, {config.get('preset', '?')} preset, data "
            f"{results.get('dataset', '?')}, seed {config.get('seed', '?')}")


def compare_command(track, argv):
    """The `compare` command of a `Track`; returns the exit code (0, or 2 for bad input)."""
    figures_of, findings_of = track.comparison_figures, track.findings
    parser = argparse.ArgumentParser(
        prog=f"{track.prog} compare",
        description="Print a run's numbers beside a reference run's (docs/reference/...), with the "
                    "lab sheet's tolerance bands, and mark what lies outside them.")
    parser.add_argument("run", help="the run directory to check")
    parser.add_argument("reference", help=f"the reference run, e.g. docs/reference/{track.name}-...")
    args = parser.parse_args(argv)
    try:
        run, run_config = load_run(args.run, "RUN")
        reference, reference_config = load_run(args.reference, "REFERENCE")
        bands, rule = load_bands(args.reference)
    except RunFileError as error:
        return fail(str(error))
    for name, results in (("RUN", run), ("REFERENCE", reference)):
        if results.get("track") not in (None, track.name):
            return fail(f"{name} {getattr(args, name.lower())} is a {results.get('track')!r} run, not a "
                        f"{track.name!r} run: compare runs of this track")
    log(f"reference: {args.reference} ({_describe(reference, reference_config)})")
    log(f"this run:  {args.run} ({_describe(run, run_config)})")
    differences = [key for key in ("preset", "variants", "depths", "epochs", "steps")
                   if reference_config.get(key) != run_config.get(key) and key in reference_config]
    if reference.get("dataset") != run.get("dataset"):
        differences.insert(0, "data")
    if differences:
        log(f"note: the runs differ in {', '.join(differences)}: the bands are for the reference's setup")
    rows, outside = comparison_rows(figures_of(reference), figures_of(run), bands)
    verdicts = []
    theirs = {finding.title: finding.holds for finding in findings_of(reference, reference_config) if finding}
    for finding in findings_of(run, run_config):
        if finding is None or finding.holds is None:
            continue
        expected = theirs.get(finding.title)
        mark = "" if expected is None or expected == finding.holds else "DIFFERS"
        verdicts.append([finding.title, _verdict(expected), _verdict(finding.holds), mark])
    print(text_table(["figure", "reference", "this run", "band", ""], rows))
    if verdicts:
        print()
        print(text_table(["finding", "reference", "this run", ""], verdicts))
    print()
    if rule:
        print(f"bands: {rule}")
    print(f"{outside} of {sum(1 for row in rows if row[3] != '—')} values with a band lie outside it; "
          f"{sum(1 for row in verdicts if row[3])} of {len(verdicts)} findings differ from the reference")
    return 0


def _verdict(holds):
    return "—" if holds is None else ("holds" if holds else "does not hold")


def write_bands(path, bands, rule, sources):
    """Writes a reference's bands.json (sorted, for diffs)."""
    pathlib.Path(path).write_text(json.dumps(
        {"rule": rule, "sources": sources, "bands": {key: list(bands[key]) for key in sorted(bands)}},
        indent=1) + "\n")


__all__ = ["compare_command", "comparison_rows", "load_bands", "load_run", "write_bands"]
