"""Pieces of the reports: data set names without local paths, one unit in the vision lesion plots."""

import pytest

from tracks.language.data import dataset_title as text_title
from tracks.vision.data.sources import dataset_title as image_title
from tracks.vision.report import error_percent


@pytest.mark.parametrize("dataset_title, name, title", [
    (image_title, "cifar10", "CIFAR-10"),
    (image_title, "synthetic", "synthetic images"),
    (image_title, "folder:/home/student/data/cifar10-jpeg", "cifar10-jpeg (image folder)"),
    (text_title, "text:/home/student/input.txt", "input.txt (text file)"),
    (text_title, "tiny_shakespeare", "Tiny Shakespeare"),
    (text_title, "pydoc", "Python's documentation"),
])
def test_dataset_titles_name_the_data_not_the_machine(dataset_title, name, title):
    assert dataset_title(name) == title
    assert "/home" not in dataset_title(name)


def test_error_percent_converts_every_accuracy_of_a_study():
    study = {"metric": "accuracy", "intact": 0.59, "lesioned": [0.52, None], "mean": [0.56],
             "values": [[0.6, 0.52]], "names": ["a", "b"]}
    converted = error_percent(study)
    assert converted["metric"] == "test error (%)" and converted["intact"] == pytest.approx(41.0)
    assert converted["lesioned"][0] == pytest.approx(48.0) and converted["lesioned"][1] is None
    assert converted["mean"] == [pytest.approx(44.0)] and converted["values"] == [[pytest.approx(40.0), pytest.approx(48.0)]]
    assert study["intact"] == 0.59  # the results entry itself is not changed


def test_the_initialisation_table_gives_an_unconverged_jacobian_as_a_lower_bound():
    from tracks.common.instruments import initialisation_table

    table = initialisation_table({
        "plain-8": {"gradient_gain": 3.0, "jacobian_norm": 2.61, "jacobian_converged": False,
                    "jacobian_iterations": 3, "stream_growth": 1.5},
        "residual-8": {"gradient_gain": 1.2, "jacobian_norm": 2.94, "jacobian_converged": True,
                       "jacobian_iterations": 12, "stream_growth": 1.1},
    })
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert "≥ 2.61 (lower bound, 3 iterations)" in rows["plain-8"]
    assert "lower bound" not in rows["residual-8"] and "2.94" in rows["residual-8"]
