"""The notebooks: the instructor's source and the students' edition made from it (tracks/exercises/release.py).

The students' edition drops the solution and instructor cells; run top to bottom with tiny settings, its
exercises' checks fail, each with the "Exercise N" of its stub, and nothing else fails; with the solutions
put back where they were, every cell runs and the figures are drawn.
"""

import copy
import json
import pathlib

import pytest

from tracks.exercises.release import INSTRUCTOR_TAGS, NOTEBOOKS, student_notebook

nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat, nbclient and ipykernel")
nbclient = pytest.importorskip("nbclient")

FOLDER = pathlib.Path(__file__).resolve().parents[2] / "notebooks"


def source(name):
    return json.loads((FOLDER / name).read_text())


def tags(cell):
    return set(cell.get("metadata", {}).get("tags", []))


def exercises(notebook):
    """[(stub, solution, check)] of the instructor's notebook: each solution between its stub and its check."""
    cells = notebook["cells"]
    return [(cells[i - 1], cell, cells[i + 1]) for i, cell in enumerate(cells) if "solution" in tags(cell)]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_exercise_is_a_stub_a_solution_and_a_check_and_the_release_keeps_only_the_students_cells(name):
    notebook = source(name)
    found = exercises(notebook)
    assert found
    for number, (stub, solution, check) in enumerate(found, start=1):
        text = "".join(stub["source"])
        assert f'raise NotImplementedError("Exercise {number}:' in text and not tags(stub)
        assert solution["metadata"]["jupyter"]["source_hidden"] and "NotImplementedError" not in "".join(
            solution["source"])
        assert "check" in tags(check) and f"Exercise {number}:" in "".join(check["source"])
    released = student_notebook(notebook)
    kept = [cell for cell in notebook["cells"] if not tags(cell) & INSTRUCTOR_TAGS]
    assert [cell["id"] for cell in released["cells"]] == [cell["id"] for cell in kept]
    assert [cell["source"] for cell in released["cells"]] == [cell["source"] for cell in kept]
    assert all(cell.get("outputs", []) == [] and cell.get("execution_count") is None for cell in released["cells"])
    assert any("instructor" in tags(cell) for cell in notebook["cells"])  # the instructor's note, left out
    assert "solution cell" not in "".join(released["cells"][0]["source"])


def put_back(released, notebook):
    """The students' edition with the instructor's solution cells put back, each after its stub."""
    cells = copy.deepcopy(released["cells"])
    for stub, solution, _ in exercises(notebook):
        at = next(i for i, cell in enumerate(cells) if cell["id"] == stub["id"])
        cells.insert(at + 1, copy.deepcopy(solution))
    return {**released, "cells": cells}


def run(notebook, monkeypatch):
    monkeypatch.setenv("RESIDUAL_KERAS_TINY", "1")
    notebook = nbformat.reads(json.dumps(notebook), as_version=4)  # sources as strings, as nbclient wants them
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(FOLDER)}})
    client.execute()
    return notebook


def errors(notebook):
    return [(cell["id"], output) for cell in notebook.cells for output in cell.get("outputs", [])
            if output.output_type == "error"]


@pytest.mark.slow  # a Jupyter kernel and a whole notebook each; .ci/run runs the slow tests
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_students_edition_runs_and_each_check_fails_on_its_stub_with_a_clear_message(name, monkeypatch):
    notebook = source(name)
    ran = run(student_notebook(notebook), monkeypatch)
    failed = errors(ran)
    checks = [check["id"] for _, _, check in exercises(notebook)]
    assert [cell for cell, _ in failed] == checks  # the checks fail, and nothing else does
    for number, (_, output) in enumerate(failed, start=1):
        assert output.ename == "NotImplementedError" and output.evalue.startswith(f"Exercise {number}: write")


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_students_edition_with_the_solutions_put_back_runs_clean_and_draws_its_figures(name, monkeypatch):
    notebook = source(name)
    ran = run(put_back(student_notebook(notebook), notebook), monkeypatch)
    assert errors(ran) == []
    images = [output for cell in ran.cells for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
    assert len(images) >= 2  # the figures are drawn in the notebook
