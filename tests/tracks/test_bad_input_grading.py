"""Bad input to the grading commands (`check`, `grade`, `release`, `collect`): refused in one line, or graded.

Each refusal exits 2 with one line on stderr and writes nothing: an --out
under a file, limits past their documented bounds, a scores file naming an
exercise "²", a roster with a truncated row, a download with a file its
reader cannot read. What a class holds that UTF-8 cannot write (a notebook
cell with a lone surrogate, a student folder whose name is not UTF-8) is
graded: the file gets its 0 with its reason, the name is written with its
bytes escaped, and the gradebook is written whole.
"""

import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from track_helpers import run_cli
from tracks.__main__ import main as tracks_main
from tracks.exercises.sandbox import MAX_DISK_MB, MAX_MEMORY_GB, MAX_SECONDS

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "ex5_bounds.py"  # numpy only: graded in a fraction of a second
MOODLE_FOLDER = "Jane Doe_123_assignsubmission_file"


def a_class(folder):
    """A class of one student with exercise 5's solution."""
    (folder / "ana").mkdir(parents=True)
    shutil.copy(SOLUTION, folder / "ana" / "ex5_bounds.py")
    return folder


def a_download(folder):
    """Moodle's download, unpacked: one student's folder with one file."""
    (folder / MOODLE_FOLDER).mkdir(parents=True)
    shutil.copy(SOLUTION, folder / MOODLE_FOLDER / "ex5_bounds.py")
    return folder


def refused(argv, capsys, message):
    """`tracks_main(argv)` exits 2 with `message` on the one line it writes to stderr, and nothing on stdout."""
    code, out, err = run_cli(tracks_main, argv, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err and out == "", err
    return err


def snapshot(folder):
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize("command", ["grade", "release", "collect"])
def test_an_out_under_a_file_is_refused_before_anything_is_written(tmp_path, capsys, command):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    given = {"grade": [a_class(tmp_path / "class")], "release": [], "collect": [a_download(tmp_path / "download")]}
    before = snapshot(tmp_path)
    refused([command, *given[command], "--out", notes / "book"], capsys, f"{notes} is a file, not a directory")
    assert snapshot(tmp_path) == before and notes.read_text() == "mine"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a read-only folder")
@pytest.mark.parametrize("command", ["grade", "release", "collect"])
def test_an_out_in_a_read_only_folder_is_refused(tmp_path, capsys, command):
    given = {"grade": [a_class(tmp_path / "class")], "release": [], "collect": [a_download(tmp_path / "download")]}
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    refused([command, *given[command], "--out", locked / "book"], capsys, f"{locked} is not writable")
    assert not any(locked.iterdir())


@pytest.mark.parametrize("command", ["check", "grade"])
@pytest.mark.parametrize("option, value, maximum", [
    ("--timeout", "1e308", MAX_SECONDS), ("--timeout", "1e19", MAX_SECONDS), ("--timeout", "86401", MAX_SECONDS),
    ("--memory-gb", "1e300", MAX_MEMORY_GB), ("--memory-gb", "1e12", MAX_MEMORY_GB),
    ("--disk-mb", "1e303", MAX_DISK_MB)])
def test_a_limit_past_its_bound_is_refused_at_parse_time(tmp_path, capsys, command, option, value, maximum):
    target = SOLUTION if command == "check" else a_class(tmp_path / "class")
    argv = [command, target, option, value] + (["--out", tmp_path / "book"] if command == "grade" else [])
    refused(argv, capsys, f"argument {option}: must be at most {maximum:.15g}, got {value}")
    assert not (tmp_path / "book").exists()


def test_the_largest_limits_are_ones_the_sandbox_can_set(capsys):
    # Past the kernel's rlimits the file's process could not start, and every check would fail: at the bounds it
    # runs, and the solution passes.
    code, out, err = run_cli(tracks_main, ["check", SOLUTION, "--json", "--seed", "3", "--timeout", f"{MAX_SECONDS:g}",
                                           "--memory-gb", f"{MAX_MEMORY_GB:g}", "--disk-mb", f"{MAX_DISK_MB:.15g}"],
                             capsys)
    assert code == 0 and json.loads(out)[0]["passed"], err


def test_a_scores_file_with_an_exercise_that_is_a_digit_but_no_number_is_refused(tmp_path, capsys):
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({"²": {"shape": 2}}))
    refused(["grade", a_class(tmp_path / "class"), "--out", tmp_path / "book", "--scores", scores], capsys,
            f"--scores {scores}: no exercise '²'")
    assert not (tmp_path / "book").exists()


@pytest.mark.parametrize("text, line, column", [
    ("Identifier,Full name\nParticipant 5\n", 2, "Full name"),  # Moodle's worksheet, a row cut short
    ("Identifier,Full name,Email address\nParticipant 4,Ana Lima,a@x\n\nParticipant 5\n", 4, "Full name"),
    ("ID,Student,Section\n5\n", 2, "Student"),  # Canvas's export with its columns in another order
])
def test_a_roster_with_a_truncated_row_is_refused_naming_its_line(tmp_path, capsys, text, line, column):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    refused(["grade", a_class(tmp_path / "class"), "--out", tmp_path / "book", "--roster", roster, "--lms", "moodle"],
            capsys, f"--roster {roster}, line {line}: 1 of the header's")
    assert not (tmp_path / "book").exists()


def a_notebook(source):
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                       "cells": [{"cell_type": "code", "id": "one", "metadata": {}, "execution_count": None,
                                  "outputs": [], "source": source}]})


def test_a_class_with_text_utf8_cannot_write_is_graded_and_its_gradebook_written_whole(tmp_path, capsys):
    folder = a_class(tmp_path / "class")
    (folder / "bea").mkdir()
    # json.dumps writes the lone surrogate as the escape \ud800, which json.loads reads back as one
    (folder / "bea" / "ex5_bounds.ipynb").write_text(a_notebook("EXERCISE = 5\nNAME = '\ud800'\n"))
    jose = folder / os.fsdecode(b"Jos\xe9")  # a folder name in Latin-1, not UTF-8
    jose.mkdir()
    shutil.copy(SOLUTION, jose / "ex5_bounds.py")
    out = tmp_path / "book"
    code, _, err = run_cli(tracks_main, ["grade", folder, "--out", out, "--seed", "3"], capsys)
    assert code == 0 and "Traceback" not in err, err
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["file"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == ["Jos\\xe9/ex5_bounds.py", "ana/ex5_bounds.py", "bea/ex5_bounds.ipynb"]
    assert rows["Jos\\xe9/ex5_bounds.py"]["student"] == "Jos\\xe9" and rows["Jos\\xe9/ex5_bounds.py"]["total"] == "4/4"
    notebook = rows["bea/ex5_bounds.ipynb"]
    assert notebook["reason"].startswith("not graded: cell 1 holds a character that is not Unicode text")
    assert notebook["total"] == "0/1" and rows["ana/ex5_bounds.py"]["total"] == "4/4"
    book = json.loads((out / "grades.json").read_text())
    assert len(book["files"]) == 3
    with open(out / "students.csv", newline="", encoding="utf-8") as handle:
        students = {row["student"]: row for row in csv.DictReader(handle)}
    assert sorted(students) == ["Jos\\xe9", "ana", "bea"] and students["bea"]["ex5"].startswith("0/")
    assert sorted(path.name for path in (out / "feedback").iterdir()) == ["Jos_xe9.md", "ana.md", "bea.md"]
    assert "bea/ex5_bounds.ipynb" in (out / "feedback" / "bea.md").read_text(encoding="utf-8")
    assert "3 files" in (out / "summary.md").read_text(encoding="utf-8")


def test_check_prints_a_file_name_that_is_not_utf8(tmp_path):
    path = tmp_path / os.fsdecode(b"ex5_Jos\xe9.py")
    shutil.copy(SOLUTION, path)
    done = subprocess.run([sys.executable, "-m", "tracks", "check", path, "--seed", "3"], cwd=ROOT,
                          capture_output=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"}, timeout=300)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    assert b"ex5_Jos\\xe9.py: exercise 5" in done.stdout


def test_a_download_with_a_file_its_reader_cannot_read_is_refused_naming_it(capsys):
    # A file only root could read: as root, collect runs as the user nobody (setpriv), for whom it is unreadable.
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: root reads any file")
    place = pathlib.Path(tempfile.mkdtemp(prefix="unreadable-"))
    try:
        place.chmod(0o777)
        download = a_download(place / "download")
        (download / MOODLE_FOLDER / "ex5_bounds.py").chmod(0o000)
        for folder in (download, download / MOODLE_FOLDER):
            folder.chmod(0o755)
        user = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] if os.geteuid() == 0 else []
        done = subprocess.run([*user, sys.executable, "-m", "tracks", "collect", download, "--out", place / "class"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"{download / MOODLE_FOLDER / 'ex5_bounds.py'}: cannot be read" in done.stderr
        assert not (place / "class").exists() and sorted(path.name for path in place.iterdir()) == ["download"]
    finally:
        shutil.rmtree(place)


def under_a_hard_limit(limit):
    """The command prefix that runs a process with the hard limit `limit` (prlimit's option), unable to raise it:
    as root, without CAP_SYS_RESOURCE (setpriv), as a user is."""
    if shutil.which("prlimit") is None or (os.geteuid() == 0 and shutil.which("setpriv") is None):
        pytest.skip("needs prlimit (and setpriv, as root)")
    keep = ["setpriv", "--bounding-set", "-sys_resource", "--inh-caps", "-sys_resource"] if os.geteuid() == 0 else []
    return ["prlimit", limit, *keep, sys.executable]


@pytest.mark.parametrize("command, limit, message", [
    ("check", "--data=2000000000:2000000000", "--memory-gb: a file would get 4 GiB of memory, above the hard limit "
                                              "of 1.86 this process was started with (ulimit -Hd)"),
    ("grade", "--cpu=30:30", "--timeout: a file would get 240 CPU seconds"),
])
def test_limits_above_the_graders_hard_limits_are_refused_at_parse_time(tmp_path, command, limit, message):
    target = SOLUTION if command == "check" else a_class(tmp_path / "class")
    extra = ["--out", tmp_path / "book"] if command == "grade" else []
    done = subprocess.run([*under_a_hard_limit(limit), "-m", "tracks", command, target, *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "book").exists()


def test_a_limit_the_sandbox_cannot_set_is_the_files_reason_not_a_silent_zero(tmp_path):
    # Past the command line (the autograder builds its limits from its own config): the supervisor says why.
    program = ("import json, sys\nfrom tracks.exercises.grading import grade_files\n"
               "from tracks.exercises.sandbox import SubmissionLimits\n"
               "report, = grade_files([sys.argv[1]], seed=1, limits=SubmissionLimits(), out=sys.argv[2], "
               "progress=False)\nprint(json.dumps(report))\n")
    done = subprocess.run([*under_a_hard_limit("--data=2000000000:2000000000"), "-c", program, SOLUTION, tmp_path],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert report["reason"] == ("not run: the sandbox could not set the file's limits (memory limit 4294967296: not "
                                "allowed to raise maximum limit); lower the limit, or grade where the hard limits "
                                "(ulimit -H) allow it"), done.stderr
    assert not report["passed"] and report["checks"] and not any(check["passed"] for check in report["checks"])


def test_a_class_collected_from_names_that_are_not_utf8_is_graded_from_a_relative_out(tmp_path, capsys, monkeypatch):
    # A Moodle folder whose name is Latin-1: collect names it with U+FFFD (collected.csv is UTF-8), and grade, given
    # folders relative to where it runs, grades it (each file's logs were opened from the supervisor's own folder).
    download = tmp_path / "download"
    student = download / os.fsdecode(b"Jos\xe9 Lima_5_assignsubmission_file")
    student.mkdir(parents=True)
    shutil.copy(SOLUTION, student / "ex5_bounds.py")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(tracks_main, ["collect", "download", "--out", "class"], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert sorted(path.name for path in (tmp_path / "class").iterdir()) == ["Jos\ufffd Lima_5", "collected.csv"]
    code, _, err = run_cli(tracks_main, ["grade", "class", "--out", "book", "--seed", "3"], capsys)
    with open(tmp_path / "book" / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert code == 0 and [(row["student"], row["total"]) for row in rows] == [("Jos\ufffd Lima_5", "4/4")], err
    assert (tmp_path / "book" / "logs" / "Jos\ufffd Lima_5" / "ex5_bounds" / "stdout.txt").is_file()
