"""`python -m tracks release`: the students' edition holds the questions, never the answers.

A line of an answer is any line of solutions/ or of a notebook's solution cell that no skeleton and no
other cell of the notebooks has (so `import keras` is no answer), and any line of the lab sheets (the
answer keys) that no students' page has (the questions are repeated there) and no code of theirs: none may
appear in any file of the release.
"""

import json
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

from tracks.exercises.catalogue import EXERCISES
from tracks.exercises.release import NOTEBOOKS, STUDENT_PAGES, write_release

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def stripped(text, shortest):
    return {line.strip() for line in text.splitlines() if len(line.strip()) >= shortest}


def answer_lines():
    """{line: where it comes from} of every answer the instructor's material holds."""
    answers, code, solutions = {}, set(), []
    for exercise in EXERCISES:
        code |= stripped(exercise.skeleton, 8)
        solutions.append((f"solutions/{exercise.filename}", (ROOT / "solutions" / exercise.filename).read_text()))
    for name in NOTEBOOKS:
        for cell in json.loads((ROOT / "notebooks" / name).read_text())["cells"]:
            if "solution" in cell.get("metadata", {}).get("tags", []):
                solutions.append((f"notebooks/{name}, solution cell {cell['id']}", "".join(cell["source"])))
            elif cell["cell_type"] == "code":
                code |= stripped("".join(cell["source"]), 8)
    for where, text in solutions:
        for line in stripped(text, 8) - code:
            answers[line] = where
    students = set().union(*(stripped((ROOT / "docs" / page).read_text(), 1) for page in STUDENT_PAGES))
    for key in ("lab_vision.md", "lab_language.md"):
        for line in stripped((ROOT / "docs" / key).read_text(), 30) - students - code:
            answers[line] = f"docs/{key}"
    return answers


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "course"
    written = write_release(out, wheel=False)
    return out, written


def test_the_release_holds_the_students_material(release):
    out, written = release
    names = {str(path.relative_to(out)) for path in written}
    assert {"README.md", *(f"docs/{page}" for page in STUDENT_PAGES), *(f"notebooks/{name}" for name in NOTEBOOKS),
            *(f"exercises/{exercise.filename}" for exercise in EXERCISES)} <= names
    assert "docs/reference/vision-offline-s0/results.json" in names  # `compare` reads the reference runs
    assert not any(name.startswith("docs/reference/") and name.endswith((".md", ".png")) for name in names)
    assert not any(name.startswith(("solutions", "docs/lab_")) for name in names)
    for exercise in EXERCISES:
        assert (out / "exercises" / exercise.filename).read_text() == exercise.skeleton


def test_no_line_of_any_answer_is_in_the_release(release):
    out, written = release
    answers = answer_lines()
    assert len(answers) > 300  # the six solutions, three notebook solutions and two answer keys
    found = []
    for path in written:
        if path.suffix == ".png":
            continue
        text = path.read_text()
        if path.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        found += [(str(path.relative_to(out)), line, answers[line]) for line in stripped(text, 8) & answers.keys()]
    assert found == []


def test_every_link_of_the_release_resolves_inside_it(release):
    out, written = release
    for path in written:
        if path.suffix != ".md" or "reference" in path.parts:
            continue
        for target in LINK.findall(path.read_text()):
            page = target.split("#", 1)[0]
            if not page or "://" in target:
                continue
            assert (path.parent / page).resolve().is_relative_to(out.resolve()), (path, target)
            assert (path.parent / page).exists(), (path, target)


@pytest.mark.parametrize("where, message", [
    ("inside", "is inside the repository: write it outside the instructor's copy"),
    ("full", "exists and is not an empty folder: choose a new one, or delete it"),
])
def test_release_refuses_a_bad_out_in_one_line(tmp_path, where, message):
    out = ROOT / "build" / "release-test" if where == "inside" else tmp_path / "full"
    if where == "full":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    done = subprocess.run([sys.executable, "-m", "tracks", "release", "--out", str(out), "--without-wheel"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == f"error: --out {out} {message}\n"
    assert where == "full" or not out.exists()


@pytest.mark.slow
def test_the_release_carries_this_versions_wheel_without_solutions(tmp_path):
    out = tmp_path / "course"
    done = subprocess.run([sys.executable, "-m", "tracks", "release", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    wheels = list((out / "wheel").glob("residual_keras-*-py3-none-any.whl"))
    assert len(wheels) == 1 and f"wheel/{wheels[0].name}[notebooks]" in (out / "README.md").read_text()
    members = zipfile.ZipFile(wheels[0]).namelist()
    assert any(name.startswith("tracks/exercises/") for name in members)
    assert not any(name.startswith(("solutions/", "notebooks/", "docs/")) for name in members)
