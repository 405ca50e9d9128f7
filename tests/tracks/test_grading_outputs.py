"""Where the grading commands write (`grade`, `release`, `autograder`, `collect`), and the limits `check` takes.

A place the kernel refuses though `os.access` allows it (/proc, /sys), an
output inside the repository, a class that is a file, a `--jobs` that is
no whole number, limits too small for the solutions to pass, a download
whose only file is a link: each refused in one line, exit 2, nothing
written. A full disk during the work leaves no half-written release or zip,
and a gradebook's grades are written before its figure, whose failure is
said in one line naming what was not written.
"""

import errno
import os
import pathlib
import shutil
import zipfile

import pytest

from track_helpers import run_cli
from tracks.__main__ import main as tracks_main
from tracks.exercises import autograder, gradebook, release
from tracks.exercises.sandbox import MIN_DISK_MB, MIN_MEMORY_GB, MIN_SECONDS

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "ex5_bounds.py"  # numpy only: graded in a fraction of a second


def a_class(folder):
    """A class of one student with exercise 5's solution."""
    (folder / "ana").mkdir(parents=True)
    shutil.copy(SOLUTION, folder / "ana" / "ex5_bounds.py")
    return folder


def refused(argv, capsys, *words):
    """`tracks_main(argv)` exits 2 with one line on stderr holding every one of `words`, nothing on stdout."""
    code, out, err = run_cli(tracks_main, argv, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and out == "", err
    assert all(word in err for word in words), err
    return err


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("command, out", [("release", "/proc/rel"), ("release", "/sys/rel"), ("grade", "/proc/gb"),
                                          ("grade", "/sys/gb"), ("autograder", "/sys/ag.zip")])
def test_an_out_the_kernel_refuses_is_refused_in_one_line(tmp_path, capsys, command, out):
    if not pathlib.Path(out).parent.is_dir():
        pytest.skip(f"no {pathlib.Path(out).parent} here")
    given = {"release": ["--without-wheel"], "grade": [a_class(tmp_path / "class")], "autograder": ["--exercises", "1"]}
    argv = [command, *given[command], "--out", out] if command == "grade" else [command, "--out", out,
                                                                                 *given[command]]
    refused(argv, capsys, f"--out {out}", "cannot", "choose another --out")
    assert not pathlib.Path(out).exists() and not list(pathlib.Path(out).parent.glob(f"*{pathlib.Path(out).name}*"))


def test_a_release_on_a_full_disk_leaves_nothing_and_a_second_try_is_not_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(release, "student_notebook", full_disk)  # the notebooks come after the pages
    out = tmp_path / "course"
    refused(["release", "--out", out, "--without-wheel"], capsys, "No space left on device", "nothing was kept")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    code, _, err = run_cli(tracks_main, ["release", "--out", out, "--without-wheel"], capsys)
    assert code == 0 and (out / "README.md").is_file() and not list(tmp_path.glob(".*")), err


def test_an_autograder_on_a_full_disk_leaves_no_partial_zip(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(autograder, "build_wheel", full_disk)
    code, _, err = run_cli(tracks_main, ["autograder", "--out", tmp_path / "ag.zip", "--exercises", "5"], capsys)
    assert code == 2 and err.splitlines()[-1].startswith("error: ") and "No space left on device" in err, err
    assert list(tmp_path.iterdir()) == []


def test_autograder_refuses_an_out_inside_the_repository_as_release_does(capsys):
    out = ROOT / "build" / "autograder-test.zip"
    refused(["autograder", "--out", out], capsys, "is inside the repository")
    assert not out.exists()


def test_a_figure_that_cannot_be_written_keeps_the_grades_and_says_what_was_not(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gradebook, "plot", full_disk)
    book = tmp_path / "book"
    code, _, err = run_cli(tracks_main, ["grade", a_class(tmp_path / "class"), "--out", book], capsys)
    last = err.splitlines()[-1]
    assert code == 1 and last.startswith("error: ") and "checks.png not written" in last, err
    assert "Traceback" not in err
    for name in ("grades.json", "grades.csv", "students.csv", "summary.md"):
        assert (book / name).is_file(), name
    assert not (book / "checks.png").exists()


def test_a_class_that_is_a_file_is_refused_as_a_file(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    refused(["grade", notes, "--out", tmp_path / "book"], capsys, f"{notes} is a file, not a folder")
    assert not (tmp_path / "book").exists()


@pytest.mark.parametrize("jobs", ["1.5", "0", "-1"])
def test_jobs_must_be_a_whole_number(tmp_path, capsys, jobs):
    refused(["grade", a_class(tmp_path / "class"), "--out", tmp_path / "book", "--jobs", jobs], capsys,
            "argument --jobs: must be a whole number >= 1")
    assert not (tmp_path / "book").exists()


@pytest.mark.parametrize("command", ["check", "grade"])
@pytest.mark.parametrize("option, value, minimum", [
    ("--memory-gb", "0.01", MIN_MEMORY_GB), ("--memory-gb", "1e-9", MIN_MEMORY_GB), ("--disk-mb", "1e-9", MIN_DISK_MB),
    ("--timeout", "1e-9", MIN_SECONDS), ("--timeout", "9.9", MIN_SECONDS)])
def test_a_limit_too_small_for_the_solutions_is_refused(tmp_path, capsys, command, option, value, minimum):
    target = SOLUTION if command == "check" else a_class(tmp_path / "class")
    argv = [command, target, option, value] + (["--out", tmp_path / "book"] if command == "grade" else [])
    refused(argv, capsys, f"argument {option}: must be at least {minimum:g}", value)
    assert not (tmp_path / "book").exists()


def test_the_help_says_each_limits_minimum(capsys):
    code, out, _ = run_cli(tracks_main, ["check", "--help"], capsys)
    words = " ".join(out.split())
    assert code == 0 and all(f"at least {minimum:g}" in words for minimum in (MIN_SECONDS, MIN_MEMORY_GB, MIN_DISK_MB))


def test_the_smallest_limits_pass_a_solution(capsys):
    code, out, err = run_cli(tracks_main, ["check", SOLUTION, "--seed", "3", "--timeout", f"{MIN_SECONDS:g}",
                                           "--memory-gb", f"{MIN_MEMORY_GB:g}", "--disk-mb", f"{MIN_DISK_MB:g}"],
                             capsys)
    assert code == 0 and "FAIL" not in out, err


def test_a_download_whose_only_file_is_a_link_says_so(tmp_path, capsys):
    download = tmp_path / "link.zip"
    entry = zipfile.ZipInfo("doejane_12345_678901_link.py")
    entry.external_attr = 0o120777 << 16  # a symbolic link, as zip -y stores it
    with zipfile.ZipFile(download, "w") as archive:
        archive.writestr(entry, "/etc/passwd")
    refused(["collect", download, "--out", tmp_path / "class"], capsys, "'doejane_12345_678901_link.py' is a link")
    assert not (tmp_path / "class").exists()
