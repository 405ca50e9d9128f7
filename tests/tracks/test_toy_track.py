"""The toy track's own pieces: the spirals, its findings, and (slow) that its default run shows degradation."""

import json

import numpy as np
import pytest

from tracks.toy import data, report
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
    return {"models": [{"id": f"{variant}-{depth}", "variant": variant, "depth": depth, "train_loss": loss}
                       for (variant, depth), loss in losses.items()]}


def test_findings_say_whether_the_deep_plain_net_degraded_and_the_residual_one_did_not():
    degraded = _results({("plain", 2): 0.01, ("plain", 16): 0.35, ("residual", 2): 0.02, ("residual", 16): 0.0})
    found = report.toy_findings(degraded)
    assert [finding.holds for finding in found] == [True, True]
    assert "0.350" in found[0].text and found[0].margin == pytest.approx(0.35 - 0.01 - report.DEGRADATION_NATS)
    healthy = _results({("plain", 2): 0.01, ("plain", 16): 0.02, ("residual", 2): 0.02, ("residual", 16): 0.0})
    assert [finding.holds for finding in report.toy_findings(healthy)] == [False, False]
    assert report.toy_findings(_results({("residual", 2): 0.1})) == [None, None]


def test_a_bad_depth_is_refused_in_one_line(tmp_path, capsys):
    code = main(["--depths", "0,4", "--out", str(tmp_path / "run")])
    assert code == 2 and "--depths needs depths >= 1" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_default_run_shows_degradation_and_its_boundaries(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "run")]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [finding.holds for finding in report.toy_findings(results)] == [True, True]
    assert (tmp_path / "run" / "boundaries.png").stat().st_size > 0
    assert len(results["models"][0]["boundary"]) == 41
