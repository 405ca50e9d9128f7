"""The notebooks run top to bottom (solutions included) with tiny settings."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat, nbclient and ipykernel")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.slow  # a Jupyter kernel and a whole notebook each; .ci/run runs the slow tests
@pytest.mark.parametrize("name", ["vision.ipynb", "language.ipynb"])
def test_notebook_runs_with_tiny_settings(name, monkeypatch):
    monkeypatch.setenv("RESIDUAL_KERAS_TINY", "1")
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    exercises = [cell for cell in notebook.cells if "Exercise" in cell.source and cell.cell_type == "code"]
    solutions = [cell for cell in notebook.cells if "solution" in cell.metadata.get("tags", [])]
    assert exercises and len(solutions) == len(exercises)  # every exercise has its solution
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    errors = [output for cell in notebook.cells for output in cell.get("outputs", []) if output.output_type == "error"]
    assert not errors
    images = [output for cell in notebook.cells for output in cell.get("outputs", [])
              if "image/png" in output.get("data", {})]
    assert len(images) >= 2  # the figures are drawn in the notebook
