"""Pieces of the reports: data set names without local paths, one unit in the vision lesion plots,
the notes and labels of the instruments at initialisation that apply to the models measured."""

import pytest

from tracks.common.instrument_report import instrument_notes
from tracks.language.data import dataset_title as text_title
from tracks.vision.data.loading import dataset_title as image_title
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
    from tracks.common.instrument_report import initialisation_table

    table = initialisation_table({
        "plain-8": {"gradient_gain": 3.0, "jacobian_norm": 2.61, "jacobian_converged": False,
                    "jacobian_iterations": 3, "stream_growth": 1.5},
        "residual-8": {"gradient_gain": 1.2, "jacobian_norm": 2.94, "jacobian_converged": True,
                       "jacobian_iterations": 12, "stream_growth": 1.1},
    })
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert "≥ 2.61 (lower bound, 3 iterations)" in rows["plain-8"]
    assert "lower bound" not in rows["residual-8"] and "2.94" in rows["residual-8"]


def _notes(**values):
    return instrument_notes({"plain-4": {"gradient_gain": 2.0}, "residual-4": {"gradient_gain": 1.5, **values}})


def test_the_notes_at_initialisation_explain_only_what_the_models_contain():
    """No BatchNorm, no branch that starts at 0, every gain defined: none of their notes."""
    mlp = _notes(batchnorm_layers=0, zero_branches=0)
    assert "**Gradient flow**" in mlp and "**Jacobian**" in mlp and "**Weight gradients per block**" in mlp
    assert "BatchNorm" not in mlp and "zero-gamma" not in mlp and "Fixup" not in mlp
    assert "A plain stack multiplies its layers' Jacobians" in mlp
    resnet = _notes(batchnorm_layers=19, zero_branches=0)
    assert "With BatchNorm in training mode" in resnet and "zero-gamma" not in resnet
    identity = _notes(batchnorm_layers=19, zero_branches=9)
    assert "When every branch starts at exactly 0" in identity and "zero-gamma network" in identity
    assert '"undefined"' not in identity
    fixup = {"fixup-4": {"gradient_gain": None, "batchnorm_layers": 0, "zero_branches": 4}}
    assert 'A gain shown as "undefined"' in instrument_notes(fixup) and "BatchNorm" not in instrument_notes(fixup)
    # A summary that does not say what its models contain (an older run): every note may apply.
    older = _notes()
    assert "With BatchNorm in training mode" in older and "When every branch starts at exactly 0" in older


def test_the_jacobian_plot_says_batchnorm_was_calibrated_only_for_a_model_with_batchnorm(tmp_path, monkeypatch):
    import keras
    import numpy as np

    import residual_keras as rk
    from tracks.common import instruments
    from tracks.common.track import GridModel

    def mlp(batchnorm):
        inputs = keras.Input((4,))
        x = keras.layers.Dense(8)(inputs)
        for index in range(3):
            norm = keras.layers.BatchNormalization() if batchnorm else keras.layers.LayerNormalization()
            x = rk.Residual(keras.Sequential([norm, keras.layers.Dense(8, activation="relu")]),
                            name=f"block{index}")(x)
        return keras.Model(inputs, keras.layers.Dense(2)(x))

    subtitles = []
    monkeypatch.setattr(instruments.plots, "jacobian",
                        lambda *args, subtitle=None, **kwargs: subtitles.append(subtitle))
    x, y = np.random.default_rng(0).normal(size=(8, 4)).astype("float32"), np.arange(8) % 2
    summaries = [instruments.at_initialisation([GridModel("residual-3", "residual", 3, mlp(batchnorm))], x, tmp_path,
                                               y=y, subtitle="run", log=lambda line: None, depth_scaling=False)
                 for batchnorm in (False, True)]
    assert [summary["residual-3"]["batchnorm_layers"] for summary in summaries] == [0, 3]
    assert [summary["residual-3"]["zero_branches"] for summary in summaries] == [0, 0]
    assert subtitles == ["run; the Jacobian on 1 example",
                         "run; the Jacobian on 1 example, BatchNorm calibrated on the batch"]
    assert "BatchNorm" not in instrument_notes(summaries[0])
    assert "With BatchNorm in training mode" in instrument_notes(summaries[1])
