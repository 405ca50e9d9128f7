"""The instructor's workflow (issue 52): notebooks in, grades per student out, Gradescope and the LMS imports.

A small class of exercises 5 and 6 (numpy only: each file grades in about a
second) is graded once, with a scores file and both LMS exports: right and
wrong answers as .py files and as notebooks (with magics, shell lines and a
stored output claiming a pass), a hostile file as a notebook, and notebooks
that cannot be graded (not JSON, no code, a syntax error). Then the
autograder zip is built and its run_autograder run, as Gradescope runs it,
against a submission folder in a temporary root, for a right, a wrong and a
hostile submission; results.json is checked against the platform's
documented fields (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
The whole fixture class as notebooks is graded in test_grade_isolation.py's slow test.
"""

import csv
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import nbformat
import pytest

from notebook_submissions import MAGIC_NOTES, as_notebook
from track_helpers import run_cli
from tracks.__main__ import main as tracks_main
from tracks.exercises.catalogue import BY_NUMBER
from tracks.exercises.submissions import notebook_submission

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "exercise_fixtures"
SOLUTIONS = ROOT / "solutions"


def _notebook(*sources, kind="code"):
    cells = [nbformat.v4.new_code_cell(s) if kind == "code" else nbformat.v4.new_markdown_cell(s) for s in sources]
    return nbformat.writes(nbformat.v4.new_notebook(cells=cells)).encode()


# A notebook as Python --------------------------------------------------------------------------------


def test_a_notebooks_code_cells_are_the_submission_in_order_with_magics_dropped():
    submission = notebook_submission(_notebook("%pip install numpy\nimport math\n!ls", "EXERCISE = 5",
                                               "%%time\nx = 2", "%%bash\necho hi", "y = (7\n  % 3)",
                                               "def f():\n    !ls\n    return x\nlen?\nfiles = !ls"))
    text = submission.source.decode()
    assert text.index("import math") < text.index("EXERCISE = 5") < text.index("x = 2") < text.index("y = (7")
    assert "echo hi" not in text and "%" not in text.replace("  % 3", "") and "!ls" not in text
    assert "  % 3" in text  # a cell that parses is kept as it is: a line may start with a modulo
    compile(text, "notebook", "exec")  # what was dropped left Python that parses (the `pass` inside f included)
    assert [note.split(":")[0] for note in submission.notes] == ["cell 1", "cell 1", "cell 3", "cell 4", "cell 6",
                                                                  "cell 6", "cell 6"]
    assert "dropped a %%bash cell" in submission.notes[3]
    line = text.splitlines().index("    return x") + 1
    assert submission.where(line) == "cell 6, line 3"


@pytest.mark.parametrize("data, reason", [
    (b"{not json", "not a notebook: invalid JSON"),
    (b"\xff\xfe{}", "not a notebook: not UTF-8 text"),
    (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": "none"}', "not a notebook"),
    (_notebook("# Notes only", kind="markdown"), "no code: the notebook has no code cell"),
    (_notebook("   ", ""), "no code: the notebook has no code cell"),
])
def test_a_notebook_that_cannot_be_graded_says_why(data, reason):
    submission = notebook_submission(data)
    assert submission.source is None and submission.problem.startswith(reason), submission.problem


# A class graded once --------------------------------------------------------------------------------

SCORES = '[5]\nin_bounds = 3\nanswers = 2.5\n\n[6]\nresnet = 0\n'


def _write_class(folder):
    """{file: what it is}: right and wrong answers as .py and notebooks, a hostile notebook, broken notebooks."""
    files = {
        "ana/ex5_bounds.py": SOLUTIONS / "ex5_bounds.py",
        "ana/ex5_second_try.ipynb": FIXTURES / "wrong" / "ex5_off_by_one.py",
        "ben/ex5_bounds.ipynb": SOLUTIONS / "ex5_bounds.py",
        "ben/ex6_paths.py": FIXTURES / "wrong" / "ex6_off_by_one.py",
        "ben/ex6_paths.ipynb": FIXTURES / "wrong" / "ex6_off_by_one.py",
        "cy/ex5_bounds.ipynb": FIXTURES / "hostile" / "prints.py",
        "cy/ex6_paths.ipynb": SOLUTIONS / "ex6_paths.py",
        "dee/ex5_bounds.ipynb": b"{not json",
        "dee/lab.ipynb": _notebook("EXERCISE = 6\ndef f(:\n    pass"),
        "dee/empty.ipynb": _notebook("# nothing here", kind="markdown"),
    }
    for name, source in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes):
            path.write_bytes(source)
        elif name.endswith(".ipynb"):
            path.write_text(as_notebook(source.read_text()))
        else:
            shutil.copy(source, path)
    (folder / "eve").mkdir()  # a student folder with nothing in it is no student: there is no file to grade
    (folder / "dee" / ".ipynb_checkpoints").mkdir()
    shutil.copy(folder / "cy" / "ex6_paths.ipynb", folder / "dee" / ".ipynb_checkpoints" / "ex6_paths.ipynb")
    return files


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    """(class folder, gradebook folder, stderr) of the class graded with a scores file and both LMS files."""
    tmp = tmp_path_factory.mktemp("class")
    folder, out = tmp / "class", tmp / "book"
    _write_class(folder)
    (tmp / "scores.toml").write_text(SCORES)
    argv = ["grade", folder, "--out", out, "--jobs", "2", "--seed", "11", "--timeout", "60", "--memory-gb", "2",
            "--scores", tmp / "scores.toml", "--lms", "canvas", "--lms", "moodle"]
    result = subprocess.run([sys.executable, "-m", "tracks", *map(str, argv)], capture_output=True, text=True,
                            cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder, out, result.stderr


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _check_cells(row, number):
    return [row[f"ex{number} {spec.key}{' (optional)' if spec.optional else ''}"] for spec in BY_NUMBER[number].checks]


def test_notebooks_get_the_verdicts_of_their_py_files_and_a_row_each(gradebook):
    folder, out, err = gradebook
    rows = {row["file"]: row for row in _rows(out / "grades.csv")}
    assert sorted(rows) == sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                                  if p.suffix in (".py", ".ipynb") and ".ipynb_checkpoints" not in p.parts)
    assert "graded 10 of 10" in err
    for python, notebook in (("ana/ex5_bounds.py", "ben/ex5_bounds.ipynb"), ("ben/ex6_paths.py", "ben/ex6_paths.ipynb")):
        number = int(rows[python]["exercise"])
        assert _check_cells(rows[python], number) == _check_cells(rows[notebook], number), (python, notebook)
        assert rows[python]["total"] == rows[notebook]["total"]
    assert rows["ben/ex5_bounds.ipynb"]["total"] == "4/4" and rows["ben/ex6_paths.ipynb"]["total"] != "4/4"
    assert rows["cy/ex5_bounds.ipynb"]["total"] == "0/4"  # prints.py: its stored output's claim is not read
    notes = rows["ben/ex5_bounds.ipynb"]["notes"].split("; ")
    assert len(notes) == MAGIC_NOTES and "dropped '%pip install --quiet numpy'" in notes[0]
    assert rows["ana/ex5_bounds.py"]["notes"] == ""
    assert rows["dee/ex5_bounds.ipynb"]["reason"].startswith("not graded: not a notebook: invalid JSON")
    assert rows["dee/lab.ipynb"]["reason"] == "not graded: SyntaxError: cell 1, line 2: invalid syntax"
    assert rows["dee/empty.ipynb"]["reason"].startswith("not graded: no code")


def test_students_csv_has_every_student_and_exercise_and_the_best_file_counts(gradebook):
    folder, out, _ = gradebook
    rows = {row["student"]: row for row in _rows(out / "students.csv")}
    assert sorted(rows) == ["ana", "ben", "cy", "dee"]
    assert list(next(iter(rows.values()))) == ["student", *(f"ex{n}" for n in BY_NUMBER), "total", "counted",
                                               "other files", "late"]
    assert {row["late"] for row in rows.values()} == {""}  # not collected, no roster: nothing says who was late
    # The scores file: ex5 in_bounds 3, answers 2.5, the other two 1 (7.5 in all); ex6 resnet 0 (3 in all).
    possible = {1: 7, 2: 3, 3: 10, 4: 4, 5: 7.5, 6: 3}
    assert [rows["ana"][f"ex{n}"] for n in (1, 2, 3, 4, 6)] == ["missing"] * 5
    assert rows["ana"]["ex5"] == "7.5/7.5" and rows["ana"]["counted"] == "ex5: ana/ex5_bounds.py (best of 2)"
    assert rows["ana"]["total"] == f"7.5/{sum(possible.values()):g}"
    grades = {row["file"]: row for row in _rows(out / "grades.csv")}
    passed = [spec.key for spec, cell in zip(BY_NUMBER[6].checks, _check_cells(grades["ben/ex6_paths.py"], 6))
              if cell == "pass" and not spec.optional]
    ben6 = sum({"resnet": 0}.get(key, 1) for key in passed)
    assert rows["ben"]["ex6"] == f"{ben6:g}/3" and rows["ben"]["ex5"] == "7.5/7.5"
    assert rows["ben"]["counted"] == "ex6: ben/ex6_paths.ipynb (best of 2)"  # equal points: the first by name
    assert rows["cy"]["ex5"] == "0/7.5" and rows["cy"]["ex6"] == "3/3"
    assert rows["dee"]["ex5"] == "0/7.5" and rows["dee"]["ex6"] == "0/3"  # by their names: ex5_..., EXERCISE = 6
    assert rows["dee"]["other files"] == "dee/empty.ipynb"


def test_each_student_gets_feedback_with_the_verdicts_and_hints(gradebook):
    folder, out, _ = gradebook
    assert sorted(path.name for path in (out / "feedback").iterdir()) == ["ana.md", "ben.md", "cy.md", "dee.md"]
    ben = (out / "feedback" / "ben.md").read_text()
    grades = json.loads((out / "grades.json").read_text())
    wrong = next(r for r in grades["files"] if r["file"] == "ben/ex6_paths.py")
    hints = [check["hint"] for check in wrong["checks"] if not check["passed"] and check["hint"]]
    assert hints and all(hint in ben for hint in hints)
    assert "(counted: the best of your files)" in ben and "(not counted)" in ben
    assert "## Exercise 1:" in ben and "Not handed in" in ben
    assert "note: cell 2: dropped '%pip install --quiet numpy'" in ben
    dee = (out / "feedback" / "dee.md").read_text()
    assert "not a notebook: invalid JSON" in dee and "SyntaxError: cell 1, line 2" in dee and "no code" in dee


def test_the_lms_files_take_the_per_student_table_in_each_platforms_layout(gradebook):
    _, out, _ = gradebook
    students = {row["student"]: row for row in _rows(out / "students.csv")}
    with open(out / "canvas.csv", newline="") as handle:
        canvas = list(csv.reader(handle))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[0][5:] == [f"Exercise {n}: {BY_NUMBER[n].title}" for n in BY_NUMBER]
    assert canvas[1][0] == "Points Possible" and canvas[1][5:] == ["7", "3", "10", "4", "7.5", "3"]
    for row in canvas[2:]:
        cells = [students[row[0]][f"ex{n}"] for n in BY_NUMBER]
        assert row[3] == row[0] and row[5:] == ["" if c == "missing" else c.split("/")[0] for c in cells]
    moodle = _rows(out / "moodle.csv")
    assert [row["Username"] for row in moodle] == sorted(students)
    assert moodle[0][f"Exercise 5: {BY_NUMBER[5].title}"] == "7.5"


@pytest.mark.parametrize("text, suffix, message", [
    ("[9]\nx = 1\n", ".toml", "no exercise '9'"),
    ("[5]\nbound = 1\n", ".toml", "exercise 5's 'bound' is no check of it; its checks: bounds, in_bounds"),
    ("[5]\nbounds = -1\n", ".toml", "exercise 5's bounds must be a number in 0..1,000,000, got -1"),
    ("[5]\nbounds = true\n", ".toml", "must be a number in 0..1,000,000, got True"),
    ('{"5": {"bounds": "two"}}', ".json", "must be a number in 0..1,000,000, got 'two'"),
    # 1e308 points a check: the class's sums would be inf, and every grade 0/inf
    ("[5]\nbounds = 1e308\nin_bounds = 1e308\n", ".toml", "exercise 5's bounds must be a number in 0..1,000,000, "
     "got 1e+308"),
    ("[5\nbounds = 1", ".toml", "cannot be read"),
    ("{", ".json", "cannot be read"),
    ("5: 1", ".yaml", "give a .toml or .json file"),
    ('{"3": {"steps": 1}}', ".json", "exercise 3's 'steps' is optional and earns no points"),
])
def test_a_scores_file_is_checked_before_anything_is_graded(tmp_path, capsys, text, suffix, message):
    (tmp_path / "class").mkdir()
    shutil.copy(SOLUTIONS / "ex5_bounds.py", tmp_path / "class")
    scores = tmp_path / f"scores{suffix}"
    scores.write_text(text)
    code, out, err = run_cli(tracks_main, ["grade", tmp_path / "class", "--out", tmp_path / "book",
                                           "--scores", scores], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "book").exists()


# Gradescope -----------------------------------------------------------------------------------------

TOP_FIELDS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
              "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
               "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def valid_results(results):
    """results.json as Gradescope's specification describes it (fields, types, values); the total is the tests'."""
    assert set(results) <= TOP_FIELDS and isinstance(results["tests"], list)
    assert isinstance(results["score"], (int, float)) and results["visibility"] in VISIBILITY
    for test in results["tests"]:
        assert set(test) <= TEST_FIELDS and {"name", "score", "max_score", "output"} <= set(test), test
        assert 0 <= test["score"] <= test["max_score"] and test["status"] in ("passed", "failed")
        assert test["visibility"] in VISIBILITY and isinstance(test["output"], str) and test["output"]
    assert results["score"] == pytest.approx(sum(test["score"] for test in results["tests"]))
    return {test["number"]: test for test in results["tests"]}


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """The zip for exercises 5 and 6, built with a JSON scores file and the tests hidden until the due date,
    unpacked as the platform does."""
    tmp = tmp_path_factory.mktemp("autograder")
    (tmp / "scores.json").write_text(json.dumps({"5": {"in_bounds": 3, "answers": 2.5}}))
    result = subprocess.run([sys.executable, "-m", "tracks", "autograder", "--out", str(tmp / "autograder.zip"),
                             "--exercises", "6,5", "--scores", str(tmp / "scores.json"), "--visibility",
                             "after_due_date", "--stdout-visibility", "after_published"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "11.5 points" in result.stdout  # exercise 5: 1 + 3 + 1 + 2.5; exercise 6: its 4 checks, 1 each
    assert "tests after_due_date, output after_published" in result.stdout
    return tmp / "autograder.zip"


def run_autograder(archive, root, submission):
    """Unpacks `archive` into root/source, copies `submission` ({name: source}) into root/submission,
    runs run_autograder as the platform does (with AUTOGRADER_ROOT), and returns results.json."""
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(archive) as unpacked:
        unpacked.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(unpacked.getinfo(name).external_attr >> 16 & 0o777)
    (root / "submission").mkdir()
    for name, source in submission.items():
        (root / "submission" / name).write_text(source)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PATH": f"{pathlib.Path(sys.executable).parent}:"
                                                                f"{os.environ['PATH']}"}
    subprocess.run([str(root / "source" / "run_autograder")], env=env, cwd=root, check=True, timeout=600,
                   capture_output=True)
    return json.loads((root / "results" / "results.json").read_text())


def test_the_zip_has_gradescopes_layout_and_this_versions_wheel(autograder):
    import importlib.metadata

    with zipfile.ZipFile(autograder) as archive:
        names = archive.namelist()
        wheel = next(name for name in names if name.endswith(".whl"))
        assert {"setup.sh", "run_autograder", "autograder.json"} <= set(names)
        assert wheel == f"residual_keras-{importlib.metadata.version('residual-keras')}-py3-none-any.whl"
        for script in ("setup.sh", "run_autograder"):
            assert archive.getinfo(script).external_attr >> 16 & 0o111, script  # executable
            assert archive.read(script).startswith(b"#!/usr/bin/env bash\n")
        assert wheel in archive.read("setup.sh").decode()
        config = json.loads(archive.read("autograder.json"))
        with zipfile.ZipFile(io.BytesIO(archive.read(wheel))) as packed:
            inside = set(packed.namelist())
    assert config["exercises"] == [5, 6] and config["points"]["5"]["in_bounds"] == 3
    assert (config["visibility"], config["stdout_visibility"]) == ("after_due_date", "after_published")
    assert {"tracks/exercises/harness/supervisor.py", "tracks/exercises/autograder.py",
            "residual_keras/__init__.py"} <= inside
    assert not any(name.startswith("solutions/") for name in inside)  # the solutions stay with the instructor
    for script in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", "-c", zipfile.ZipFile(autograder).read(script).decode()], check=True)


def test_run_autograder_grades_a_right_submission_with_the_scores_files_points(autograder, tmp_path):
    results = run_autograder(autograder, tmp_path, {
        "ex5_bounds.py": (SOLUTIONS / "ex5_bounds.py").read_text(),
        "ex6_paths.ipynb": as_notebook((SOLUTIONS / "ex6_paths.py").read_text())})
    tests = valid_results(results)
    assert list(tests) == [f"{n}.{spec.key}" for n in (5, 6) for spec in BY_NUMBER[n].checks if not spec.optional]
    assert all(test["status"] == "passed" for test in tests.values())
    assert tests["5.in_bounds"]["max_score"] == 3 and tests["5.answers"]["max_score"] == 2.5
    assert results["score"] == 11.5
    assert results["visibility"] == "after_due_date" and results["stdout_visibility"] == "after_published"
    assert {test["visibility"] for test in tests.values()} == {"after_due_date"}  # --visibility, in every test
    assert "ex6_paths.ipynb counted" in results["output"] and "dropped '%pip install --quiet numpy'" in results["output"]


def test_run_autograder_gives_a_wrong_submission_its_hints_and_a_missing_exercise_zero(autograder, tmp_path):
    results = run_autograder(autograder, tmp_path, {
        "ex5_bounds.py": (FIXTURES / "wrong" / "ex5_off_by_one.py").read_text()})
    tests = valid_results(results)
    failed = [test for number, test in tests.items() if number.startswith("5.") and test["status"] == "failed"]
    assert failed and all("Hint: " in test["output"] for test in failed)
    assert results["score"] == sum(test["score"] for test in tests.values() if number_of(test) == 5) < 7.5
    for number, test in tests.items():
        if number.startswith("6."):
            assert test["score"] == 0 and test["output"].startswith("not handed in: no file with EXERCISE = 6")


def number_of(test):
    return int(test["number"].split(".")[0])


def test_run_autograder_survives_a_hostile_submission(autograder, tmp_path):
    results = run_autograder(autograder, tmp_path, {
        "ex6_paths.py": (FIXTURES / "hostile" / "exit_at_import.py").read_text(),
        "ex5_bounds.ipynb": as_notebook((FIXTURES / "hostile" / "prints.py").read_text())})
    tests = valid_results(results)
    assert results["score"] == 0 and all(test["status"] == "failed" for test in tests.values())
    assert "exit at import: the file called sys.exit(0)" in results["output"]
    assert all(test["output"].startswith("no result") or "exit at import" in test["output"]
               for test in tests.values() if number_of(test) == 6)


def test_run_autograder_with_no_file_writes_a_zero_that_says_so(autograder, tmp_path):
    results = run_autograder(autograder, tmp_path, {"notes.txt": "I ran out of time"})
    tests = valid_results(results)
    assert {test["visibility"] for test in tests.values()} == {"after_due_date"} == {results["visibility"]}
    assert results["score"] == 0 and results["output"].startswith("No .py or .ipynb file was handed in")


@pytest.mark.parametrize("argv, message", [
    (["--out", "{tmp}/grader"], "the platform takes a .zip; name it grader.zip"),
    (["--out", "{tmp}/a.zip", "--exercises", "1,7"], "--exercises 1,7: '7' is no exercise"),
    (["--out", "{tmp}/a.zip", "--exercises", "2,2"], "--exercises 2,2: 2 is given twice"),
    (["--out", "{tmp}/existing.zip"], "exists: choose another name"),
    (["--out", "{tmp}/a.zip", "--scores", "{tmp}/none.toml"], "--scores {tmp}/none.toml: No such file"),
    (["--out", "{tmp}/a.zip", "--visibility", "after_grading"], "--visibility: invalid choice: 'after_grading'"),
    (["--out", "{tmp}/a.zip", "--stdout-visibility", "Visible"], "--stdout-visibility: invalid choice: 'Visible'"),
])
def test_the_autograder_command_refuses_bad_input_in_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "existing.zip").write_text("mine")
    argv = [a.format(tmp=tmp_path) for a in argv]
    code, out, err = run_cli(tracks_main, ["autograder", *argv], capsys)
    assert code == 2 and err.count("\n") == 1 and message.format(tmp=tmp_path) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.zip"]


def test_a_file_too_large_or_too_deep_for_the_grader_is_refused_unread_or_unparsed(tmp_path):
    """The grader reads and parses a submission in its own process (to find EXERCISE = N): a huge file is
    not read, and code nested past the parser's limit is a failed row, not a grader crash."""
    from tracks.exercises import submissions
    from tracks.exercises.grading import grade_file

    huge = tmp_path / "ex5_huge.py"
    huge.write_bytes(b"EXERCISE = 5\n" + b"#" * (submissions.MAX_SOURCE_BYTES + 1))
    deep = tmp_path / "ex5_deep.ipynb"
    deep.write_bytes(_notebook("EXERCISE = 5\nx = " + "(" * 5000 + "1" + ")" * 5000))
    for path, reason in ((huge, "not graded: too large: 10.0 MiB"), (deep, "not graded: ")):
        report = grade_file(path, seed=1, log_dir=tmp_path / "logs" / path.stem, site=None)
        assert report["reason"].startswith(reason) and not report["passed"], report["reason"]
        assert report["claimed"] == (5 if path is deep else None)


def test_check_grades_a_notebook_and_says_what_it_dropped(tmp_path, capsys):
    notebook = tmp_path / "ex5_bounds.ipynb"
    notebook.write_text(as_notebook((SOLUTIONS / "ex5_bounds.py").read_text()))
    code, out, err = run_cli(tracks_main, ["check", notebook, "--seed", "3"], capsys)
    assert code == 0 and out.count("PASS") == 4 and "FAIL" not in out, out
    assert out.count("  note: cell ") == MAGIC_NOTES and "dropped '%pip install --quiet numpy'" in out


def test_run_autograder_grades_no_link_a_submission_holds(tmp_path):
    """A link in a submission could point at any file of the grading machine (here the course's solution): it is
    named in the output and not graded, as `python -m tracks grade` refuses a class that holds one."""
    from tracks.exercises import autograder

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ex5_bounds.py").write_text((SOLUTIONS / "ex5_bounds.py").read_text())
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "ex5_bounds.py").symlink_to(outside / "ex5_bounds.py")
    (tmp_path / "submission" / "more").symlink_to(outside, target_is_directory=True)
    config = tmp_path / "autograder.json"
    config.write_text(json.dumps({"exercises": [5], "points": {}, "visibility": "visible",
                                  "limits": {"seconds": 120.0, "memory_gb": 4.0, "disk_mb": 256.0}}))
    assert autograder.run(tmp_path, config) == 0
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and all(test["score"] == 0 for test in results["tests"])
    lines = results["output"].splitlines()
    assert lines[:2] == ["ex5_bounds.py is a link: not graded; hand in the file itself.",
                         "more/ is a link to a folder: the files in it were not graded; hand them in as files."]
    assert lines[2].startswith("No .py or .ipynb file was handed in")


def test_run_autograder_on_a_machine_that_cannot_set_the_limits_fails_as_the_graders_fault(tmp_path, monkeypatch):
    """A container whose hard rlimits are below the autograder's limits: the platform gets a results.json
    that says the autograder failed, not a zero the student would take for a wrong answer."""
    from tracks.exercises import autograder, sandbox

    monkeypatch.setattr(sandbox, "limits_problem", lambda limits: "--memory-gb: above the hard limit")
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "ex5_bounds.py").write_text((SOLUTIONS / "ex5_bounds.py").read_text())
    config = tmp_path / "autograder.json"
    config.write_text(json.dumps({"exercises": [5], "points": {}, "visibility": "visible",
                                  "limits": {"seconds": 120.0, "memory_gb": 4.0, "disk_mb": 256.0}}))
    assert autograder.run(tmp_path, config) == 1
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and results["tests"] == []
    assert results["output"].startswith("The autograder failed, not your submission")
    assert "cannot give each file its limits: --memory-gb: above the hard limit" in results["output"]
