"""`grade` and `check` stopped by a signal, and run where the Linux process sandbox cannot.

A signal (Ctrl-C at the terminal: SIGINT to the process group; `kill -INT PID`; SIGTERM) stops a grading in
one line with exit code 130 or 143, ends every file's process, and keeps the files graded before it in a
gradebook that says it is partial; a SIGKILL of the grader, which it cannot answer, leaves no supervisor or
submission behind either (each supervisor sees its grader gone). Where the sandbox cannot run (here: the
facilities it needs taken away, as on macOS or Windows), `check` gives the same verdicts with one line that
says the file ran unconfined, and `grade` refuses in one line that names the Docker command.
"""

import csv
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
WRONG = ROOT / "tests" / "exercise_fixtures" / "wrong"
TF_LOG = ("WARNING: All log messages before absl", "I0000 ", "W0000 ", "E0000 ", "To enable the following")
# Runs `python -m tracks ARGV` with the facilities the process sandbox needs taken away: FACILITY is "fork"
# (a Python without os.fork, as on Windows) or "resource" (no resource module, as on Windows).
WITHOUT = """
import os, runpy, sys
facility = sys.argv.pop(1)
if facility == "fork":
    del os.fork
else:
    sys.modules["resource"] = None
sys.argv[0] = "tracks"
runpy.run_module("tracks", run_name="__main__", alter_sys=True)
"""


def our_lines(text):
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(TF_LOG))


def a_class(folder, copies):
    """`copies` students, each handing in the six solutions."""
    for index in range(copies):
        student = folder / f"student{index:02d}"
        student.mkdir(parents=True)
        for path in sorted(SOLUTIONS.glob("ex*.py")):
            (student / path.name).write_bytes(path.read_bytes())
    return folder


def left_behind(scratch):
    """Processes whose working folder or command line lies under `scratch` (the grader's TMPDIR): its
    supervisors and the submissions' processes."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            where = os.readlink(entry / "cwd")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if where.startswith(str(scratch)) or str(scratch) in command:
            found.append((int(entry.name), command[:120]))
    return found


def start_grading(tmp_path, copies=4):
    """`grade` on a class in a process group of its own (as a terminal starts it), its TMPDIR in tmp_path."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    folder = a_class(tmp_path / "class", copies)
    out = tmp_path / "book"
    stderr = open(tmp_path / "stderr.txt", "w+")
    process = subprocess.Popen([sys.executable, "-m", "tracks", "grade", str(folder), "--out", str(out), "--jobs",
                                "2", "--seed", "5"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
                               env={**os.environ, "TMPDIR": str(scratch)}, start_new_session=True)
    return process, scratch, out, stderr


def wait_until_graded(process, stderr, count, limit=240):
    """Waits until `count` files are graded (the progress lines) while the grading goes on."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        stderr.seek(0)
        if stderr.read().count("graded ") >= count:
            return
        assert process.poll() is None, "the grading ended before it could be stopped"
        time.sleep(0.1)
    raise AssertionError(f"not {count} files graded within {limit} s")


def some_running(scratch, seconds=60):
    """True once a file's processes are running (between two files there may be none for a moment)."""
    deadline = time.monotonic() + seconds
    while not left_behind(scratch) and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(left_behind(scratch))


def gone_within(scratch, seconds):
    deadline = time.monotonic() + seconds
    while left_behind(scratch) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left_behind(scratch)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigint-to-the-grader", "sigterm"])
def test_a_signal_mid_class_is_one_line_ends_every_process_and_keeps_a_partial_gradebook(tmp_path, how):
    process, scratch, out, stderr = start_grading(tmp_path)
    wait_until_graded(process, stderr, 3)
    assert some_running(scratch), "no file was being graded when the signal came"
    if how == "ctrl-c":  # a terminal sends SIGINT to the whole foreground process group
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    code = process.wait(timeout=30)
    assert code == (143 if how == "sigterm" else 130)
    assert gone_within(scratch, 3) == []
    stderr.seek(0)
    said = our_lines(stderr.read()).splitlines()
    last = said[-1]
    assert last.startswith("terminated (SIGTERM): " if how == "sigterm" else "interrupted: "), said
    assert [line for line in said if not line.startswith(("grading ", "graded "))] == [last]  # one line
    assert "Traceback" not in "\n".join(said)
    book = json.loads((out / "grades.json").read_text())
    rows = list(csv.DictReader(open(out / "grades.csv")))
    graded = int(last.split(":")[1].split()[0])  # "interrupted: N of 24 files graded, ..."
    assert book["partial"] is True and len(book["files"]) == len(rows) == graded >= 3
    assert len(book["not_graded"]) == 24 - graded
    assert all(report["passed"] for report in book["files"])  # no file cut short was kept as a failure
    # each file's memory, as its supervisor measured it: TensorFlow's process, or numpy's for exercise 5
    assert all(report["peak_rss"] > (20 if report["exercise"] == 5 else 300) * 2**20 for report in book["files"])
    assert (out / "summary.md").read_text().startswith("# Gradebook (partial)")
    assert not (out / "students.csv").exists() and not (out / "feedback").exists()


@pytest.mark.slow
def test_a_sigkill_of_the_grader_leaves_no_supervisor_or_submission_behind(tmp_path):
    process, scratch, _, stderr = start_grading(tmp_path)
    wait_until_graded(process, stderr, 1)
    assert some_running(scratch)
    process.kill()
    process.wait(timeout=10)
    assert gone_within(scratch, 3) == []


def check_without(facility, files, seed):
    """`check --json` with the sandbox's `facility` taken away: (exit code, reports, the lines it said)."""
    done = subprocess.run([sys.executable, "-c", WITHOUT, facility, "check", "--json", "--seed", str(seed),
                           *map(str, files)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    return done.returncode, json.loads(done.stdout), our_lines(done.stderr)


def verdicts(reports):
    return [(report["exercise"], [check["passed"] for check in report["checks"]], report["passed"])
            for report in reports]


@pytest.mark.slow
def test_check_without_the_sandbox_gives_the_same_verdicts_and_says_so_in_one_line():
    wrong = ["ex1_shortcut_forgotten.py", "ex1_relu_before_addition.py", "ex2_branch_not_at_zero.py",
             "ex3_post_ln.py", "ex3_mlp_before_attention.py", "ex4_order_swapped.py", "ex5_one_J_reused.py",
             "ex5_bounds_add.py", "ex6_off_by_one.py", "ex6_float_binomial.py"]
    files = [*sorted(SOLUTIONS.glob("ex*.py")), *(WRONG / name for name in wrong)]
    assert all(path.is_file() for path in files), [str(path) for path in files if not path.is_file()]
    confined = subprocess.run([sys.executable, "-m", "tracks", "check", "--json", "--seed", "11",
                               *map(str, files)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    expected = json.loads(confined.stdout)
    assert all(report["confinement"]["why"] != "a plain process, not confined" for report in expected)
    code, reports, said = check_without("fork", files, 11)
    assert code == confined.returncode == 1  # the wrong answers fail, with the sandbox and without
    assert verdicts(reports) == verdicts(expected)
    assert [report["checks"][-1]["detail"] for report in reports] == [
        report["checks"][-1]["detail"] for report in expected]
    assert all(report["passed"] for report in reports[:6]) and not any(report["passed"] for report in reports[6:])
    assert said == ("note: not confined (this Python has no os.fork): your file runs as a plain process of yours, "
                    "with limits on time, CPU, output, memory only; the checks and verdicts are the same\n")


@pytest.mark.parametrize("facility, why", [("fork", "this Python has no os.fork"),
                                           ("resource", "this Python has no resource module")])
def test_grade_without_the_sandbox_refuses_in_one_line_naming_the_docker_command(tmp_path, facility, why):
    folder = a_class(tmp_path / "class", 1)
    done = subprocess.run([sys.executable, "-c", WITHOUT, facility, "grade", str(folder), "--out",
                           str(tmp_path / "book")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not (tmp_path / "book").exists()
    said = our_lines(done.stderr)
    assert said.count("\n") == 1 and said.startswith(f"error: grading other people's files needs the Linux "
                                                     f"process sandbox, and {why}: "), said
    assert "docker run --rm --network none" in said and "--allow-unconfined" in said


@pytest.mark.slow
def test_grade_without_the_sandbox_grades_unconfined_when_told_to(tmp_path):
    folder = a_class(tmp_path / "class", 1)
    (folder / "student00" / "ex5_bounds.py").write_text((WRONG / "ex5_one_J_reused.py").read_text())
    done = subprocess.run([sys.executable, "-c", WITHOUT, "resource", "grade", str(folder), "--out",
                           str(tmp_path / "book"), "--allow-unconfined", "--seed", "3", "--timeout", "60"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    book = json.loads((tmp_path / "book" / "grades.json").read_text())
    passed = {pathlib.Path(report["file"]).name: report["passed"] for report in book["files"]}
    assert passed == {path.name: path.name != "ex5_bounds.py" for path in SOLUTIONS.glob("ex*.py")}
    assert all(report["confinement"]["confined"] == [] for report in book["files"] if report["confinement"])
