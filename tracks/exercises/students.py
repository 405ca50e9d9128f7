"""Grades per student: points per check, the file that counts, students.csv, feedback/ and the platforms' CSVs.

A file's score is the sum of the points of the required checks it passed
(an optional extra earns none). Each check is worth 1 point unless a scores
file (`--scores FILE`) says otherwise. A student's grade for an exercise is
that of the best of their files for it (the most points; of equal ones, the
first in name order); the table names the file that counted when there were
several. A file that cannot be graded (a syntax error, a broken notebook,
no `EXERCISE = N`) counts, with 0 points, for the exercise its text says
(an `EXERCISE = N` line read as text) or else its name starts with
(`ex3_...`, the skeleton's name), so that the student is told why;
otherwise it is listed in the student's feedback only.
"""

import csv
import dataclasses
import json
import math
import pathlib
import re
import tomllib

from tracks.exercises.catalogue import BY_NUMBER, EXERCISES, checks_by_key

MISSING = "missing"
# The most points a scores file may give one check: a course's points are far fewer, and below it every sum of
# a class's points is an exact, finite number (above it, 1e308 points a check summed to inf: a grade of 0/inf).
MAX_POINTS = 1_000_000


class ScoresError(ValueError):
    """A scores file that cannot be used: one line for the user."""


@dataclasses.dataclass(frozen=True)
class Scores:
    """Points per required check: {exercise number: {check key: points}}; 1 for a check not named."""

    points: dict = dataclasses.field(default_factory=dict)
    source: str = None  # the file they came from, or None for equal points

    def of(self, number, key):
        return self.points.get(number, {}).get(key, 1.0)

    def possible(self, number):
        return sum(self.of(number, spec.key) for spec in BY_NUMBER[number].checks if not spec.optional)

    def earned(self, report):
        """The points of the required checks `report` passed (0 for a file that is no exercise)."""
        return sum(self.of(report["exercise"], key) for key, check in checks_by_key(report).items()
                   if check["passed"] and not check.get("optional"))


def read_scores(path):
    """The `Scores` of a TOML or JSON file; `ScoresError` in one line for anything wrong with it.

    The file names exercises and the points of their checks (any check not named is worth 1):

        [1]            # TOML; JSON: {"1": {"shape": 2, "residual": 3}}
        shape = 2
        residual = 3
    """
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ScoresError(f"--scores {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ScoresError(f"--scores {path}: not UTF-8 text") from None
    try:
        if path.suffix == ".json":
            table = json.loads(text)
        elif path.suffix == ".toml":
            table = tomllib.loads(text)
        else:
            raise ScoresError(f"--scores {path}: give a .toml or .json file")
    except (ValueError, TypeError) as error:
        if isinstance(error, ScoresError):
            raise
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ScoresError(f"--scores {path}: cannot be read ({first})") from None
    if not isinstance(table, dict):
        raise ScoresError(f"--scores {path}: must be a table of exercises, got {type(table).__name__}")
    points = {}
    for name, checks in table.items():
        number = int(name) if re.fullmatch(r"[0-9]+", str(name)) else None  # not "²": isdigit, and no int
        if number not in BY_NUMBER:
            raise ScoresError(f"--scores {path}: no exercise {name!r}; there are {', '.join(map(str, BY_NUMBER))}")
        if not isinstance(checks, dict):
            raise ScoresError(f"--scores {path}: exercise {number} must map check keys to points")
        keys = {spec.key: spec for spec in BY_NUMBER[number].checks}
        for key, value in checks.items():
            if key not in keys or keys[key].optional:
                listed = ", ".join(spec.key for spec in BY_NUMBER[number].checks if not spec.optional)
                why = "is optional and earns no points" if key in keys else "is no check of it"
                raise ScoresError(f"--scores {path}: exercise {number}'s {key!r} {why}; its checks: {listed}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= MAX_POINTS:
                raise ScoresError(f"--scores {path}: exercise {number}'s {key} must be a number in "
                                  f"0..{MAX_POINTS:,}, got {value!r}")
        points[number] = {key: float(value) for key, value in checks.items()}
    return Scores(points, str(path.resolve()))  # the gradebook says which file, wherever it is read


def _named_exercise(file):
    """The exercise a file's name says it is (`ex3...`, as the skeleton is named), or None."""
    found = re.match(r"ex(\d+)(?!\d)", pathlib.Path(file).name)
    number = int(found.group(1)) if found else None
    return number if number in BY_NUMBER else None


@dataclasses.dataclass
class Entry:
    """One student's grade for one exercise: the files handed in for it and the one that counts."""

    reports: list

    def counted(self, scores):
        """The report that counts: the most points, then the first in name order."""
        return max(sorted(self.reports, key=lambda r: r["file"]), key=scores.earned)


def exercise_of(report):
    """The exercise a file's grade counts for: the one it was graded as, else the one its text or its name says
    (a file that cannot be graded), else None."""
    return report["exercise"] or report.get("claimed") or _named_exercise(report["file"])


def by_student(reports):
    """{student: {exercise number: Entry}} and {student: [reports of files that are no exercise]}, sorted."""
    students, unassigned = {}, {}
    for report in sorted(reports, key=lambda r: (r["student"], r["file"])):
        number = exercise_of(report)
        students.setdefault(report["student"], {})
        if number is None:
            unassigned.setdefault(report["student"], []).append(report)
        else:
            students[report["student"]].setdefault(number, Entry([])).reports.append(report)
    return students, unassigned


def _points(value):
    return f"{value:g}"


def outside(entries, exercises):
    """[(number, Entry)] of a student's exercises that are not part of the assignment `exercises`."""
    return [(number, entry) for number, entry in sorted(entries.items()) if number not in exercises]


def _outside_words(report, exercises):
    return (f"{report['file']} (exercise {exercise_of(report)}: outside the assignment of exercises "
            f"{', '.join(map(str, exercises))})")


def student_rows(reports, scores, exercises=None, late=None):
    """[{column: value}] of students.csv: one row per student, a cell per exercise of the assignment, the total,
    the files that counted, the other files (no exercise, or an exercise outside the assignment: graded, never
    counted) and whether the student was late (`late`: {student: "yes", "no" or ""}; "" where nothing says)."""
    exercises = exercises or [exercise.number for exercise in EXERCISES]
    students, unassigned = by_student(reports)
    rows = []
    for student, entries in students.items():
        row, earned, counted = {"student": student}, 0.0, []
        for number in exercises:
            entry = entries.get(number)
            if entry is None:
                row[f"ex{number}"] = MISSING
                continue
            best = entry.counted(scores)
            points = scores.earned(best)
            earned += points
            row[f"ex{number}"] = f"{_points(points)}/{_points(scores.possible(number))}"
            if len(entry.reports) > 1:
                counted.append(f"ex{number}: {best['file']} (best of {len(entry.reports)})")
        row["total"] = f"{_points(earned)}/{_points(sum(scores.possible(n) for n in exercises))}"
        row["counted"] = "; ".join(counted)
        others = [report["file"] for report in unassigned.get(student, [])]
        others += [_outside_words(report, exercises) for _, entry in outside(entries, exercises)
                   for report in sorted(entry.reports, key=lambda r: r["file"])]
        row["other files"] = "; ".join(others)
        row["late"] = (late or {}).get(student, "")
        rows.append(row)
    return rows


def write_students_csv(path, rows, exercises=None):
    exercises = exercises or [exercise.number for exercise in EXERCISES]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["student", *(f"ex{n}" for n in exercises), "total", "counted",
                                         "other files", "late"])
        writer.writeheader()
        writer.writerows(rows)


def _check_line(check, points):
    mark = "PASS" if check["passed"] else "FAIL"
    extra = " (optional, no points)" if check.get("optional") else f" ({_points(points)} point{'s' * (points != 1)})"
    line = f"- **{mark}** {check['name']}{extra}" + (f": {check['detail']}" if check["detail"] else "")
    if not check["passed"] and check.get("hint"):
        line += f"\n  - hint: {check['hint']}"
    return line


def _verdicts(report, number, scores, heading):
    """A file's part of the feedback: its heading, each check's verdict, why it stopped, its notes."""
    lines = [heading, ""]
    lines += [_check_line(check, scores.of(number, key)) for key, check in checks_by_key(report).items()]
    if report["reason"] and not report["reason"][0].isdigit():
        lines += ["", f"Why it stopped: {report['reason']}"]
    lines += [f"- note: {note}" for note in report.get("notes", [])]
    return lines + [""]


def feedback(student, entries, others, scores, exercises=None):
    """The text a student is sent: each exercise of the assignment with its verdicts and hints, what was
    missing, and the files of other exercises, graded and not counted."""
    assignment = exercises or [exercise.number for exercise in EXERCISES]
    total = sum(scores.earned(entries[n].counted(scores)) for n in assignment if n in entries)
    possible = sum(scores.possible(n) for n in assignment)
    lines = [f"# Feedback for {student}", "", f"Total: {_points(total)} of {_points(possible)} points"
             + (f" (exercises {', '.join(map(str, assignment))})." if exercises else "."), ""]
    for number in assignment:
        exercise = BY_NUMBER[number]
        lines += [f"## Exercise {number}: {exercise.title}", ""]
        entry = entries.get(number)
        if entry is None:
            lines += [f"Not handed in: no file with `EXERCISE = {number}` ({exercise.filename} to start from: "
                      f"`python -m tracks exercises start {number} DIR`).", ""]
            continue
        best = entry.counted(scores)
        for report in sorted(entry.reports, key=lambda r: r["file"]):
            heading = (f"`{report['file']}`: {_points(scores.earned(report))} of "
                       f"{_points(scores.possible(number))} points")
            if len(entry.reports) > 1:
                heading += " (counted: the best of your files)" if report is best else " (not counted)"
            lines += _verdicts(report, number, scores, heading)
    for number, entry in outside(entries, assignment):
        lines += [f"## Exercise {number}: {BY_NUMBER[number].title} (outside this assignment)", "",
                  f"This assignment is exercises {', '.join(map(str, assignment))}: your file for exercise "
                  f"{number} was graded, and its points are not counted.", ""]
        for report in sorted(entry.reports, key=lambda r: r["file"]):
            lines += _verdicts(report, number, scores, f"`{report['file']}`: {_points(scores.earned(report))} "
                                                       f"of {_points(scores.possible(number))} points, not counted")
    for report in others:
        lines += [f"## `{report['file']}`: not graded", "", report["reason"], ""]
        lines += [f"- hint: {check['hint']}" for check in report["checks"] if check.get("hint")]
        lines.append("")
    return "\n".join(lines)


def write_feedback(folder, reports, scores, exercises=None):
    """feedback/<student>.md for every student; returns {student: the path written}."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    students, unassigned = by_student(reports)
    written = {}
    for student, entries in students.items():
        path = folder / f"{_safe_name(student)}.md"
        path.write_text(feedback(student, entries, unassigned.get(student, []), scores, exercises),
                        encoding="utf-8")
        written[student] = path
    return written


def _safe_name(student):
    """A student's name as a file name: what a folder name may hold, without path separators."""
    return re.sub(r"[^\w.@+-]", "_", student) or "_"


__all__ = ["MISSING", "Scores", "ScoresError", "by_student", "exercise_of", "feedback", "outside", "read_scores",
           "student_rows", "write_feedback", "write_students_csv"]
