"""The committed reference runs (docs/reference/<run>/) as the documentation reads them.

`results(run)` reads a run's results.json as its track's `RunResults`
(tracks/common/results.py, the track found in tracks/registry.py),
`lookup(run, path)` a value of it (or of reference.json), `formatted(value, style)` writes a value as a page
shows it; scripts/reference_tables.py builds the pages' generated tables from them. scripts/doc_numbers.py
checks the pages against both and rewrites the tables.
"""

import dataclasses
import json
import math
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tracks' finding functions, run from a checkout
REFERENCE = ROOT / "docs" / "reference"


class SourceError(ValueError):
    """A tag or table that names no value of a reference run."""


def results(run):
    """The reference run's results.json, typed by its track (a `RunResults`)."""
    from tracks.registry import track

    path = REFERENCE / run / "results.json"
    if not path.is_file():
        raise SourceError(f"no reference run {run!r} (no {path.relative_to(ROOT)})")
    data = json.loads(path.read_text())
    return track(data["track"]).results.from_json(data)


def lookup(run, path):
    """The value at `path` in a reference run's results.json (`reference.KEY`: in its reference.json,
    `config.KEY`: in its config.json; `A/B`: the value at A divided by the value at B); for a `run` named
    `measurements/NAME`, in docs/measurements/NAME.json (scripts/time_session.py writes one).

    Dot-separated: a field of the results or of a model, a key of a study;
    `models.ID` picks a model by its id, a number a list's item, `mean` a list's mean.
    """
    if "/" in path:
        numerator, denominator = (lookup(run, part) for part in path.split("/", 1))
        try:
            return numerator / denominator
        except (TypeError, ZeroDivisionError):
            raise SourceError(f"{run}: {path} is not a ratio of two numbers") from None
    files = {"reference.": "reference.json", "config.": "config.json"}
    prefix = next((prefix for prefix in files if path.startswith(prefix)), None)
    if run.startswith("measurements/"):  # a record of measurements that are no run (docs/measurements/NAME.json)
        record = ROOT / "docs" / f"{run}.json"
        if not record.is_file():
            raise SourceError(f"no measurement record {run!r} (no {record.relative_to(ROOT)})")
        value = json.loads(record.read_text())
        for key in path.split("."):
            if not isinstance(value, dict) or key not in value:
                raise SourceError(f"{run}: no {path}")
            value = value[key]
        return value
    if prefix:
        about = REFERENCE / run / files[prefix]
        if not about.is_file():
            raise SourceError(f"no reference run {run!r} (no {about.relative_to(ROOT)})")
        value, path = json.loads(about.read_text()), path[len(prefix):]
    else:
        value = results(run)
    for key in path.split("."):
        if isinstance(value, list) and key == "mean":  # the mean of a list of numbers (per-block norms)
            numbers = [item for item in value if isinstance(item, (int, float))]
            if not numbers:
                raise SourceError(f"{run}: {path} is not a list of numbers")
            value = sum(numbers) / len(numbers)
            continue
        if isinstance(value, list) and re.fullmatch(r"-?\d+", key):
            try:
                value = value[int(key)]
            except IndexError:
                raise SourceError(f"{run}: {path} has no item {key}") from None
            continue
        if isinstance(value, list):
            found = [item for item in value if getattr(item, "id", None) == key]
            if not found:
                raise SourceError(f"{run}: no model {key!r} in {path}")
            value = found[0]
        elif dataclasses.is_dataclass(value) and hasattr(value, key):
            value = getattr(value, key)
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise SourceError(f"{run}: {path} has no {key!r}")
    return value


def config_keys():
    """Every key of the reference runs' config.json files (a page writes a config value as "`KEY` VALUE")."""
    return {key for path in REFERENCE.glob("*/config.json") for key in json.loads(path.read_text())}


TEXT_FORMATS = ("str", "json", "cpu")  # words, not numbers: the text before the tag must end with them


def formatted(value, style):
    """`value` as a page writes it in `style` (scripts/doc_numbers.py lists the styles)."""
    if style == "str":
        return str(value)
    if style == "json":  # a list or a value as config.json writes it: [0, 100], true
        return json.dumps(value)
    if style == "cpu":  # reference.json's machine, "2 cores (AMD EPYC), Linux ..., Python ...": its cores and CPU
        return str(value).split(", ")[0]
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    root = re.fullmatch(r"root(\d+)/(.+)", style)  # the per-block factor of a growth over N blocks
    if root:
        return formatted(value ** (1 / int(root[1])), root[2])
    if style == "%":
        return f"{100 * value:.1f}"
    if style == "%0":
        return f"{100 * value:.0f}"
    if style == "int":
        return f"{int(round(value)):,}"
    if style == "s":
        return f"{value:.0f}"
    if style == "min":
        return f"{value / 60:.1f}"
    if style.startswith("."):
        return format(value, style)
    raise SourceError(f"unknown format {style!r}")
