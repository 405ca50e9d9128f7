"""The memory one file of each exercise takes when it is graded: what a grading container must hold.

    python scripts/grading_memory.py [N ...]      # default: every exercise, one at a time

grades the solution of each exercise (solutions/exN_*.py) alone, under its
supervisor, as `grade` and Gradescope's run_autograder do, and prints a
Markdown table: the largest process's peak resident set (the kernel's
high-water mark, its libraries' pages included: what a container's memory
limit counts), the file's process tree's resident anonymous and shared
memory at the supervisor's largest poll (what `--memory-gb` is checked
against), whether every check passed, and the seconds; then the grader's
own peak resident set and a supervisor's. docs/grading.md ("On
Gradescope") gives the figures; record `uptime`'s load beside them.
"""

import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEED = 38


def grade_alone(number):
    """(peak resident set, tree's peak anonymous and shared memory, passed, seconds) of exercise `number`'s
    solution graded alone."""
    from tracks.exercises.catalogue import BY_NUMBER
    from tracks.exercises.exercise import judge_all, required
    from tracks.exercises.sandbox import SubmissionLimits, child_site, run_submission

    exercise = BY_NUMBER[number]
    source = (ROOT / "solutions" / exercise.filename).read_bytes()
    inputs = exercise.inputs(SEED)
    with tempfile.TemporaryDirectory(prefix="memory-") as scratch:
        scratch = pathlib.Path(scratch)
        started = time.monotonic()
        run = run_submission(source, number, exercise.probes, inputs, limits=SubmissionLimits(),
                             workdir=scratch / "work",
                             site=child_site(scratch), stdout=scratch / "stdout.txt", stderr=scratch / "stderr.txt",
                             name=exercise.filename)
        seconds = time.monotonic() - started
    checks = judge_all(exercise, inputs, run.results, missing="no result")
    return run.peak_rss, run.peak_memory, all(check.passed for check in required(checks)), seconds


def high_water(status="/proc/self/status"):
    """A process's peak resident set, VmHWM: of its own memory only (getrusage's maxrss of a process that was
    started by exec also counts the memory of the process it was exec'd from)."""
    fields = dict(line.split(":", 1) for line in pathlib.Path(status).read_text().splitlines() if ":" in line)
    return int(fields["VmHWM"].split()[0]) * 1024


def supervisor_rss():
    """The peak resident set of a `python -I` that imported what a supervisor imports (standard library only)."""
    probe = ("import ctypes, json, os, pathlib, signal, sys, time, resource\n"
             "print(open('/proc/self/status').read())")
    text = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields["VmHWM"].split()[0]) * 1024


def main(argv):
    from tracks.exercises import autograder, gradebook, grading  # noqa: F401  (what run_autograder's process imports)
    from tracks.exercises.catalogue import BY_NUMBER

    numbers = [int(text) for text in argv] or sorted(BY_NUMBER)
    mib = 2**20
    print(f"seed {SEED}; one file at a time\n")
    print("| exercise | peak resident set (largest process) | tree's anonymous + shared, largest poll | "
          "checks | seconds |")
    print("| --- | --- | --- | --- | --- |")
    for number in numbers:
        rss, anonymous, passed, seconds = grade_alone(number)
        print(f"| {number} | {rss / mib:.0f} MiB | {anonymous / mib:.0f} MiB | {'all pass' if passed else 'FAILED'} "
              f"| {seconds:.1f} |", flush=True)
    grader = high_water()
    print(f"\nthe grader's process (these judges, numpy): peak resident set {grader / mib:.0f} MiB; a supervisor: "
          f"{supervisor_rss() / mib:.0f} MiB")


if __name__ == "__main__":
    from tracks.common.environment import choose_tensorflow

    choose_tensorflow()
    sys.exit(main(sys.argv[1:]))
