"""`python -m tracks grade DIR --out OUT`: a class graded into a gradebook.

OUT holds:
- grades.csv: one row per file: student, file, exercise, one column per check
  (pass, fail, or empty when the check is another exercise's), total, reason, notes;
- students.csv: one row per student, one column per exercise (points earned / possible, or
  `missing`), the total, and which file counted where there were several (students.py);
- feedback/<student>.md: each of the student's exercises with its verdicts and hints;
- canvas.csv, moodle.csv with `--lms`: students.csv as the platform's gradebook import takes it
  (with `--roster`, the platform's own ids: platforms.py);
- moodle_feedback.zip for a class collected from Moodle: the feedback as Moodle's feedback-files import
  takes it;
- grades.json: the same reports in full (details, hints), the seed and the limits;
- summary.md and checks.png: how many files passed each check, and for
  each exercise the most common failure with its hint;
- logs/<file>/stdout.txt and stderr.txt: what each file printed.

With `--exercises 1,3,5` (an assignment of some exercises) totals, students.csv, the feedback and the LMS
files count those exercises only; a file of another exercise is graded and reported as outside the assignment
(grades.csv's `assignment` column, the student's feedback and other files, summary.md), never counted. A class
written by `collect` (collected.csv) gives each file's late marker, kept in grades.csv and students.csv.

Interrupted (Ctrl-C, SIGTERM), a grading ends every file's processes and keeps
the files graded to the end in grades.csv, grades.json and summary.md, which
say the gradebook is partial; it writes no students.csv, feedback or LMS
file, which would count the files not graded as missing.
"""

import collections
import contextlib
import csv
import functools
import json
import os
import pathlib
import secrets
import sys
import time

from tracks.common.command import interruption, signals_held, take_interruption
from tracks.common.console import fail, warn
from tracks.common.option_ranges import out_problem
from tracks.common.run_directory import describe_os_error
from tracks.exercises.catalogue import BY_NUMBER, checks_by_key
from tracks.exercises.collect import CollectError, read_collected
from tracks.exercises.exercise import required
from tracks.exercises.grading import GradingInterrupted, grade_files, log_folders, student_of
from tracks.exercises.platforms import (MOODLE_FEEDBACK, RosterError, match, read_roster, write_lms_csv,
                                        write_moodle_feedback)
from tracks.exercises.students import (Scores, ScoresError, exercise_of, read_scores, student_rows, write_feedback,
                                       write_students_csv)
from tracks.exercises.submissions import SUFFIXES, printable


def class_files(folder):
    """Every *.py and *.ipynb under `folder`, recursively, in a stable order (caches and hidden folders, such as
    Jupyter's .ipynb_checkpoints, left out, and every link: `class_links` names those)."""
    return sorted(path for path in pathlib.Path(folder).rglob("*")
                  if path.suffix in SUFFIXES and path.is_file() and not path.is_symlink()
                  and not any(part.startswith((".", "__pycache__")) for part in path.relative_to(folder).parts))


def class_links(folder):
    """The links under `folder` that `class_files` leaves out: to a folder (rglob does not enter it), or named
    *.py or *.ipynb (that would be graded from whatever they point to: a student's link may point at the
    course's solutions), sorted; those in hidden folders left out, as `class_files` leaves them."""
    links = []
    for parent, folders, names in os.walk(folder):  # does not follow links to folders
        folders[:] = sorted(name for name in folders if not name.startswith((".", "__pycache__")))
        for name in sorted([*folders, *names]):
            path = pathlib.Path(parent) / name
            if path.is_symlink() and (name in folders or path.suffix in SUFFIXES) and not name.startswith("."):
                links.append(path)
    return links


def columns(reports):
    """[(exercise number, check key, column name)] for the exercises present, in exercise order."""
    present = sorted({report["exercise"] for report in reports if report["exercise"]})
    return [(number, spec.key, f"ex{number} {spec.key}{' (optional)' if spec.optional else ''}")
            for number in present for spec in BY_NUMBER[number].checks]


def assignment_cell(report, exercises=None):
    """grades.csv's `assignment`: "in" for a file of an assigned exercise, "outside" for another exercise's
    (graded, never counted), "" for a file that is no exercise."""
    number = exercise_of(report)
    return "" if number is None else "in" if exercises is None or number in exercises else "outside"


def write_csv(path, rows, reports, exercises=None):
    header = columns(reports)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "file", "exercise", *(name for _, _, name in header), "total", "reason",
                         "notes", "late", "assignment"])
        for row, report in zip(rows, reports):
            results = checks_by_key(report)
            cells = [("pass" if results[key]["passed"] else "fail") if number == report["exercise"] else ""
                     for number, key, _ in header]
            checks = required(report["checks"])  # the total counts what a file must pass
            passed = sum(check["passed"] for check in checks)
            writer.writerow([row["student"], row["file"], report["exercise"] or "", *cells,
                             f"{passed}/{len(checks)}", report["reason"], "; ".join(report.get("notes", [])),
                             row.get("late", ""), assignment_cell(report, exercises)])


def tally(reports):
    """{exercise: {"files", "passed", "checks": [(name, passed, failed)], "common": (name, count, hint) or None}}."""
    summary = {}
    for number in sorted({report["exercise"] for report in reports if report["exercise"]}):
        mine = [report for report in reports if report["exercise"] == number]
        specs = BY_NUMBER[number].checks
        counts = [(f"{'(optional) ' if spec.optional else ''}{spec.name}", sum(r["checks"][i]["passed"] for r in mine),
                   sum(not r["checks"][i]["passed"] for r in mine)) for i, spec in enumerate(specs)]
        needed = [count for count, spec in zip(counts, specs) if not spec.optional]
        worst, common = max(needed, key=lambda count: count[2]), None
        if worst[2]:
            hints = collections.Counter(c["hint"] for r in mine for c in required(r["checks"])
                                        if not c["passed"] and c["name"] == worst[0])
            common = (worst[0], worst[2], hints.most_common(1)[0][0])
        summary[number] = {"files": len(mine), "passed": sum(r["passed"] for r in mine), "checks": counts,
                           "common": common}
    return summary


# What each item of a file's confinement (harness/runner.py, harness/landlock.py) left it able to do.
CONFINED_WORDS = {"files read": ("read only Python's, the system's and its own folders (not the grader's checks "
                                 "and references)"),
                  "files written": "write only in its own folder",
                  "TCP": "use no TCP",
                  "signals": "signal no process outside itself (the grader and its supervisor included)"}


def confinement_line(reports):
    """What the files' processes could not do (Landlock), in one sentence, from what they reported."""
    seen = [report["confinement"] for report in reports if report.get("confinement")]
    confined = collections.Counter(tuple(entry["confined"]) for entry in seen)
    if not seen:
        return "No file's process reported its confinement."
    if len(confined) == 1 and next(iter(confined)):
        could = [CONFINED_WORDS[item] for item in next(iter(confined))]
        return (f"Each file's process ({len(seen)} of {len(reports)} files) was confined by Landlock (ABI "
                f"{seen[0].get('abi')}) before the file was imported: it could {', '.join(could[:-1])} and "
                f"{could[-1]} (docs/grading.md).")
    whys = sorted({entry.get("why") or "partly" for entry in seen if not entry["confined"]})
    return (f"Not every file's process was confined by Landlock ({sum(n for w, n in confined.items() if w)} of "
            f"{len(seen)}; {'; '.join(whys) or 'different ABIs'}): a file could read and write what this user "
            f"can, reach the network and signal the grader. Grade in a container (docs/grading.md).")


def assignment_lines(reports, exercises):
    """summary.md's sentences on an assignment of some exercises: what counts, and the files outside it."""
    if exercises is None:
        return []
    others = [report for report in reports if assignment_cell(report, exercises) == "outside"]
    lines = [f"The assignment is exercises {', '.join(map(str, exercises))} (--exercises): the totals, "
             f"students.csv, the feedback and the LMS files count these only."]
    if others:
        lines[0] += (f" {len(others)} file{'s' * (len(others) != 1)} of other exercises, graded and not "
                     f"counted (outside the assignment): "
                     + ", ".join(f"{r['file']} (exercise {exercise_of(r)})" for r in others) + ".")
    return lines + [""]


def write_summary(path, figure, reports, seed, limits, seconds, partial=None, exercises=None, extra=()):
    """summary.md; `partial`: a sentence that says the gradebook is partial, first, or None; `exercises`: the
    assignment (None: every exercise); `extra`: paragraphs after the first lines (the roster's)."""
    summary = tally(reports)
    ungraded = [report for report in reports if not report["exercise"]]
    stopped = collections.Counter(report["reason"].split(":")[0] for report in reports
                                  if report["reason"] and not report["reason"][0].isdigit()
                                  and report["exercise"])
    lines = ["# Gradebook" + (" (partial)" if partial else ""), "", *([partial, ""] if partial else []),
             f"{len(reports)} files, {sum(r['passed'] for r in reports)} passed every required check; seed {seed}; "
             f"limits {limits.seconds:g} s and {limits.memory_gb:g} GiB per file; graded in {seconds:.0f} s.", ""]
    lines += [confinement_line(reports), ""]
    lines += assignment_lines(reports, exercises)
    lines += [line for paragraph in extra for line in (paragraph, "")]
    if stopped:
        lines += ["Files that did not run to the end: " + ", ".join(f"{n} {why}" for why, n in stopped.most_common())
                  + " (grades.csv's reason column says which).", ""]
    if ungraded:
        lines += [f"{len(ungraded)} files are no exercise (no EXERCISE = N line, or a syntax error).", ""]
    lines += [f"![How many files passed each check]({figure.name})", ""]
    for number, entry in summary.items():
        beyond = " (outside the assignment: graded, not counted)" if exercises and number not in exercises else ""
        lines += [f"## Exercise {number}: {BY_NUMBER[number].title}{beyond}", "",
                  f"{entry['passed']} of {entry['files']} files passed every required check"
                  + (" (an optional extra is graded in a column of its own, not needed to pass)."
                     if any(spec.optional for spec in BY_NUMBER[number].checks) else "."), "",
                  "| check | passed | failed |", "| --- | --- | --- |"]
        for name, passed, failed in entry["checks"]:
            escaped = name.replace("|", "\\|")  # a check's name may hold a norm, ||J||
            lines.append(f"| {escaped} | {passed} | {failed} |")
        if entry["common"]:
            name, count, hint = entry["common"]
            lines += ["", f"Most common failure: **{name}** ({count} of {entry['files']} files). Its hint: {hint}"]
        lines.append("")
    path.write_text("\n".join(lines))


def plot(path, reports):
    """A bar per check: how many files passed it (and failed it), grouped by exercise."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = tally(reports)
    labels, passed, failed = [], [], []
    for number, entry in summary.items():
        for name, good, bad in entry["checks"]:
            labels.append(f"ex{number}: {name if len(name) < 60 else name[:57] + '...'}")
            passed.append(good)
            failed.append(bad)
    height = max(2.5, 0.32 * len(labels) + 1.2)
    figure, axes = plt.subplots(figsize=(10, height), layout="constrained")
    rows = list(range(len(labels)))[::-1]
    axes.barh(rows, passed, color="#009E73", label="passed")
    axes.barh(rows, failed, left=passed, color="#D55E00", label="failed")
    axes.set_yticks(rows, labels, fontsize=8)
    axes.set_xlabel("files")
    axes.set_title("How many files passed each check", pad=28)
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
    axes.xaxis.get_major_locator().set_params(integer=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def file_row(path, folder):
    """A file's student and its path under the class `folder`, as the gradebook writes them (`printable`)."""
    return {"student": printable(student_of(path, folder)), "file": printable(path.relative_to(folder).as_posix())}


def write_partial(out, files, folder, done, seed, limits, jobs, seconds, exercises=None):
    """The files graded before an interruption (`done`: index -> report) as a gradebook marked partial, the grades
    first (`write_in_order`: `NotWhole` names what could not be written); `exercises`: the assignment, as in
    `grade_class`."""
    graded = sorted(done)
    reports = [done[index] for index in graded]
    rows = [file_row(files[index], folder) for index in graded]
    for row, report in zip(rows, reports):
        report.update(student=row["student"], file=row["file"])
    logs = log_folders(files, folder)
    for index in range(len(files)):  # the logs of a file cut short: its report was not kept
        if index not in done:  # its own two files only: another file's logs may lie below (ana/ex3/, ana/ex3.py)
            for name in ("stdout.txt", "stderr.txt"):
                (out / "logs" / logs[index] / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                (out / "logs" / logs[index]).rmdir()
    missing = [path.relative_to(folder) for index, path in enumerate(files) if index not in done]
    missing = [printable(path.as_posix()) for path in missing]
    book = {"seed": seed, "limits": {"seconds": limits.seconds, "memory_gb": limits.memory_gb}, "jobs": jobs,
            "seconds": round(seconds, 1), "partial": True, "exercises": exercises, "not_graded": missing,
            "files": reports}
    partial = (f"**Partial: the grading was interrupted after {len(reports)} of {len(files)} files.** Not graded: "
               f"{', '.join(missing)}. No students.csv, feedback or LMS file was written; grade the class again for "
               f"them.")
    write_in_order(out, [
        ("grades.json", lambda: (out / "grades.json").write_text(json.dumps(book, indent=1))),
        ("grades.csv", lambda: write_csv(out / "grades.csv", rows, reports, exercises)),
        ("summary.md", lambda: write_summary(out / "summary.md", out / "checks.png", reports, seed, limits, seconds,
                                             exercises=exercises, partial=partial)),
        *([("checks.png", lambda: plot(out / "checks.png", reports))] if reports else [])])


def grade_class(folder, out, *, seed=None, jobs=1, limits, scores=None, lms=(), confined=True, roster=None,
                exercises=None):
    """Grades every *.py and *.ipynb under `folder` into the gradebook `out`; 0 when written, 2 for bad input (a
    link inside `folder` among it, `class_links`), 130 or 143 when interrupted (a partial gradebook, `write_partial`),
    1 when a file of the gradebook could not be written (a full disk: `NotWhole`'s line names it and the rest).

    `scores`: a scores file (TOML or JSON, `students.read_scores`) or None for a point per check; `lms`:
    the platforms whose import files are written too (`platforms.LMS`); `confined=False`: every file as a
    plain process (sandbox.run_unconfined), where the process sandbox cannot run; `roster`: the platform's
    export the students are matched to (`platforms.read_roster`), or None; `exercises`: the assignment's
    exercise numbers, or None for every exercise.
    """
    folder, out = pathlib.Path(folder), pathlib.Path(out)
    if not folder.is_dir():
        return fail(f"{folder} is a file, not a folder: give the class's folder (check one file with python -m "
                    f"tracks check FILE)" if folder.exists() else f"no such folder: {folder}")
    links = class_links(folder)
    if links:
        return fail(f"{links[0]} is a link{f' (and {len(links) - 1} more)' if len(links) > 1 else ''}: the grader "
                    f"follows no link in a class (a student's could point at the solutions); copy what it points "
                    f"to into the class (cp -rL), or delete it")
    files = class_files(folder)
    if not files:
        return fail(f"no *.py or *.ipynb file under {folder}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return fail(f"{out} exists and is not an empty folder: choose a new --out, or delete it")
    if out.resolve().is_relative_to(folder.resolve()):
        return fail(f"--out {out} is inside {folder}: the gradebook would be graded next time")
    problem = out_problem(out)
    if problem:
        return fail(problem)
    try:
        scores = Scores() if scores is None else read_scores(scores)
        collected = read_collected(folder)
        roster = None if roster is None else read_roster(roster)
    except (ScoresError, CollectError, RosterError) as error:
        return fail(str(error))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a place os.access allows and the kernel does not (/proc, /sys, a read-only mount)
        return fail(f"--out {out}: cannot create {describe_os_error(error)}; choose another --out")
    seed = secrets.randbelow(2**31) if seed is None else seed
    print(f"grading {len(files)} files from {folder}, {jobs} at a time, seed {seed}"
          + (f", exercises {', '.join(map(str, exercises))}" if exercises else ""), file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        reports = grade_files(files, seed=seed, limits=limits, out=out, jobs=jobs, root=folder, confined=confined)
    except GradingInterrupted as stopped:
        with signals_held():
            take_interruption()
            word, code = interruption(stopped.cause)
            try:
                write_partial(out, files, folder, stopped.reports, seed, limits, jobs, time.monotonic() - started,
                              exercises)
            except NotWhole as error:
                warn(f"{word}: {len(stopped.reports)} of {len(files)} files graded, but {error}")
                return code
        print(f"{word}: {len(stopped.reports)} of {len(files)} files graded, kept in {out}/grades.csv, grades.json "
              f"and summary.md, marked partial (no students.csv, feedback or LMS file); every file's process "
              f"was ended", file=sys.stderr, flush=True)
        return code
    seconds = time.monotonic() - started
    rows = [file_row(path, folder) for path in files]
    matched = None if roster is None else match(roster, sorted({row["student"] for row in rows}), collected)
    late = lateness(rows, collected, matched)
    for row, report in zip(rows, reports):
        report.update(student=row["student"], file=row["file"], late=row["late"],
                      assignment=assignment_cell(report, exercises))
    with signals_held():  # every file is graded: the gradebook is written whole
        try:
            written = write_gradebook(out, rows, reports, scores, lms, seed, limits, jobs, seconds,
                                      exercises=exercises, matched=matched, collected=collected, late=late)
        except NotWhole as error:  # the grades are written before what is made from them
            warn(f"error: {error}")
            return 1
    for line in matched.lines() if matched else []:
        print(line, file=sys.stderr, flush=True)
    print(f"wrote {out}/{', '.join(written['files'])}: {sum(r['passed'] for r in reports)} of {len(reports)} "
          f"files passed every required check, {len(written['students'])} students ({seconds:.0f} s)",
          file=sys.stderr, flush=True)
    return 0


def lateness(rows, collected, matched):
    """Each row's `late` ("yes", "no" or "": nothing says) from collected.csv, else from the roster (Moodle's
    Status); returns {student: "yes" when a file was late, "no" when none was and one is known, else ""}."""
    for row in rows:
        known = collected.late.get(row["file"], "") if collected else ""
        person = matched.people.get(row["student"]) if matched else None
        row["late"] = known or (person.late if person else "")
    students = {}
    for row in rows:
        marks = students.setdefault(row["student"], set())
        marks.add(row["late"])
    return {student: "yes" if "yes" in marks else "no" if "no" in marks else "" for student, marks in students.items()}


def roster_paragraphs(matched):
    """summary.md's part on the roster: how the students were matched, who was not."""
    if matched is None:
        return []
    lines = matched.lines()
    return [f"Roster: {lines[0].removeprefix('roster ')}."] + [f"{line[0].upper()}{line[1:]}." for line in lines[1:]]


class NotWhole(Exception):
    """A file of the gradebook could not be written (a full disk): the one line names what was not."""


def write_in_order(out, steps):
    """Runs `steps` ([(file's name, function that writes it)]) in order; returns the names written. An `OSError`
    stops them: `NotWhole` then says which file failed, what was not written and what was kept in `out`."""
    written = []
    for index, (name, write) in enumerate(steps):
        try:
            write()
        except OSError as error:
            missing = ", ".join(later for later, _ in steps[index:])
            kept = f"kept: {', '.join(written)}" if written else "nothing was kept"
            raise NotWhole(f"cannot write {describe_os_error(error)}: {missing} not written in {out} ({kept}); "
                           f"free some space, then grade the class again for them") from None
        written.append(name)
    return written


def write_gradebook(out, rows, reports, scores, lms, seed, limits, jobs, seconds, *, exercises=None, matched=None,
                    collected=None, late=None):
    """Every file of a whole class's gradebook (the module's docstring): the grades first, the figure last
    (`write_in_order`); returns {"files": the names written, "students": students.csv's rows}."""
    students = student_rows(reports, scores, exercises, late)
    roster = None if matched is None else {
        "source": matched.roster.source, "platform": matched.roster.platform, "matched_by_name": matched.by_name,
        "not_in_roster": matched.lacking, "no_submission": [person.name for person in matched.absent]}
    book = {"seed": seed, "limits": {"seconds": limits.seconds, "memory_gb": limits.memory_gb}, "jobs": jobs,
            "seconds": round(seconds, 1), "scores": scores.source, "exercises": exercises, "roster": roster,
            "files": reports}
    feedback = {}  # student -> the feedback file written, for Moodle's zip
    moodle = collected and any(layout == "moodle" for _, _, layout in collected.students.values())
    steps = [("grades.json", lambda: (out / "grades.json").write_text(json.dumps(book, indent=1))),
             ("grades.csv", lambda: write_csv(out / "grades.csv", rows, reports, exercises)),
             ("students.csv", lambda: write_students_csv(out / "students.csv", students, exercises)),
             ("feedback/", lambda: feedback.update(write_feedback(out / "feedback", reports, scores, exercises))),
             *((f"{platform}.csv", functools.partial(write_lms_csv, out / f"{platform}.csv", platform, students,
                                                     scores, exercises, matched)) for platform in lms),
             *([(MOODLE_FEEDBACK, lambda: write_moodle_feedback(out / MOODLE_FEEDBACK, feedback, collected))]
               if moodle else []),
             ("summary.md", lambda: write_summary(out / "summary.md", out / "checks.png", reports, seed, limits,
                                                  seconds, exercises=exercises, extra=roster_paragraphs(matched))),
             ("checks.png", lambda: plot(out / "checks.png", reports))]
    return {"files": write_in_order(out, steps), "students": students}


__all__ = ["NotWhole", "assignment_cell", "class_files", "class_links", "columns", "grade_class", "lateness", "plot",
           "tally", "write_csv", "write_in_order", "write_summary"]
