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

from tracks.exercises.catalogue import BY_NUMBER, EXERCISES, checks_by_key

MISSING = "missing"


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
            import tomllib

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
        number = int(name) if str(name).isdigit() else None
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
                    or value < 0:
                raise ScoresError(f"--scores {path}: exercise {number}'s {key} must be a number >= 0, "
                                  f"got {value!r}")
        points[number] = {key: float(value) for key, value in checks.items()}
    return Scores(points, str(path))


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


def by_student(reports):
    """{student: {exercise number: Entry}} and {student: [reports of files that are no exercise]}, sorted."""
    students, unassigned = {}, {}
    for report in sorted(reports, key=lambda r: (r["student"], r["file"])):
        number = report["exercise"] or report.get("claimed") or _named_exercise(report["file"])
        students.setdefault(report["student"], {})
        if number is None:
            unassigned.setdefault(report["student"], []).append(report)
        else:
            students[report["student"]].setdefault(number, Entry([])).reports.append(report)
    return students, unassigned


def _points(value):
    return f"{value:g}"


def student_rows(reports, scores, exercises=None):
    """[{column: value}] of students.csv: one row per student, a cell per exercise, the total."""
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
        row["other files"] = "; ".join(report["file"] for report in unassigned.get(student, []))
        rows.append(row)
    return rows


def write_students_csv(path, rows, exercises=None):
    exercises = exercises or [exercise.number for exercise in EXERCISES]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["student", *(f"ex{n}" for n in exercises), "total", "counted",
                                         "other files"])
        writer.writeheader()
        writer.writerows(rows)


def _check_line(check, points):
    mark = "PASS" if check["passed"] else "FAIL"
    extra = " (optional, no points)" if check.get("optional") else f" ({_points(points)} point{'s' * (points != 1)})"
    line = f"- **{mark}** {check['name']}{extra}" + (f": {check['detail']}" if check["detail"] else "")
    if not check["passed"] and check.get("hint"):
        line += f"\n  - hint: {check['hint']}"
    return line


def feedback(student, entries, others, scores, exercises=None):
    """The text a student is sent: each exercise with its verdicts and hints, what was missing."""
    exercises = exercises or [exercise.number for exercise in EXERCISES]
    total = sum(scores.earned(entries[n].counted(scores)) for n in exercises if n in entries)
    possible = sum(scores.possible(n) for n in exercises)
    lines = [f"# Feedback for {student}", "", f"Total: {_points(total)} of {_points(possible)} points.", ""]
    for number in exercises:
        exercise = BY_NUMBER[number]
        lines += [f"## Exercise {number}: {exercise.title}", ""]
        entry = entries.get(number)
        if entry is None:
            lines += [f"Not handed in: no file with `EXERCISE = {number}` ({exercise.filename} to start from: "
                      f"`python -m tracks exercises start {number} DIR`).", ""]
            continue
        best = entry.counted(scores)
        for report in sorted(entry.reports, key=lambda r: r["file"]):
            earned = scores.earned(report)
            heading = f"`{report['file']}`: {_points(earned)} of {_points(scores.possible(number))} points"
            if len(entry.reports) > 1:
                heading += " (counted: the best of your files)" if report is best else " (not counted)"
            lines += [heading, ""]
            lines += [_check_line(check, scores.of(number, key)) for key, check in checks_by_key(report).items()]
            if report["reason"] and not report["reason"][0].isdigit():
                lines += ["", f"Why it stopped: {report['reason']}"]
            lines += [f"- note: {note}" for note in report.get("notes", [])]
            lines.append("")
    for report in others:
        lines += [f"## `{report['file']}`: not graded", "", report["reason"], ""]
        lines += [f"- hint: {check['hint']}" for check in report["checks"] if check.get("hint")]
        lines.append("")
    return "\n".join(lines)


def write_feedback(folder, reports, scores, exercises=None):
    """feedback/<student>.md for every student; returns the paths written."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    students, unassigned = by_student(reports)
    written = []
    for student, entries in students.items():
        path = folder / f"{_safe_name(student)}.md"
        path.write_text(feedback(student, entries, unassigned.get(student, []), scores, exercises))
        written.append(path)
    return written


def _safe_name(student):
    """A student's name as a file name: what a folder name may hold, without path separators."""
    return re.sub(r"[^\w.@+-]", "_", student) or "_"


# The learning platforms' gradebook imports -------------------------------------------------------

LMS = ("canvas", "moodle")


def _assignment(number):
    return f"Exercise {number}: {BY_NUMBER[number].title}"


def write_lms_csv(path, platform, rows, scores, exercises=None):
    """`platform`'s gradebook import file from students.csv's rows (docs/grading.md: the layout and its source).

    canvas: Student, ID, SIS User ID, SIS Login ID, Section, then one column per exercise, with a
    "Points Possible" row first; the student's folder name is written as Student and SIS Login ID. moodle:
    Username, then one column per exercise (points); the import maps Username to the user field of that
    name. A missing exercise is left empty: the platform's own rule for no submission applies.
    """
    exercises = exercises or [exercise.number for exercise in EXERCISES]

    def earned(row, number):
        cell = row[f"ex{number}"]
        return "" if cell == MISSING else cell.split("/")[0]

    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        if platform == "canvas":
            writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                             *(_assignment(n) for n in exercises)])
            writer.writerow(["Points Possible", "", "", "", "", *(_points(scores.possible(n)) for n in exercises)])
            for row in rows:
                writer.writerow([row["student"], "", "", row["student"], "", *(earned(row, n) for n in exercises)])
        elif platform == "moodle":
            writer.writerow(["Username", *(_assignment(n) for n in exercises)])
            for row in rows:
                writer.writerow([row["student"], *(earned(row, n) for n in exercises)])
        else:
            raise ValueError(f"no platform {platform!r}; there are {', '.join(LMS)}")


__all__ = ["LMS", "MISSING", "Scores", "ScoresError", "by_student", "feedback", "read_scores", "student_rows",
           "write_feedback", "write_lms_csv", "write_students_csv"]
