"""The learning platforms' side of a gradebook: the roster, the import files and the feedback that goes back.

- A roster (`grade --roster FILE`) is the platform's own export: Canvas's
  gradebook export (Student, ID, SIS User ID, SIS Login ID, Section, then
  the assignments, and a "Points Possible" row) or Moodle's grading
  worksheet (Identifier "Participant 123456", Full name, Email address,
  Status, ...; a Status that says "... late" marks a late submission).
- The class's students are matched to it by the id `collect` recorded (the
  Canvas user id, the Moodle participant id), else by name, compared without
  case, accents, punctuation or word order; the students matched by name,
  those the roster lacks and the roster's students with no submission are
  listed.
- canvas.csv and moodle.csv take students.csv's rows in the layout of each
  platform's gradebook import (docs/grading.md gives the layouts and their
  sources); with a roster, canvas.csv carries its Student, ID, SIS User ID,
  SIS Login ID and Section, and moodle.csv is keyed by its Email address.
- moodle_feedback.zip: each student's feedback named as Moodle's
  feedback-files import reads a name (mod/assign/feedback/file/importziplib.php):
  `<full name>_<participant id>_assignfeedback_file_feedback.md`.
"""

import csv
import dataclasses
import pathlib
import re
import unicodedata
import zipfile

from tracks.exercises.catalogue import BY_NUMBER, EXERCISES

LMS = ("canvas", "moodle")
MISSING = "missing"  # students.csv's cell for an exercise with no file (students.MISSING)
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_COLUMNS = ("Identifier", "Full name")
# Moodle's English strings: `submittedlateshort` ("{$a} late") in the grading worksheet's Status column.
MOODLE_LATE = re.compile(r"\blate\b", re.IGNORECASE)


class RosterError(ValueError):
    """A roster that cannot be used: one line for the user."""


@dataclasses.dataclass(frozen=True)
class Person:
    """One student of the roster, as the platform wrote them."""

    name: str
    id: str
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""
    late: str = ""  # "yes" or "no" from Moodle's Status; "" where the roster says nothing (Canvas)

    def ids(self):
        return {value for value in (self.id, self.sis_user_id, self.sis_login_id, self.email) if value}


@dataclasses.dataclass(frozen=True)
class Roster:
    platform: str  # "canvas" or "moodle": whose export it is
    source: str
    people: tuple


def read_roster(path):
    """The `Roster` of a Canvas gradebook export or a Moodle grading worksheet; `RosterError` in one line."""
    path = pathlib.Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            rows = [(reader.line_num, row) for row in reader if row]  # (its last line in the file, its cells)
    except OSError as error:
        raise RosterError(f"--roster {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise RosterError(f"--roster {path}: not UTF-8 text (export it again as CSV)") from None
    except csv.Error as error:
        raise RosterError(f"--roster {path}: not a CSV file ({error})") from None
    if not rows:
        raise RosterError(f"--roster {path}: empty")
    header = [cell.strip() for cell in rows[0][1]]
    records = [dict(zip(header, (cell.strip() for cell in row))) for _, row in rows[1:]]
    if {"Student", "ID"} <= set(header):
        _check_rows(path, header, rows, ("Student", "ID"))
        people = [Person(record["Student"], record["ID"], record.get("SIS User ID", ""),
                         record.get("SIS Login ID", ""), record.get("Section", ""))
                  for record in records if record.get("ID", "").isdigit()]  # not the "Points Possible" row
        platform = "canvas"
    elif set(MOODLE_COLUMNS) <= set(header):
        _check_rows(path, header, rows, MOODLE_COLUMNS)
        people = []
        for record in records:
            found = re.search(r"(\d+)\s*$", record.get("Identifier", ""))
            if found:
                status = record.get("Status", "")
                late = ("yes" if MOODLE_LATE.search(status) else "no") if "Status" in header else ""
                people.append(Person(record["Full name"], found.group(1), email=record.get("Email address", ""),
                                     late=late))
        platform = "moodle"
    else:
        raise RosterError(f"--roster {path}: neither Canvas's gradebook export (Student, ID, SIS User ID, ...) nor "
                          f"Moodle's grading worksheet (Identifier, Full name, ...); its columns: "
                          f"{', '.join(header[:8]) or 'none'}")
    if not people:
        raise RosterError(f"--roster {path}: {platform}'s layout, but no student in it (no row with a numeric "
                          f"{'ID' if platform == 'canvas' else 'Identifier'})")
    return Roster(platform, str(path.resolve()), tuple(people))  # the gradebook names it wherever it is read


def _check_rows(path, header, rows, needed):
    """`RosterError` naming the first row (after the header) too short to hold every column of `needed`."""
    last = max(header.index(column) for column in needed)
    for line, row in rows[1:]:
        if len(row) <= last:
            raise RosterError(f"--roster {path}, line {line}: {len(row)} of the header's {len(header)} columns, no "
                              f"{header[last]!r}: a truncated row (export the roster again as CSV)")


def name_keys(name):
    """The ways one name is compared: without case, accents or punctuation, in its order and in sorted order
    ("Doe, Jane", "doejane" and "Jane Doe" share one)."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c)).casefold()
    words = re.findall(r"[^\W_]+", plain)
    return {key for key in ("".join(words), "".join(sorted(words))) if key}


@dataclasses.dataclass
class Match:
    """The class's students against a roster: {student folder: Person}, and what did not match."""

    roster: Roster
    people: dict
    by_name: list  # student folders matched by name, not by id
    lacking: list  # student folders the roster lacks (or whose name fits several of its students)
    absent: list  # the roster's people with no submission

    def lines(self):
        """What a person reads of the match: the roster's platform and each list, one line each."""
        said = [f"roster {self.roster.source} ({self.roster.platform}): {len(self.people)} of "
                f"{len(self.people) + len(self.lacking)} students matched, {len(self.by_name)} of them by name"
                + (f" ({', '.join(self.by_name)})" if self.by_name else "")]
        if self.lacking:
            said.append(f"not in the roster: {', '.join(self.lacking)} (their LMS rows keep the folder's name)")
        if self.absent:
            said.append(f"in the roster with no submission: {', '.join(p.name for p in self.absent)}")
        return said


def match(roster, students, collected=None):
    """Matches each student folder to a `Person`: by the id collect recorded where the layout is the roster's
    platform (or a --pattern's id against any of the roster's ids), else by name."""
    identities = collected.students if collected else {}
    people, by_name, lacking, taken = {}, [], [], set()
    unmatched = []
    for student in students:
        name, identifier, layout = identities.get(student, (student, "", None))
        same = layout == roster.platform
        found = [person for person in roster.people if identifier and (
            person.id == identifier if same else layout == "pattern" and identifier in person.ids())]
        if len(found) == 1 and found[0] not in taken:
            people[student] = found[0]
            taken.add(found[0])
        else:
            unmatched.append((student, name))
    for student, name in unmatched:
        keys = name_keys(name) | name_keys(student)
        found = [person for person in roster.people if person not in taken and keys & name_keys(person.name)]
        if len(found) == 1:
            people[student] = found[0]
            taken.add(found[0])
            by_name.append(student)
        else:
            lacking.append(student)
    absent = [person for person in roster.people if person not in taken]
    return Match(roster, people, sorted(by_name), sorted(lacking), absent)


# The gradebook imports ------------------------------------------------------------------------------


def _assignment(number):
    return f"Exercise {number}: {BY_NUMBER[number].title}"


def _points(value):
    return f"{value:g}"


def write_lms_csv(path, platform, rows, scores, exercises=None, matched=None):
    """`platform`'s gradebook import file from students.csv's rows (docs/grading.md: the layout and its source).

    canvas: Student, ID, SIS User ID, SIS Login ID, Section, then one column per exercise, with a
    "Points Possible" row first; a student `matched` to a Canvas roster gets the roster's five, any other
    student its folder's name as Student and SIS Login ID. moodle: the key, then one column per exercise:
    the roster's Email address where a Moodle roster gives one (the import maps it to the user field
    "email address"), else the folder's name as Username. A missing exercise is left empty: the platform's
    own rule for no submission applies.
    """
    exercises = exercises or [exercise.number for exercise in EXERCISES]
    people = matched.people if matched and matched.roster.platform == platform else {}  # no Moodle id in Canvas

    def earned(row, number):
        cell = row[f"ex{number}"]
        return "" if cell == MISSING else cell.split("/")[0]

    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if platform == "canvas":
            writer.writerow([*CANVAS_IDENTITY, *(_assignment(n) for n in exercises)])
            writer.writerow(["Points Possible", "", "", "", "", *(_points(scores.possible(n)) for n in exercises)])
            for row in rows:
                person = people.get(row["student"])
                identity = ([person.name, person.id, person.sis_user_id, person.sis_login_id, person.section]
                            if person else [row["student"], "", "", row["student"], ""])
                writer.writerow([*identity, *(earned(row, n) for n in exercises)])
        elif platform == "moodle":
            by_email = bool(people) and any(person.email for person in matched.roster.people)
            writer.writerow(["Email address" if by_email else "Username", *(_assignment(n) for n in exercises)])
            for row in rows:
                person = people.get(row["student"])
                key = (person.email if person else "") if by_email else row["student"]
                writer.writerow([key, *(earned(row, n) for n in exercises)])
        else:
            raise ValueError(f"no platform {platform!r}; there are {', '.join(LMS)}")


# Feedback that goes back ------------------------------------------------------------------------------

MOODLE_FEEDBACK = "moodle_feedback.zip"


def moodle_feedback_name(name, identifier):
    """The name Moodle's feedback-files import gives to participant `identifier` (importziplib.php splits it at
    its first four `_`: full name, participant id, assignfeedback, file, the file's own name)."""
    clean = (name.replace("_", " ").replace("/", " ").strip() or "Participant")
    return f"{clean}_{identifier}_assignfeedback_file_feedback.md"


def write_moodle_feedback(path, written, collected):
    """moodle_feedback.zip: feedback/<student>.md of each student collected from Moodle, under the name its
    import gives to that participant; returns the students it holds."""
    held = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for student, feedback in sorted(written.items()):
            name, identifier, layout = collected.students.get(student, ("", "", None))
            if layout == "moodle" and identifier.isdigit():
                archive.write(feedback, moodle_feedback_name(name, identifier))
                held.append(student)
    return held


__all__ = ["LMS", "MOODLE_FEEDBACK", "Match", "Person", "Roster", "RosterError", "match", "moodle_feedback_name",
           "name_keys", "read_roster", "write_lms_csv", "write_moodle_feedback"]
