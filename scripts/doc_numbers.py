"""One source for every measured number in the documentation: the committed reference runs.

Two ways a page carries a measurement, both checked against
docs/reference/<run>/ (tests/tracks/test_doc_numbers.py runs the check):

- a generated table, between `<!-- table: NAME -->` and `<!-- end table -->`:
  `python scripts/doc_numbers.py --write` writes it from the reference runs
  (scripts/reference_tables.py's TABLES say how), and the check fails when the text differs;
- a number in the text, followed by a tag naming its source:
  `57.9%<!-- ref vision-cifar10-s0 models.plain-32.train_error % -->`. The
  path walks results.json (`models.ID` picks a model by its id; a number a
  list's item: `...block_weight_grad_norms.0`), `reference.KEY` reads the
  run's reference.json (`reference.seconds`: its wall time), `config.KEY` its
  config.json, and `A/B` divides two such values. The format is `%` (a
  fraction as a percentage, one decimal), `%0` (no decimal), `.3f`, `.2f`,
  `.3g`, `int` (thousands separated), `s` (seconds, whole), `min` (seconds as
  minutes, one decimal), `rootN/F` (the N-th root, formatted by F: a growth
  over N blocks as the growth per block), or, for words, `str` (the value as
  written, such as the best model's id or a config value), `json` (a list as
  config.json writes it) and `cpu` (the reference machine's cores and CPU).
  The check fails when the number (or words) before the tag is not the
  formatted value.

The pages are README.md, every page of docs/ (not the runs' own summaries)
and the notebooks' markdown cells. The pages a student reads (STUDENT_PAGES)
are checked further, so that a number or a path typed by hand is caught:

- a run time ("9.9 minutes") needs its tag between number and unit
  (`9.9<!-- ref vision-cifar10-s0 reference.seconds min --> minutes`), unless
  its line says it is an estimate;
- a growth factor ("x1.07 per layer") needs its tag, or, for a number a
  test states, a test tag naming the test file that holds it
  (`x1.25<!-- test tests/library/test_diagnostics.py -->`);
- a config value ("`epochs` 10", a key of a reference run's config.json in
  backticks, then its value) needs its tag (`config.epochs`);
- a path of the repository (`docs/...`, `tracks/...`) must exist, and no
  path may lead outside the repository (a `../` that leaves it or names
  nothing in it; a place only the development machines have, MACHINE_PLACES):
  notebooks' code cells included.

    python scripts/doc_numbers.py            # check: exit 1 and one line per mismatch
    python scripts/doc_numbers.py --write    # rewrite every generated table
    python scripts/doc_numbers.py --fill     # set tagged numbers to their sources (then reread the text)
"""

import argparse
import dataclasses
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `scripts.reference_runs` and the tracks, run from a checkout
from scripts.reference_runs import (  # noqa: E402
    REFERENCE, TEXT_FORMATS, SourceError, config_keys, formatted, lookup)
from scripts.reference_tables import TABLES  # noqa: E402

TAG = re.compile(r"<!-- ref (?P<run>[\w./-]+) (?P<path>\S+) (?P<format>\S+) -->")
TABLE = re.compile(r"(<!-- table: (?P<name>[\w-]+)[^>]*-->\n)(?P<body>.*?)(<!-- end table -->)", re.S)
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
# A run time written without its tag: "10-15 minutes", "0.7 min", "40 s" (a tag between number and unit breaks it).
UNTAGGED_TIME = re.compile(r"\b\d[\d.,]*(?:\s*(?:-|to)\s*\d[\d.,]*)?\s*(?:minutes?|min|seconds?|s|hours?)\b")
# A growth factor, "x1.07" (not "64x64", not "2^50 x 10^-50"), not followed by its tag.
UNTAGGED_GROWTH = re.compile(r"(?<![\w.^])x\d+\.\d+(?![\d.]|<!-- (?:ref|test) )")
# A number a test states (a threshold, a bound): `x1.25<!-- test tests/library/test_diagnostics.py -->`.
TEST_TAG = re.compile(r"<!-- test (?P<path>\S+) -->")
# "`epochs` 8", "`init` `xavier`", "`warmup_steps` [0, 100]": a key in backticks, then its value.
CONFIG_VALUE = re.compile(r"`(?P<key>[a-z][a-z0-9_]*)`\s+(?P<value>\[[^\]\n]*\]|`[^`\n]+`|[-+]?\d[\d.e+-]*\b|true|false)")
CODE_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)
# A path of the repository, root-relative as the pages write them ("docs/experiments/vision.md").
REPOSITORY_FOLDERS = ("benchmarks", "docs", "notebooks", "residual_keras", "scripts", "solutions", "tests", "tracks")
REPOSITORY_PATH = re.compile(r"(?<![\w./~$<>-])(?P<path>(?:%s)/[\w./-]*[\w/])(?P<after>.?.?.?)" % "|".join(REPOSITORY_FOLDERS))
CLIMBING_PATH = re.compile(r"(?<![\w./~$<>-])(?P<path>(?:\.\./)+[\w.-][\w./-]*)")
ABSOLUTE_PATH = re.compile(r"(?<![\w.~$<>-])(?P<path>/[\w.-]+(?:/[\w.-]*)*)")
# Places on the machines this project is developed on that no user has: the folder that holds the
# checkout, its shared data and scratch, and root's home (the machines run as root; a page writes `~`).
MACHINE_PLACES = ("/work/", "/root/")

STUDENT_PAGES = ("README.md", "docs/students.md", "docs/handout_vision.md", "docs/handout_language.md",
                 "docs/lab_vision.md", "docs/lab_language.md", "docs/session_plan.md", "docs/running.md",
                 "docs/exercises.md", "docs/course_vs_measured.md", "notebooks/vision.ipynb",
                 "notebooks/language.ipynb")


@dataclasses.dataclass(frozen=True)
class Part:
    """A piece of a page: a markdown file's text, or one cell of a notebook."""

    where: str  # "docs/lab_vision.md" or "notebooks/vision.ipynb cell 20"
    text: str
    kind: str  # "markdown" or "code"
    folder: pathlib.Path  # where the page's relative paths start


# Reading the pages -------------------------------------------------------------------------------


def documents():
    """Every page that may carry numbers: README.md, docs/ (not the runs' own summaries), the notebooks."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb"))]
    return [path for path in found if not (path.is_relative_to(REFERENCE) and path.name == "summary.md")]


def parts(path, text=None):
    """The `Part`s of a page (`text`: the page's content, read from `path` when None)."""
    path = pathlib.Path(path)
    text = path.read_text() if text is None else text
    name = page_name(path)
    if path.suffix != ".ipynb":
        return [Part(name, text, "markdown", path.parent)]
    cells = json.loads(text)["cells"]
    return [Part(f"{name} cell {index}", "".join(cell["source"]), cell["cell_type"], path.parent)
            for index, cell in enumerate(cells) if cell["cell_type"] in ("markdown", "code")]


def page_name(path):
    path = pathlib.Path(path)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _rewrite(path, change):
    """Applies `change(text) -> text` to a page's markdown (a notebook: each markdown cell); True if it changed."""
    text = path.read_text()
    if path.suffix != ".ipynb":
        new = change(text)
    else:
        notebook = json.loads(text)
        for cell in notebook["cells"]:
            if cell["cell_type"] == "markdown":
                cell["source"] = change("".join(cell["source"])).splitlines(keepends=True)
        new = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"  # as nbformat writes it
    if new != text:
        path.write_text(new)
    return new != text


# Checking ----------------------------------------------------------------------------------------


def _expected(match):
    return formatted(lookup(match["run"], match["path"]), match["format"])


def _ends_with_words(text, words):
    """Whether `text` (a closing backtick aside) ends with `words`, not with a longer word or number."""
    text = text[:-1] if text.endswith("`") else text
    if not text.endswith(words):
        return False
    before = text[:len(text) - len(words)]
    return not before or not (before[-1].isalnum() or before[-1] in "._-")


def check_text(text, where):
    """One line per tagged number or generated table in `text` that disagrees with its source."""
    problems = []
    previous_end = 0
    for match in TAG.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        # The number right before the tag: within 40 characters, and not inside the tag before it.
        before = NUMBER.findall(text[max(previous_end, match.start() - 40):match.start()])
        previous_end = match.end()
        try:
            expected = _expected(match)
        except SourceError as error:
            problems.append(f"{where}:{line}: {error}")
            continue
        if match["format"] in TEXT_FORMATS:
            if not _ends_with_words(text[:match.start()], expected):
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


def _prose(text):
    """`text` with its generated tables and fenced code blocks blanked (line numbers kept)."""
    blank = lambda match: "\n" * match[0].count("\n")  # noqa: E731
    return CODE_BLOCK.sub(blank, TABLE.sub(blank, text))


def _lines(text):
    return enumerate(_prose(text).splitlines(), 1)


def untagged_times(text, where):
    """One line per run time in `text` written without its source tag (lines that say "estimate" excepted)."""
    problems = []
    for number, line in _lines(text):
        if "estimate" in line:
            continue
        problems += [f"{where}:{number}: {match[0]!r} is a run time without its source "
                     "(tag it: NUMBER<!-- ref RUN reference.seconds min --> minutes)"
                     for match in UNTAGGED_TIME.finditer(line)]
    return problems


def untagged_growth(text, where):
    """One line per growth factor ("x1.07") in `text` without its source tag."""
    return [f"{where}:{number}: {match[0]!r} is a growth factor without its source "
            "(tag it: xNUMBER<!-- ref RUN PATH rootN/.3g -->)"
            for number, line in _lines(text) for match in UNTAGGED_GROWTH.finditer(line)]


def untagged_config(text, where):
    """One line per config value ("`epochs` 10": a key of a reference run's config.json) without its tag."""
    keys, prose = config_keys(), _prose(text)
    return [f"{where}:{prose.count(chr(10), 0, match.start()) + 1}: `{match['key']}` {match['value']} is a config "
            f"value without its source (tag it: VALUE<!-- ref RUN config.{match['key']} str -->)"
            for match in CONFIG_VALUE.finditer(prose)
            if match["key"] in keys and not prose.startswith("<!-- ref ", match.end())]


def tested_numbers(text, where):
    """One line per number tagged with a test (`1.25<!-- test tests/x.py -->`) that the test does not hold."""
    problems = []
    for match in TEST_TAG.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = NUMBER.findall(text[max(0, match.start() - 40):match.start()])
        test = ROOT / match["path"]
        if not test.is_file():
            problems.append(f"{where}:{line}: {match['path']} is not in the repository")
        elif not before or before[-1] not in NUMBER.findall(test.read_text()):
            problems.append(f"{where}:{line}: {before[-1] if before else 'no number'} is not a number of "
                            f"{match['path']}")
    return problems


def outside_paths(text, where, folder):
    """One line per path in `text` that leads outside the repository (`folder`: where its `../` start)."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in CLIMBING_PATH.finditer(line):
            path = match["path"]
            target = (folder / path).resolve()
            if not (target.is_relative_to(ROOT) and target.exists()):
                named = "nothing in it" if target.is_relative_to(ROOT) else target
                problems.append(f"{where}:{number}: {path} leads outside the repository (from "
                                f"{page_name(folder)}/ it names {named})")
        for match in ABSOLUTE_PATH.finditer(line):
            if f"{match['path']}/".startswith(MACHINE_PLACES):
                problems.append(f"{where}:{number}: {match['path']} is a place on one machine, outside the "
                                "repository: no user has it")
    return problems


def repository_paths(text, where):
    """One line per path of the repository ("docs/experiments/vision.md") in `text` that does not exist."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in REPOSITORY_PATH.finditer(line):
            if match["after"].startswith(("<", "*", "{", "...", "-...")) or match["path"].endswith("/..."):
                continue  # a pattern: docs/reference/<run>/, runs/vision-...
            path = match["path"].rstrip(".")
            if not (ROOT / path).exists():
                problems.append(f"{where}:{number}: {path} is not in the repository")
    return problems


def check_part(part, student=False):
    """Every problem of one `Part` (`student`: the stricter rules of the pages a student reads)."""
    problems = check_text(part.text, part.where) + tested_numbers(part.text, part.where) if (
        part.kind == "markdown") else []
    if student:
        if part.kind == "markdown":
            problems += untagged_times(part.text, part.where)
            problems += untagged_growth(part.text, part.where)
            problems += untagged_config(part.text, part.where)
        problems += outside_paths(part.text, part.where, part.folder)
        problems += repository_paths(part.text, part.where)
    return problems


def check_page(path, text=None):
    """Every problem of one page (`text`: its content, read from `path` when None)."""
    student = page_name(path) in STUDENT_PAGES
    return [problem for part in parts(path, text) for problem in check_part(part, student)]


def check():
    problems = []
    for path in documents():
        problems += check_page(path)
    missing = [name for name in STUDENT_PAGES if not (ROOT / name).is_file()]
    return problems + [f"{name}: a student page that does not exist (STUDENT_PAGES)" for name in missing]


# Writing -----------------------------------------------------------------------------------------


def _filled(text):
    matches = list(TAG.finditer(text))
    new = text
    for index in reversed(range(len(matches))):
        match = matches[index]
        if match["format"] in TEXT_FORMATS:
            continue
        try:
            expected = _expected(match)
        except SourceError:
            continue
        window_start = max(matches[index - 1].end() if index else 0, match.start() - 40)
        numbers = list(NUMBER.finditer(new, window_start, match.start()))
        if numbers:
            last = numbers[-1]
            new = new[:last.start()] + expected + new[last.end():]
    return new


def fill():
    """Sets every tagged number to its source's value (after a new reference run); read the text again after."""
    for path in documents():
        if _rewrite(path, _filled):
            print(f"filled the tagged numbers of {page_name(path)}")


def write():
    table = lambda text: TABLE.sub(  # noqa: E731
        lambda match: match.group(1) + TABLES[match["name"]](None) + "\n" + match.group(4), text)
    for path in documents():
        if _rewrite(path, table):
            print(f"wrote the tables of {page_name(path)}")


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
    print(f"{len(problems)} mismatches in {len(documents())} pages "
          f"({sum(1 for name in STUDENT_PAGES if (ROOT / name).is_file())} of them a student reads)",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
