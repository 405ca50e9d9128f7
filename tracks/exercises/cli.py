"""`python -m tracks exercises`, `check FILE...` and `grade DIR --out OUT`: start, check, grade a class.

    python -m tracks exercises                   # the list
    python -m tracks exercises start 1 mywork/   # writes exercise 1's file into mywork/
    python -m tracks check mywork/ex1_residual_layer.py [--json] [--seed S]
    python -m tracks autograder --out autograder.zip [--exercises 1,3,5] [--scores FILE]
                                [--visibility V] [--stdout-visibility V]
    python -m tracks release --out DIR [--without-wheel]   # the students' edition (release.py)
    python -m tracks collect DOWNLOAD --out CLASS [--layout canvas|moodle|auto] [--pattern REGEX]   # collect.py
    python -m tracks grade submissions/ --out gradebook/ [--jobs 2] [--timeout 120] [--memory-gb 4]
                           [--scores scores.toml] [--lms canvas] [--lms moodle] [--roster FILE]
                           [--exercises 1,3,5]

`check` and `grade` run each file in its own process with the same limits
and the same checks (tracks/exercises/sandbox.py, grading.py); the verdicts
are computed here, from the values the file's code sent back. A file says
which exercise it is (`EXERCISE = N`, as the skeleton does). Where the
Linux process sandbox cannot run (macOS, Windows), `check` runs a student's
own file as a plain process and says so in one line; `grade`, which runs
other people's files, refuses there unless given `--allow-unconfined`.
Exit codes: `check` 0 when every check of every file passed, 1 when one
failed; `grade` 0 when the gradebook is written; both 2 for bad input, in
one line; Ctrl-C 130 and SIGTERM 143, in one line, every file's process
ended (`grade` keeps the files graded before it: gradebook.py).
"""

import argparse
import json
import math
import pathlib
import secrets
import sys
import tempfile

from tracks.common.command import errors_of_a_signal, interruption, signals_as_interruptions, take_interruption
from tracks.common.config import path_option, whole
from tracks.common.console import fail
from tracks.common.limits import usable_cores
from tracks.common.option_ranges import nearest_existing, whole_number
from tracks.common.run_directory import describe_os_error, refuse_a_long_path
from tracks.exercises.catalogue import BY_NUMBER, EXERCISES
from tracks.exercises.exercise import required
from tracks.exercises.sandbox import (MAX_DISK_MB, MAX_MEMORY_GB, MAX_SECONDS, MIN_DISK_MB, MIN_MEMORY_GB,
                                      MIN_SECONDS, SubmissionLimits, limits_problem, sandbox_problem,
                                      unconfined_words)
from tracks.exercises.submissions import shell_word

# The sandbox for a whole class where the process sandbox cannot run (docs/grading.md, "A container").
DOCKER_GRADE = ('docker run --rm --network none -v "$PWD/submissions:/class:ro" -v "$PWD/gradebook:/book" '
                'residual-keras:cpu python -m tracks grade /class --out /book/run1')
# grade --jobs: the most files at once per core the grader may use. A file's --timeout counts wall time, so
# far more files than cores would time out right answers (docs/grading.md, --jobs).
JOBS_PER_CORE = 4


def list_exercises():
    print("The course's self-test as exercises. Start one with: python -m tracks exercises start N DIR\n")
    for exercise in EXERCISES:
        print(f"  {exercise.number}. {exercise.title}")
        print(f"     self-test {exercise.self_test}; file {exercise.filename}")
    print("\nThen write the functions in the copied file and grade it: python -m tracks check DIR/FILE")
    return 0


def start(number, folder):
    exercise = BY_NUMBER.get(number)
    if exercise is None:
        return fail(f"no exercise {number}; there are {', '.join(str(e.number) for e in EXERCISES)}")
    folder = pathlib.Path(folder)
    target = folder / exercise.filename
    ancestor = nearest_existing(folder)
    if not ancestor.is_dir():
        return fail(f"{ancestor} is a file, not a folder: give a folder to write {exercise.filename} into")
    if target.exists():
        return fail(f"{target} exists already: choose another folder, or delete it to start again")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(exercise.skeleton)
    except OSError as error:
        return fail(f"cannot write {target} ({error.strerror}): choose a folder you can write")
    print(f"exercise {exercise.number}: {exercise.title}")
    print(f"wrote {target}: read its question and hints, fill in the functions, then")
    print(f"  python -m tracks check {shell_word(target)}")
    return 0


def print_report(report):
    heading = (f"exercise {report['exercise']} ({report['title']})" if report["exercise"] else "not graded")
    print(f"{report['file']}: {heading}")
    for check in report["checks"]:
        print(f"  {'PASS' if check['passed'] else 'FAIL'}  {'(optional) ' if check.get('optional') else ''}"
              f"{check['name']}" + (f": {check['detail']}" if check["detail"] else ""))
        if not check["passed"] and check["hint"]:
            print(f"        hint: {check['hint']}")
    checks, extras = required(report["checks"]), [check for check in report["checks"] if check.get("optional")]
    passed = sum(check["passed"] for check in checks)
    stopped = report["reason"] and not report["reason"].startswith(f"{len(checks) - passed} of")
    print(f"  {passed} of {len(checks)} checks passed"
          + (f", and {sum(check['passed'] for check in extras)} of {len(extras)} optional" if extras else "")
          + f" ({report['seconds']} s)" + (f"; {report['reason']}" if stopped else ""))
    for note in report.get("notes", []):  # what was dropped from a notebook to make it Python
        print(f"  note: {note}")
    if report.get("stdout"):  # what the file printed (its stderr, with TensorFlow's lines, is in --json)
        print("  your file printed:\n" + "\n".join("    | " + line for line in report["stdout"].splitlines()[-20:]))
    print()


def _read_tail(path, limit=4000):
    try:
        text = pathlib.Path(path).read_bytes()[-limit:].decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text


def check(files, as_json=False, seed=None, limits=SubmissionLimits()):
    from tracks.exercises.grading import GradingInterrupted, grade_files

    paths = [pathlib.Path(name) for name in files]
    folders = [str(path) for path in paths if path.is_dir()]
    if folders:
        return fail(f"{', '.join(folders)}: a folder, not a file; check its files (DIR/*.py, DIR/*.ipynb), "
                     f"or grade a class with: python -m tracks grade DIR --out BOOK")
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        return fail(f"no such file: {', '.join(missing)}")
    seed = secrets.randbelow(2**31) if seed is None else seed
    problem = sandbox_problem()
    if problem:  # a student's own file, on their own laptop: the checks are the same, the confinement is not
        print(f"note: not confined ({problem}): your file runs as a plain process of yours, with limits on "
              f"{unconfined_words()} only; the checks and verdicts are the same", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="check-") as out:
        try:
            reports = grade_files(paths, seed=seed, limits=limits, out=out, progress=False,
                                  confined=problem is None)
        except GradingInterrupted as stopped:
            take_interruption()
            word, code = interruption(stopped.cause)
            print(f"{word}: no verdict (the file's processes were ended)", file=sys.stderr, flush=True)
            return code
        for report in reports:  # the file's own output, kept apart from the report
            report["stdout"], report["stderr"] = (_read_tail(pathlib.Path(out) / report[name])
                                                  for name in ("stdout", "stderr"))
            report["seed"] = seed
    if as_json:
        print(json.dumps(reports, indent=1))
    else:
        print(f"seed {seed} (the same inputs again: --seed {seed})\n")
        for report in reports:
            print_report(report)
    return 0 if all(report["passed"] for report in reports) else 1


def _limit(minimum, maximum):
    """An argparse type for a file's limit: a finite number of at least `minimum` and at most `maximum`."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
        if value < minimum:  # below it every file would fail, the right ones too
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g} (the solutions need that much), got {text}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:.15g}, got {text}")
        return value

    return parse


def _count(text):
    """An argparse type for a count of things done at once: a whole number >= 1."""
    value = whole_number(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _jobs(text):
    """An argparse type for `grade --jobs`: a count of at most JOBS_PER_CORE files per core the grader may use.
    A file's --timeout counts wall time: with many more files at once than cores, right answers would time out."""
    value = _count(text)
    cores = usable_cores()
    if value > JOBS_PER_CORE * cores:
        raise argparse.ArgumentTypeError(
            f"must be at most {JOBS_PER_CORE * cores} ({JOBS_PER_CORE} files per core, and the grader may use "
            f"{cores}): a file's --timeout counts wall time, so more files at once would time out right answers; "
            f"got {value}")
    return value


def _seed(text):
    from tracks.common.option_ranges import check_seed

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    try:
        check_seed("--seed", value)
    except ValueError as error:  # argparse names the option itself
        raise argparse.ArgumentTypeError(str(error).removeprefix("--seed ")) from None
    return value


class _Refused(Exception):
    """Bad input on the command line: main() says it in one line and returns 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _Refused(message)


def _limit_options(parser):
    parser.add_argument("--seed", type=_seed, help="the seed the random inputs are drawn from (default: a new one)")
    parser.add_argument("--timeout", type=_limit(MIN_SECONDS, MAX_SECONDS), default=120.0,
                        help=f"seconds a file may run (default 120, at least {MIN_SECONDS:g}, at most "
                             f"{MAX_SECONDS:.15g})")
    parser.add_argument("--memory-gb", type=_limit(MIN_MEMORY_GB, MAX_MEMORY_GB), default=4.0,
                        help=f"memory a file may allocate, GiB (default 4, at least {MIN_MEMORY_GB:g}, at most "
                             f"{MAX_MEMORY_GB:.15g})")
    parser.add_argument("--disk-mb", type=_limit(MIN_DISK_MB, MAX_DISK_MB), default=256.0,
                        help=f"what a file may write, its files and its output together, MiB (default 256, at "
                             f"least {MIN_DISK_MB:g}, at most {MAX_DISK_MB:.15g})")


def limit_problem(option, value):
    """Why `check` and `grade` would refuse `value` for the limit `option` (--timeout, --memory-gb, --disk-mb),
    in one line, or None: their own range checks, for a script that runs them (scripts/mutants.py)."""
    parser = _Parser(add_help=False)
    _limit_options(parser)
    try:
        parser.parse_args([option, str(value)])
    except _Refused as refusal:
        return str(refusal)
    return None


def _limits(args):
    """The `SubmissionLimits` of the options; `_Refused` where this process could not give them to a file."""
    limits = SubmissionLimits(seconds=args.timeout, memory_gb=args.memory_gb, disk_mb=args.disk_mb)
    problem = limits_problem(limits)
    if problem:
        raise _Refused(problem)
    return limits


def _autograder(rest):
    from tracks.common.option_ranges import out_problem
    from tracks.exercises.autograder import VISIBILITY, build, parse_exercises, repository_problem
    from tracks.exercises.students import Scores, ScoresError, read_scores

    parser = _Parser(prog="python -m tracks autograder",
                     description="Build a Gradescope autograder (setup.sh, run_autograder and this version's "
                                 "wheel) that grades the exercises as `grade` does (docs/grading.md).")
    parser.add_argument("--out", required=True, type=path_option, help="the zip to write (new), e.g. autograder.zip")
    parser.add_argument("--exercises", default=",".join(str(e.number) for e in EXERCISES),
                        help="the exercises of the assignment, e.g. 1,3,5 (default: all)")
    parser.add_argument("--scores", metavar="FILE", type=path_option,
                        help="points per check, TOML or JSON (default: 1 per check)")
    parser.add_argument("--visibility", choices=VISIBILITY, default="visible",
                        help="when students see the tests' results, Gradescope's values (default: visible)")
    parser.add_argument("--stdout-visibility", choices=VISIBILITY, default="hidden",
                        help="when students see the autograder's output (default: hidden)")
    args = parser.parse_args(rest)
    out = pathlib.Path(args.out)
    if out.suffix != ".zip":
        return fail(f"--out {out}: the platform takes a .zip; name it {out.stem or 'autograder'}.zip")
    if out.exists():
        return fail(f"--out {out} exists: choose another name, or delete it")
    problem = out_problem(out) or repository_problem(out)
    if problem:
        return fail(problem)
    try:
        exercises = parse_exercises(args.exercises)
        scores = Scores() if args.scores is None else read_scores(args.scores)
    except (ValueError, ScoresError) as error:
        return fail(str(error))
    def opened():
        print(f"building {out}: exercises {', '.join(map(str, exercises))}, the wheel of this version ...",
              file=sys.stderr, flush=True)

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        build(out, exercises, scores, visibility=args.visibility, stdout_visibility=args.stdout_visibility,
              opened=opened)
    except RuntimeError as error:
        return fail(str(error))
    except OSError as error:  # a place the zip cannot be made in (found before the wheel is built), a full disk
        return fail(f"--out {out}: cannot write {describe_os_error(error)} (nothing was kept); choose another --out")
    possible = sum(scores.possible(number) for number in exercises)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB): setup.sh, run_autograder, autograder.json and the "
          f"wheel; {possible:g} points; tests {args.visibility}, output {args.stdout_visibility}. Upload it as the "
          f"assignment's autograder (docs/grading.md, "
          f"\"On Gradescope\").")
    return 0


def _release(rest):
    from tracks.exercises.release import ReleaseError, write_release

    parser = _Parser(prog="python -m tracks release",
                     description="Write the students' edition of the course into DIR: the handouts and students' "
                                 "pages, the notebooks without their solutions, the exercises' files and this "
                                 "version's wheel; no solution in any of it (docs/release.md).")
    parser.add_argument("--out", required=True, type=path_option,
                        help="the folder to write (new, or empty), outside the repository")
    parser.add_argument("--without-wheel", action="store_true",
                        help="leave the wheel out: students install the package from the package index")
    args = parser.parse_args(rest)
    try:
        written = write_release(args.out, wheel=not args.without_wheel)
    except ReleaseError as error:
        return fail(str(error))
    except RuntimeError as error:  # the wheel could not be built
        return fail(str(error))
    print(f"wrote the students' edition to {args.out}: {len(written)} files (README.md first); check it, then "
          f"publish it as your course does (docs/release.md)")
    return 0


def _collect(rest):
    from tracks.exercises.collect import LAYOUTS, collect

    parser = _Parser(prog="python -m tracks collect",
                     description="Turn a platform's bulk download of submissions (the zip, or its folder) into "
                                 "CLASS/<student>/<files> and CLASS/collected.csv, for grade (docs/grading.md, "
                                 "\"Collecting the hand-in\").")
    parser.add_argument("download", type=path_option,
                        help="Canvas's \"Download Submissions\" or Moodle's \"Download all submissions\" zip, or "
                             "the folder it unpacks to")
    parser.add_argument("--out", required=True, type=path_option, help="the class folder to write (new, or empty)")
    parser.add_argument("--layout", choices=LAYOUTS, default="auto",
                        help="whose download it is (default: auto, from the files' names)")
    parser.add_argument("--pattern", metavar="REGEX",
                        help="any other platform: a regular expression matched against each file's path in the "
                             "download, with a (?P<student>...) group, and optionally id, late and file")
    args = parser.parse_args(rest)
    return collect(args.download, args.out, layout=args.layout, pattern=args.pattern)


def main(argv):
    """`exercises [start N DIR]`, `check FILE... [--json]` or `grade DIR --out OUT` (argv with the command)."""
    with signals_as_interruptions():
        try:
            with errors_of_a_signal():
                return _main(argv[0], argv[1:])
        except _Refused as refusal:
            return fail(str(refusal))
        except KeyboardInterrupt as error:  # before any file ran (grade and check handle their own)
            take_interruption()
            word, code = interruption(error)
            print(f"{word}: nothing was written", file=sys.stderr, flush=True)
            return code
        except OSError as error:
            return refuse_a_long_path(error)


def _main(command, rest):
    if command == "exercises":
        parser = _Parser(prog="python -m tracks exercises",
                         description="List the exercises, or write one's file to start it.")
        parser.add_argument("action", nargs="?", choices=["start"])
        parser.add_argument("number", nargs="?", type=whole)
        parser.add_argument("folder", nargs="?", type=path_option)
        args = parser.parse_args(rest)
        if args.action is None:
            return list_exercises()
        if args.number is None or args.folder is None:
            return fail("start needs the exercise's number and a folder: python -m tracks exercises start 1 mywork")
        return start(args.number, args.folder)
    if command == "grade":
        from tracks.exercises.autograder import parse_exercises
        from tracks.exercises.gradebook import grade_class
        from tracks.exercises.platforms import LMS

        parser = _Parser(prog="python -m tracks grade",
                         description="Grade every *.py and *.ipynb under DIR into a gradebook.")
        parser.add_argument("folder", type=path_option,
                            help="the class: DIR/<student>/*.py or *.ipynb, or DIR/*.py (one file per student)")
        parser.add_argument("--out", required=True, type=path_option, help="the gradebook's folder (new, or empty)")
        parser.add_argument("--jobs", type=_jobs, default=1,
                            help=f"files graded at once (a whole number >= 1, at most {JOBS_PER_CORE} per core; "
                                 "one per core is right)")
        parser.add_argument("--scores", metavar="FILE", type=path_option,
                            help="points per check, a TOML or JSON file (default: 1 point per check; "
                                 "docs/grading.md)")
        parser.add_argument("--lms", action="append", choices=LMS, default=[],
                            help="also write the per-student table as this platform's gradebook import "
                                 "(canvas.csv, moodle.csv); may be given twice")
        parser.add_argument("--roster", metavar="FILE", type=path_option,
                            help="the platform's own export (Canvas's gradebook export, Moodle's grading "
                                 "worksheet): its ids fill the LMS files, its students are matched to the class's")
        parser.add_argument("--exercises", help="the exercises of the assignment, e.g. 1,3,5 (default: all): only "
                                                "they count; a file of another is graded and reported as outside")
        parser.add_argument("--allow-unconfined", action="store_true",
                            help="where the Linux process sandbox cannot run (macOS, Windows), grade each file as a "
                                 "plain process of yours, unconfined: only for files you trust (default: refuse; "
                                 "grade in the Docker image instead, docs/grading.md)")
        _limit_options(parser)
        args = parser.parse_args(rest)
        try:
            exercises = None if args.exercises is None else parse_exercises(args.exercises)
        except ValueError as error:
            return fail(str(error))
        problem = sandbox_problem()
        if problem and not args.allow_unconfined:
            return fail(f"grading other people's files needs the Linux process sandbox, and {problem}: grade in "
                         f"the project's Docker image ({DOCKER_GRADE}), or pass --allow-unconfined for files "
                         f"you trust")
        return grade_class(args.folder, args.out, seed=args.seed, jobs=args.jobs, scores=args.scores,
                           lms=tuple(dict.fromkeys(args.lms)), confined=problem is None, roster=args.roster,
                           exercises=exercises, limits=_limits(args))
    if command == "autograder":
        return _autograder(rest)
    if command == "release":
        return _release(rest)
    if command == "collect":
        return _collect(rest)
    parser = _Parser(prog="python -m tracks check",
                     description="Grade exercise solutions, each in its own process, as `grade` does.")
    parser.add_argument("files", nargs="+", type=path_option,
                        help="solution files, .py or .ipynb (EXERCISE = N inside)")
    parser.add_argument("--json", action="store_true", help="one JSON report for every file, on stdout")
    _limit_options(parser)
    args = parser.parse_args(rest)
    return check(args.files, as_json=args.json, seed=args.seed, limits=_limits(args))


__all__ = ["check", "limit_problem", "list_exercises", "main", "start"]
