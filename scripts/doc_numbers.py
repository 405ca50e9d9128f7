"""One source for every measured number in the documentation: the committed reference runs.

Two ways a document carries a measurement, both checked by
tests/tracks/test_doc_numbers.py against docs/reference/<run>/results.json:

- a generated table, between `<!-- table: NAME -->` and `<!-- end table -->`:
  `python scripts/doc_numbers.py --write` writes it from the reference runs
  (TABLES below say how), and the check fails when the text differs;
- a number in the text, followed by a tag naming its source:
  `57.9%<!-- ref vision-cifar10-s0 models.plain-32.train_error % -->`. The
  path walks results.json (`models.ID` picks a model by its id;
  `reference.seconds` reads reference.json, the run's wall time); the format
  is `%` (a fraction as a percentage, one decimal), `%0` (no decimal), `.3f`,
  `.2f`, `.3g`, `int` (thousands separated), `s` (seconds, whole), `min`
  (seconds as minutes, one decimal), or
  `str` (a name, such as the best model's id), or
  `rootN/F` (the N-th root, formatted by F: a growth over N blocks as the
  growth per block). A list is indexed by position (`...block_weight_grad_norms.0`).
  The check fails when the number before the tag is not the formatted value.

On the pages a class reads (TIMED_PAGES: README.md, the lab sheets, the
handouts, the session plan, running.md) a run time is a measurement too: a
number followed by a time unit ("9.9 minutes") fails the check unless its tag
sits between them (`9.9<!-- ref vision-cifar10-s0 reference.seconds min --> minutes`)
or its line says it is an estimate.

    python scripts/doc_numbers.py            # check: exit 1 and one line per mismatch
    python scripts/doc_numbers.py --write    # rewrite every generated table
    python scripts/doc_numbers.py --fill     # set tagged numbers to their sources (then reread the text)
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `scripts.reference_runs` and the tracks, run from a checkout
from scripts.reference_runs import REFERENCE, TABLES, SourceError, formatted, lookup  # noqa: E402
TAG = re.compile(r"<!-- ref (?P<run>[\w.-]+) (?P<path>\S+) (?P<format>\S+) -->")
TABLE = re.compile(r"(<!-- table: (?P<name>[\w-]+)[^>]*-->\n)(?P<body>.*?)(<!-- end table -->)", re.S)
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
# A run time written without its tag: "10-15 minutes", "0.7 min", "40 s" (a tag between number and unit breaks it).
UNTAGGED_TIME = re.compile(r"\b\d[\d.,]*(?:\s*(?:-|to)\s*\d[\d.,]*)?\s*(?:minutes?|min|seconds?|s|hours?)\b")
TIMED_PAGES = ("README.md", "docs/lab_vision.md", "docs/lab_language.md", "docs/handout_vision.md",
               "docs/handout_language.md", "docs/session_plan.md", "docs/running.md")



# Checking and writing -----------------------------------------------------------------------------


def documents():
    """Every markdown file that may carry numbers: README.md and docs/ (not the runs' own summaries)."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [path for path in found if not (path.is_relative_to(REFERENCE) and path.name == "summary.md")]


def check_text(text, where):
    """One line per number or table in `text` that disagrees with its source."""
    problems = []
    previous_end = 0
    for match in TAG.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        # The number right before the tag: within 40 characters, and not inside the tag before it.
        before = NUMBER.findall(text[max(previous_end, match.start() - 40):match.start()])
        previous_end = match.end()
        try:
            expected = formatted(lookup(match["run"], match["path"]), match["format"])
        except SourceError as error:
            problems.append(f"{where}:{line}: {error}")
            continue
        if match["format"] == "str":
            if not text[:match.start()].endswith(expected):
                problems.append(f"{where}:{line}: the text before the tag is not {expected!r} "
                                f"({match['run']} {match['path']})")
            continue
        if not before or before[-1] != expected:
            got = before[-1] if before else "no number"
            problems.append(f"{where}:{line}: {got} where {match['run']} {match['path']} gives {expected}")
    for match in TABLE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        name = match["name"]
        if name not in TABLES:
            problems.append(f"{where}:{line}: no table generator {name!r}")
            continue
        try:
            expected = TABLES[name](None) + "\n"
        except SourceError as error:
            problems.append(f"{where}:{line}: table {name}: {error}")
            continue
        if match["body"] != expected:
            problems.append(f"{where}:{line}: table {name} differs from the reference runs "
                            "(python scripts/doc_numbers.py --write)")
    return problems


def untagged_times(text, where):
    """One line per run time in `text` written without its source tag (lines that say "estimate" excepted)."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if "estimate" in line:
            continue
        problems += [f"{where}:{number}: {match[0]!r} is a run time without its source "
                     "(tag it: NUMBER<!-- ref RUN reference.seconds min --> minutes)"
                     for match in UNTAGGED_TIME.finditer(line)]
    return problems


def check():
    problems = []
    for path in documents():
        problems += check_text(path.read_text(), path.relative_to(ROOT))
    for name in TIMED_PAGES:
        problems += untagged_times((ROOT / name).read_text(), name)
    return problems


def fill():
    """Sets every tagged number to its source's value (after a new reference run); read the text again after."""
    for path in documents():
        text = path.read_text()
        new = text
        matches = list(TAG.finditer(text))
        for index in reversed(range(len(matches))):
            match = matches[index]
            if match["format"] == "str":
                continue
            try:
                expected = formatted(lookup(match["run"], match["path"]), match["format"])
            except SourceError:
                continue
            window_start = max(matches[index - 1].end() if index else 0, match.start() - 40)
            numbers = list(NUMBER.finditer(new, window_start, match.start()))
            if numbers:
                last = numbers[-1]
                new = new[:last.start()] + expected + new[last.end():]
        if new != text:
            path.write_text(new)
            print(f"filled the tagged numbers of {path.relative_to(ROOT)}")


def write():
    for path in documents():
        text = path.read_text()
        new = TABLE.sub(lambda match: match.group(1) + TABLES[match["name"]](None) + "\n" + match.group(4), text)
        if new != text:
            path.write_text(new)
            print(f"wrote the tables of {path.relative_to(ROOT)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated tables")
    parser.add_argument("--fill", action="store_true",
                        help="set every tagged number to its source's value (then read the text again)")
    args = parser.parse_args(argv)
    if args.write:
        write()
    if args.fill:
        fill()
    problems = check()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
