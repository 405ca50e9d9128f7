"""How much of each exercise the grader pins down: every single-point mutant of the solutions, graded.

    python scripts/mutants.py --seed 38 --seed 2026            # write, grade, report; exit 1 on a survivor
    python scripts/mutants.py --list                           # the mutants and their keys, nothing graded
    python scripts/mutants.py --seed 7 --exercise 3 --keep /tmp/mutants   # one exercise; keep the class

For each solution in solutions/, every mutant that one operator makes at
one place in the file is written as a submission of its own; the
mutants of all six solutions are graded as one class by the real grader,
`python -m tracks grade CLASS --out BOOK --jobs J --seed S` (each file in
its sandbox, confined, with its time and memory limits). A mutant is
**killed** when the grader does not pass it on every check, the optional
extra included (a check failed, or the file did not run to the end); it
**survives** when every check passes. A survivor is either listed in
tests/exercise_fixtures/equivalent_mutants.toml, with one line saying why it
computes what the solution computes or changes only what the exercise
leaves free, or it is a hole in the checks. The report gives per exercise:
mutants, killed, survived, equivalent, and each survivor's one-line diff;
the exit code is 1 when a survivor is not listed, or a listed one was
killed (a stale entry, or a grader that fails a right answer), else 0.

The operators, 18 of them, are listed in scripts/mutant_operators.py: an
arithmetic, comparison or boolean operator swapped, the operands of one
swapped, a number nudged, a flag flipped, an activation, initializer or
dtype string (or activation function) swapped, a statement dropped, a
keyword or positional argument dropped or swapped, a sublayer or a
variable read for a sibling of its kind.

Mutants that compile to the same program as another are graded once, and
one that does not compile is left out. A mutant is keyed by its file, the
function it is in and its line before and after, so a key holds when the
solution is edited elsewhere (scripts/mutant_operators.py). Each mutant is
a file whose process imports TensorFlow (but exercise 5's): the 292 of
today took 22 and 27 minutes a seed at --jobs 2 on two cores shared with
other work. tests/tracks/test_mutants.py runs this on two seeds and fails
on any survivor not in the equivalents file; docs/grading.md publishes the
score ("How much the checks pin down").
"""

import argparse
import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `scripts.mutant_operators` and the tracks, run from a checkout
from scripts.mutant_operators import mutants_of  # noqa: E402

SOLUTIONS = ROOT / "solutions"
EQUIVALENTS = ROOT / "tests" / "exercise_fixtures" / "equivalent_mutants.toml"


def all_mutants(exercises=None):
    """The mutants of every solution (of the exercises named), in the catalogue's order."""
    from tracks.exercises.catalogue import EXERCISES

    return [mutant for exercise in EXERCISES if not exercises or exercise.number in exercises
            for mutant in mutants_of(SOLUTIONS / exercise.filename, exercise.number)]


# Grading them: the real grader, one class ---------------------------------------------------------------


def write_class(mutants, folder):
    """Each mutant as folder/<solution's stem>/mNNN.py; returns {relative path: mutant}."""
    files = {}
    for index, mutant in enumerate(mutants):
        relative = f"{pathlib.Path(mutant.file).stem}/m{index:04d}.py"
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(mutant.source)
        files[relative] = mutant
    return files


def grade(mutants, seed, jobs=2, timeout=60, keep=None):
    """{key: (killed, why)} for `mutants`, graded as one class by `python -m tracks grade` on `seed`.

    `why` is the first check that failed (or the file's reason) for a killed mutant, "" for a survivor.
    """
    work = pathlib.Path(keep) if keep else pathlib.Path(tempfile.mkdtemp(prefix="mutants-"))
    try:
        folder, book = work / f"class-{seed}", work / f"book-{seed}"
        for old in (folder, book):
            if old.exists():
                shutil.rmtree(old)
        files = write_class(mutants, folder)
        command = [sys.executable, "-m", "tracks", "grade", str(folder), "--out", str(book), "--jobs", str(jobs),
                   "--seed", str(seed), "--timeout", str(timeout)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the grader exited with {done.returncode}: {done.stderr.strip()[-2000:]}")
        reports = {report["file"]: report for report in json.loads((book / "grades.json").read_text())["files"]}
        verdicts = {}
        for relative, mutant in files.items():
            report = reports[relative]
            failed = [check["name"] for check in report["checks"] if not check["passed"]]
            killed = bool(failed) or bool(report["reason"])
            verdicts[mutant.key] = (killed, (failed[0] if failed else report["reason"]) if killed else "")
        return verdicts
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def read_equivalents(path=EQUIVALENTS):
    """{key: why} of the survivors judged equivalent; ValueError for an entry without both."""
    entries = tomllib.loads(pathlib.Path(path).read_text()).get("equivalent", [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise ValueError(f"`equivalent` in {path} must be an array of tables ([[equivalent]] entries), "
                         f"got {entries!r:.80}")
    found = {}
    for entry in entries:
        key, why = entry.get("mutant"), entry.get("why")
        if not isinstance(key, str) or not isinstance(why, str) or not why.strip():
            raise ValueError(f"an entry of {path} needs a mutant and a why: {entry}")
        if key in found:
            raise ValueError(f"{path} lists {key!r} twice")
        found[key] = why
    return found


@dataclasses.dataclass
class Score:
    """One exercise on one seed."""

    exercise: int
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0  # survivors listed as equivalent
    unexplained: list = dataclasses.field(default_factory=list)  # survivors not listed: holes in the checks
    stale: list = dataclasses.field(default_factory=list)  # listed as equivalent, and killed

    @property
    def survived(self):
        return self.mutants - self.killed

    @property
    def score(self):
        """killed / (mutants - equivalent survivors): the share of the mutants that change the answer."""
        return f"{self.killed}/{self.mutants - self.equivalent}"


def score(mutants, verdicts, equivalents):
    """{exercise: Score} from the grader's verdicts and the equivalents file."""
    scores = {}
    for mutant in mutants:
        entry = scores.setdefault(mutant.exercise, Score(mutant.exercise))
        killed, why = verdicts[mutant.key]
        entry.mutants += 1
        entry.killed += killed
        if not killed and mutant.key in equivalents:
            entry.equivalent += 1
        elif not killed:
            entry.unexplained.append(mutant)
        elif mutant.key in equivalents:
            entry.stale.append((mutant, why))
    return scores


def report(scores, seed, seconds):
    lines = [f"seed {seed}: graded in {seconds:.0f} s",
             "| exercise | mutants | killed | survived | equivalent | score (killed / non-equivalent) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for number in sorted(scores):
        entry = scores[number]
        lines.append(f"| {number} | {entry.mutants} | {entry.killed} | {entry.survived} | {entry.equivalent} | "
                     f"{entry.score} |")
    for number in sorted(scores):
        for mutant in scores[number].unexplained:
            lines.append(f"SURVIVED (not in the equivalents file) [{mutant.operator}] {mutant.diff}\n"
                         f"    key: {mutant.key}")
        for mutant, why in scores[number].stale:
            lines.append(f"KILLED, but listed as equivalent [{mutant.operator}] {mutant.diff}\n    by: {why}")
    return "\n".join(lines)


def _problem(args):
    """What is wrong with the command line, in one line (nothing is written before it is checked), or None."""
    from tracks.common.option_ranges import check_seed, place_problem
    from tracks.exercises.catalogue import BY_NUMBER
    from tracks.exercises.cli import limit_problem

    unknown = [number for number in args.exercise or () if number not in BY_NUMBER]
    if unknown:
        return f"no exercise {unknown[0]}"
    if args.jobs < 1:
        return "--jobs must be >= 1"
    timeout = limit_problem("--timeout", args.timeout)  # the grader's own range, refused before a class is written
    if timeout:
        return timeout
    if args.list:
        return None  # nothing is graded: the seeds and --keep are not used
    if not args.seed:
        return "give --seed S (or --list)"
    for seed in args.seed:  # the grader's range: refused here, before a class is written for it
        try:
            check_seed("--seed", seed)
        except ValueError as error:
            return str(error)
    where = args.keep and place_problem(args.keep)  # a file, or a folder that is not writable
    if where:
        return f"--keep {args.keep}: {where}; choose another folder"
    return None


def main(argv=None):
    from tracks.common.options import OneLineParser  # a bad argument: one line, exit 2

    parser = OneLineParser(prog="python scripts/mutants.py", description=__doc__.splitlines()[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, action="append", help="grade on this seed (repeat for several)")
    parser.add_argument("--exercise", type=int, action="append", help="only this exercise's solution (repeat)")
    parser.add_argument("--jobs", type=int, default=2, help="files graded at a time (default 2)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per file (default 60; the grader's --timeout)")
    parser.add_argument("--equivalents", default=str(EQUIVALENTS), help="the equivalents file")
    parser.add_argument("--keep", help="write the classes and gradebooks here and keep them")
    parser.add_argument("--list", action="store_true", help="list the mutants and their keys; grade nothing")
    args = parser.parse_args(argv)
    problem = _problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    mutants = all_mutants(args.exercise)
    if args.list:
        for mutant in mutants:
            print(f"[{mutant.operator}] {mutant.diff}\n    key: {mutant.key}")
        print(f"{len(mutants)} mutants")
        return 0
    try:
        equivalents = read_equivalents(args.equivalents)
    except (OSError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
        print(f"error: cannot use the equivalents file {args.equivalents}: {error}", file=sys.stderr)
        return 2
    holes = 0
    for seed in args.seed:
        start = time.monotonic()
        verdicts = grade(mutants, seed, args.jobs, args.timeout, args.keep)
        scores = score(mutants, verdicts, equivalents)
        print(report(scores, seed, time.monotonic() - start), flush=True)
        holes += sum(len(entry.unexplained) + len(entry.stale) for entry in scores.values())
    return 1 if holes else 0


if __name__ == "__main__":
    sys.exit(main())
