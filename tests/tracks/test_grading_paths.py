"""The grading commands given paths as people type them: relative, from another folder, through links, with spaces,
non-ASCII letters or a leading dash.

A gradebook graded from relative paths (`cd` into the class and grade `.`, a relative --roster and --scores) is the
one graded from absolute paths: the same rows and scores, and grades.json names the files it read as absolute
paths, which mean the same wherever the gradebook is read. Two files of a student with the same stem (ex5.py and
ex5.ipynb) keep logs of their own. A link inside a class is refused (a student's could point at the solutions, and
a linked folder was left out unsaid); a class reached through a link is graded. The commands that `start` and
`collect` print to run next run as printed, whatever the folder's name.
"""

import csv
import json
import os
import pathlib
import shlex
import shutil

import pytest

from track_helpers import run_cli
from tracks.__main__ import main as tracks_main
from tracks.exercises.gradebook import class_files, write_partial
from tracks.exercises.grading import grade_files, log_folders
from tracks.exercises.sandbox import SubmissionLimits

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "ex5_bounds.py"  # numpy only: graded in a fraction of a second
WRONG = ROOT / "tests" / "exercise_fixtures" / "wrong" / "ex5_off_by_one.py"
STUDENTS = ("José Ñ", "中文 student")
MOODLE_ROSTER = "Identifier,Full name,Email address\nParticipant 5,José Ñ,j@x\nParticipant 6,中文 student,z@x\n"


def a_class(folder):
    """Two students with names in Unicode and spaces: one right, one wrong file of exercise 5."""
    for student, source in zip(STUDENTS, (SOLUTION, WRONG)):
        (folder / student).mkdir(parents=True)
        shutil.copy(source, folder / student / "ex5 bounds.py")
    return folder


def a_notebook(source):
    return json.dumps({"cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None,
                                  "outputs": [], "source": source}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def rows(book):
    with open(book / "grades.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def graded(argv, capsys):
    code, out, err = run_cli(tracks_main, argv, capsys)
    assert code == 0 and "Traceback" not in err, err
    return err


def test_a_class_graded_from_relative_paths_is_the_class_graded_from_absolute_ones(tmp_path, capsys, monkeypatch):
    klass = a_class(tmp_path / "my class é")
    inputs = tmp_path / "inputs 中"
    inputs.mkdir()
    (inputs / "roster é.csv").write_text(MOODLE_ROSTER, encoding="utf-8")
    (inputs / "scores.toml").write_text("[5]\nbounds = 2\nanswers = 3\n")
    options = ["--lms", "moodle", "--seed", "11"]
    graded(["grade", klass, "--out", tmp_path / "absolute", "--roster", inputs / "roster é.csv",
            "--scores", inputs / "scores.toml", *options], capsys)
    monkeypatch.chdir(klass)  # the class is ".", everything else relative to it
    graded(["grade", ".", "--out", "../relative", "--roster", "../inputs 中/roster é.csv",
            "--scores", "../inputs 中/scores.toml", *options], capsys)
    absolute, relative = tmp_path / "absolute", tmp_path / "relative"
    assert rows(relative) == rows(absolute)
    assert [(row["student"], row["file"], row["total"]) for row in rows(absolute)] == [
        ("José Ñ", "José Ñ/ex5 bounds.py", "4/4"), ("中文 student", "中文 student/ex5 bounds.py", "3/4")]
    for name in ("students.csv", "moodle.csv"):
        assert (relative / name).read_bytes() == (absolute / name).read_bytes(), name
    books = [json.loads((book / "grades.json").read_text()) for book in (absolute, relative)]
    for book in books:  # the files it read, named so that they can be found from wherever the gradebook is read
        assert book["scores"] == str((inputs / "scores.toml").resolve()), book["scores"]
        assert book["roster"]["source"] == str((inputs / "roster é.csv").resolve()), book["roster"]
    assert [report["stdout"] for report in books[1]["files"]] == [report["stdout"] for report in books[0]["files"]]
    assert all((relative / report["stdout"]).is_file() for report in books[1]["files"])
    assert "Roster: " + str((inputs / "roster é.csv").resolve()) in (relative / "summary.md").read_text()


def test_a_py_file_and_a_notebook_of_the_same_name_keep_logs_of_their_own(tmp_path, capsys, monkeypatch):
    student = tmp_path / "class" / "ana"
    student.mkdir(parents=True)
    source = SOLUTION.read_text()
    (student / "ex5_bounds.py").write_text(source + '\nprint("printed by the .py file")\n')
    (student / "ex5_bounds.ipynb").write_text(a_notebook(source + '\nprint("printed by the notebook")\n'))
    monkeypatch.chdir(tmp_path)
    graded(["grade", "class/", "--out", "book", "--seed", "2"], capsys)
    book = json.loads((tmp_path / "book" / "grades.json").read_text())
    reports = {report["file"]: report for report in book["files"]}
    assert sorted(reports) == ["ana/ex5_bounds.ipynb", "ana/ex5_bounds.py"]
    assert all(report["passed"] for report in reports.values())
    logs = {name: (tmp_path / "book" / report["stdout"]).read_text() for name, report in reports.items()}
    assert logs == {"ana/ex5_bounds.ipynb": "printed by the notebook\n",
                    "ana/ex5_bounds.py": "printed by the .py file\n"}


def test_the_log_folders_of_a_class_are_its_paths_without_suffix_and_never_the_same(tmp_path):
    root = tmp_path / "class"
    names = ["ana/ex3.py", "ana/ex3.ipynb.py", "ana/ex3.ipynb", "bo/ex1.py", "ex2.py", "ana/ex3.py.py"]
    folders = log_folders([root / name for name in names], root)
    assert [folder.as_posix() for folder in folders] == ["ana/ex3", "ana/ex3.ipynb", "ana/ex3.ipynb-3", "bo/ex1",
                                                         "ex2", "ana/ex3.py"]
    assert len(set(folders)) == len(names)
    assert [folder.as_posix() for folder in log_folders([root / "a" / "x.py", root / "b" / "x.py"])] == ["001-x",
                                                                                                     "002-x"]


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_link_inside_a_class_is_refused_before_anything_is_written(tmp_path, capsys, link):
    klass = tmp_path / "class"
    (klass / "ana").mkdir(parents=True)
    shutil.copy(WRONG, klass / "ana" / "ex5_bounds.py")
    if link == "folder":  # a student's folder linked in from elsewhere: its files were left out, unsaid
        (tmp_path / "elsewhere" / "bo").mkdir(parents=True)
        shutil.copy(SOLUTION, tmp_path / "elsewhere" / "bo" / "ex5_bounds.py")
        (klass / "bo").symlink_to(tmp_path / "elsewhere" / "bo", target_is_directory=True)
        named = klass / "bo"
    else:  # a student's "file" that is a link to the course's solution: it was graded as theirs, full marks
        (klass / "ana" / "ex5_answer.py").symlink_to(SOLUTION)
        named = klass / "ana" / "ex5_answer.py"
    code, out, err = run_cli(tracks_main, ["grade", klass, "--out", tmp_path / "book", "--seed", "1"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {named} is a link: the grader follows no link in a class"), err
    assert not (tmp_path / "book").exists()


def test_a_class_reached_through_a_link_is_graded_as_from_its_own_path(tmp_path, capsys, monkeypatch):
    klass = a_class(tmp_path / "real" / "class")
    (tmp_path / "linked").symlink_to(tmp_path / "real", target_is_directory=True)
    (klass / "hidden_link_ignored").mkdir()
    (klass / ".ipynb_checkpoints").symlink_to(klass / "hidden_link_ignored")  # hidden: not the class's
    graded(["grade", klass, "--out", tmp_path / "direct", "--seed", "4"], capsys)
    monkeypatch.chdir(tmp_path / "linked" / "class")
    graded(["grade", "../../linked/class/", "--out", "../../via link", "--seed", "4"], capsys)
    assert rows(tmp_path / "via link") == rows(tmp_path / "direct") and len(rows(tmp_path / "direct")) == 2


@pytest.mark.parametrize("folder", ["my work", "-mine", "José's 中"])
def test_the_check_command_that_start_prints_runs_as_printed(tmp_path, capsys, monkeypatch, folder):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(tracks_main, ["exercises", "start", "5", "--", folder], capsys)
    assert code == 0 and (tmp_path / folder / "ex5_bounds.py").is_file(), out
    command = shlex.split(out.strip().splitlines()[-1])
    assert command[:3] == ["python", "-m", "tracks"], command
    shutil.copy(SOLUTION, tmp_path / folder / "ex5_bounds.py")  # the student's work done
    code, out, err = run_cli(tracks_main, command[3:] + ["--seed", "1"], capsys)
    assert code == 0 and "4 of 4 checks passed" in out, (command, err)


@pytest.mark.parametrize("out", ["my class", "-class"])
def test_the_grade_command_that_collect_prints_runs_as_printed(tmp_path, capsys, monkeypatch, out):
    download = tmp_path / "download" / "Ana Lima_5_assignsubmission_file"
    download.mkdir(parents=True)
    shutil.copy(SOLUTION, download / "ex5_bounds.py")
    monkeypatch.chdir(tmp_path)
    err = graded(["collect", "download", f"--out={out}"], capsys)
    command = shlex.split(err.strip().splitlines()[-1].split(". Next: ", 1)[1])
    assert command[:3] == ["python", "-m", "tracks"] and command[-1] == "BOOK", command
    graded(command[3:-1] + ["book", "--seed", "1"], capsys)
    assert [(row["student"], row["total"]) for row in rows(tmp_path / "book")] == [("Ana Lima_5", "4/4")]


def test_a_partial_gradebook_removes_the_logs_of_the_file_cut_short_only(tmp_path):
    # ana/ex5_bounds.ipynb finished, ana/ex5_bounds.py was cut short: the partial gradebook drops the latter's logs,
    # and keeps the former's, which grades.json points to (they were one folder, removed with the file cut short)
    student = tmp_path / "class" / "ana"
    student.mkdir(parents=True)
    (student / "ex5_bounds.py").write_text(SOLUTION.read_text())
    (student / "ex5_bounds.ipynb").write_text(a_notebook(SOLUTION.read_text() + '\nprint("the notebook")\n'))
    files = class_files(tmp_path / "class")
    out, limits = tmp_path / "book", SubmissionLimits()
    reports = grade_files(files, seed=1, limits=limits, out=out, root=tmp_path / "class", progress=False)
    assert [path.name for path in files] == ["ex5_bounds.ipynb", "ex5_bounds.py"] and reports[0]["passed"]
    write_partial(out, files, tmp_path / "class", {0: reports[0]}, 1, limits, 1, 1.0)
    book = json.loads((out / "grades.json").read_text())
    assert book["not_graded"] == ["ana/ex5_bounds.py"] and len(book["files"]) == 1
    assert (out / book["files"][0]["stdout"]).read_text() == "the notebook\n"
    assert sorted(path.relative_to(out / "logs").as_posix() for path in (out / "logs").rglob("*.txt")) == [
        "ana/ex5_bounds/stderr.txt", "ana/ex5_bounds/stdout.txt"]
