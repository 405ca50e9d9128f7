"""The toy track's own pieces: the spirals, its findings, the trained nets taken apart, and (slow) that its
default run shows degradation and every figure."""

import json

import numpy as np
import pytest

from tracks.common.track import RunContext
from tracks.toy import data, experiment, findings
from tracks.toy.results import ToyResults
from tracks.toy.__main__ import main


def test_the_spirals_are_two_balanced_interleaved_classes_drawn_from_the_seed():
    x, y = data.spirals(2000, 0.0, seed=3)
    again, _ = data.spirals(2000, 0.0, seed=3)
    other, _ = data.spirals(2000, 0.0, seed=4)
    np.testing.assert_array_equal(x, again)
    assert not np.array_equal(x, other)
    assert x.shape == (2000, 2) and x.dtype == np.float32 and set(np.unique(y)) == {0, 1}
    assert 0.45 < y.mean() < 0.55 and np.abs(x).max() <= 1.0 + 1e-6
    # Each point lies on its class's spiral (angle = radius x turns x 2 pi, plus pi for class 1).
    radius, angle = np.hypot(*x.T), np.arctan2(x[:, 1], x[:, 0])
    turns = 1.5  # data.spirals' default
    expected = (radius * turns * 2 * np.pi + np.pi * y - angle) % (2 * np.pi)
    assert np.allclose(np.minimum(expected, 2 * np.pi - expected), 0, atol=1e-3)


def _results(losses):
    return ToyResults.from_json({"models": [{"id": f"{variant}-{depth}", "variant": variant, "depth": depth,
                                             "train_loss": loss} for (variant, depth), loss in losses.items()]})


def test_findings_say_whether_the_deep_plain_net_degraded_and_the_residual_one_did_not():
    degraded = _results({("plain", 2): 0.01, ("plain", 16): 0.35, ("residual", 2): 0.02, ("residual", 16): 0.0})
    found = findings.toy_findings(degraded)
    assert [finding.holds for finding in found[:2]] == [True, True]
    assert "0.350" in found[0].text and found[0].margin == pytest.approx(0.35 - 0.01 - findings.DEGRADATION_NATS)
    healthy = _results({("plain", 2): 0.01, ("plain", 16): 0.02, ("residual", 2): 0.02, ("residual", 16): 0.0})
    assert [finding.holds for finding in findings.toy_findings(healthy)[:2]] == [False, False]
    assert findings.toy_findings(_results({("residual", 2): 0.1})) == [None] * 8


def _taken_apart(residual, plain):
    """Results of 20-layer twins with the studies' numbers the findings read (accuracies, path shares...)."""
    def entry(variant, study):
        return {"id": f"{variant}-20", "variant": variant, "depth": 20, "train_loss": 0.1, **study}
    return ToyResults.from_json({"models": [entry("residual", residual), entry("plain", plain)]})


def _study(intact, lesioned, deletion, error, nonconvex, curvature):
    return {"lesion": {"intact": intact, "lesioned": lesioned},
            "deletion": {"intact": intact, "num_removed": [1, 2, 4, 8, 16], "mean": deletion,
                         "values": [[value] * 3 for value in deletion]},
            "decomposition": {"names": [f"block{i}" for i in range(20)], "relative_error": error},
            "landscape": {"center_loss": 0.01, "edge_rise": 1.0, "curvature": curvature, "nonconvex_share": nonconvex}}


def test_findings_on_the_trained_nets_follow_veit_and_li_and_say_when_they_do_not():
    residual = _study(0.99, [0.98] * 19 + [0.6], [0.97, 0.9, 0.8, 0.55, 0.5], 0.0, 0.3, 20.0)
    residual["paths"] = {"lengths": list(range(21)), "gradient_share": [0.1] * 10 + [0.0] * 11}
    plain = _study(0.7, [0.45] * 20, [0.45, 0.5, 0.48, 0.6, 0.55], 9.0, 0.5, 5.0)
    found = {finding.title: finding for finding in findings.toy_findings(_taken_apart(residual, plain))[2:7]}
    assert all(finding.holds for finding in found.values()), found
    one = found["One layer removed (residual-20)"]
    assert one.margin == pytest.approx((0.98 - 0.5) / (0.99 - 0.5) - findings.KEEPS_SHARE)
    assert "45.0% with one layer removed" in one.text  # the plain twin beside it
    # k = 8 and 16 are beyond a quarter of the layers: the plain twin's 60% at k = 8 does not count.
    deletion = found["Removing k layers at once (depth 20)"]
    assert "k = 1, 2, 4 of 20" in deletion.text and deletion.margin > 0
    assert found["Which paths carry the gradient (residual-20)"].margin == pytest.approx(10 - 4.5)
    assert "9" in found["The residual stream is a sum"].text
    assert "the sharper one" in found["The loss around the trained weights (depth 20)"].text
    # The same nets with the claims reversed: each finding says so.
    residual["lesion"]["lesioned"] = [0.6] * 20
    residual["deletion"]["mean"] = [0.3, 0.3, 0.3, 0.3, 0.3]
    residual["paths"]["gradient_share"] = [0.0] * 11 + [0.1] * 10
    residual["decomposition"]["relative_error"] = 1e-3
    residual["landscape"]["nonconvex_share"] = 0.6
    found = findings.toy_findings(_taken_apart(residual, plain))[2:7]
    assert [finding.holds for finding in found] == [False] * 5 and all(finding.margin < 0 for finding in found)


def test_the_trained_nets_are_taken_apart_in_seconds_with_what_each_instrument_needs():
    import keras

    from tracks.toy.track import PRESETS

    config = PRESETS["smoke"]
    points = data.load(config)
    studied = {}
    for variant in ("plain", "residual"):
        spec = experiment.ToySpec(variant, 4)
        model = experiment.build_model(spec, RunContext(config))
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
        # One call instead of evaluate: the same numbers.
        loss, accuracy = experiment.scores(model, points.x_train, points.y_train)
        evaluated = model.evaluate(points.x_train, points.y_train, batch_size=len(points.y_train), verbose=0)
        assert (loss, accuracy) == pytest.approx(tuple(evaluated), rel=1e-5)
        studied[variant] = experiment.trained_studies(spec, model, RunContext(config, data=points))
    plain, residual = studied["plain"], studied["residual"]
    assert "paths" not in plain and len(residual["paths"]["lengths"]) == 5  # a plain net has one path
    assert plain["deletion"]["num_removed"] == [1, 2, 4] and len(plain["deletion"]["values"][0]) == 3
    assert residual["decomposition"]["relative_error"] < 1e-6 < plain["decomposition"]["relative_error"]
    assert np.asarray(residual["landscape"]["grid"]).shape == (experiment.LANDSCAPE_STEPS,) * 2
    assert residual["landscape"]["alphas"][-1] == pytest.approx(experiment.LANDSCAPE_SPAN)


def test_a_bad_depth_is_refused_in_one_line(tmp_path, capsys):
    code = main(["--depths", "0,4", "--out", str(tmp_path / "run")])
    assert code == 2 and "--depths 0 is outside 1..256" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_default_run_shows_degradation_and_its_boundaries(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "run")]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    found = {finding.title: finding.holds for finding in findings.toy_findings(ToyResults.from_json(results)) if finding is not None}
    assert found["Degradation"] and found["Residual nets train at depth"] and found["The residual stream is a sum"]
    assert len(results["models"][0]["boundary"]) == 41
    summary = (tmp_path / "run" / "summary.md").read_text()
    for figure in ("boundaries", "lesion", "block_deletion", "paths", "loss_landscape", "dynamics", "jacobian"):
        assert (tmp_path / "run" / f"{figure}.png").stat().st_size > 0 and f"({figure}.png)" in summary
    assert "BatchNorm" not in summary and "Fixup" not in summary  # the MLPs have neither
