"""`--seeds`: one run per seed, the mean +- std, and findings judged against the spread."""

import json
import math

import numpy as np
import pytest

from track_helpers import assert_refused_in_one_line, run_cli
from tracks.common.findings import Finding
from tracks.common.seeds_report import aggregate_models, combine_findings, combined_finding_lines, mean_curve
from tracks.vision.results import VisionResults
from tracks.language.__main__ import main as language_main
from tracks.vision.__main__ import main as vision_main

VISION = ["--preset", "smoke", "--data", "synthetic", "--depths", "8", "--epochs", "1", "--landscape-steps", "0"]
LANGUAGE = ["--preset", "smoke", "--data", "pydoc", "--depths", "1", "--variants", "pre,plain", "--steps", "20",
            "--eval-interval", "10", "--xla", "off"]  # XLA's compile would dominate three runs


def _claim(holds, margin):
    return Finding("Degradation (plain)", holds, f"margin {margin}", margin=margin)


def test_a_finding_holds_across_seeds_only_beyond_the_spread():
    clear = combine_findings([(0, [_claim(True, 0.10)]), (1, [_claim(True, 0.12)]), (2, [_claim(True, 0.11)])])
    (title, verdict, _, mean, std), = clear
    assert verdict is True and mean == pytest.approx(0.11) and std == pytest.approx(0.01)
    # Holds on every seed, but the seeds move the margin more than its mean: not beyond the spread.
    noisy = combine_findings([(0, [_claim(True, 0.01)]), (1, [_claim(True, 0.30)]), (2, [_claim(True, 0.02)])])
    assert noisy[0][1] is False and noisy[0][3] < noisy[0][4]
    # One seed where it does not hold is enough to fail, whatever the mean.
    split = combine_findings([(0, [_claim(True, 0.5)]), (1, [_claim(False, -0.01)]), (2, [_claim(True, 0.5)])])
    assert split[0][1] is False
    lines = combined_finding_lines(noisy)
    assert "(does not hold across the seeds)" in lines[0] and "against a spread (std) of" in lines[0]
    assert [line.strip().split(" (")[0] for line in lines[1:]] == ["- seed 0", "- seed 1", "- seed 2"]


def test_divergence_margins_and_measurements_and_missing_seeds():
    diverged = combine_findings([(0, [_claim(True, math.inf)]), (1, [_claim(True, 0.2)])])
    assert diverged[0][1] is True
    measured = Finding("Diverged", None, "residual-56 diverged")
    assert combine_findings([(0, [measured]), (1, [None])])[0][1] is None
    missing = combine_findings([(0, [_claim(True, 0.2)]), (1, [None])])  # does not apply on seed 1
    assert missing[0][1] is False
    assert "seed 1: does not apply" in "\n".join(combined_finding_lines(missing))
    # A seed whose finding makes no claim (a net that never left chance) does not show the claim either.
    unclaimed = combine_findings([(0, [_claim(True, 0.2)]), (1, [Finding("Degradation (plain)", None, "no claim")])])
    assert unclaimed[0][1] is False
    assert "seed 1: no claim" in "\n".join(combined_finding_lines(unclaimed))


def test_aggregate_gives_the_mean_the_sample_std_and_each_seed():
    per_seed = [(seed, VisionResults.from_json({"models": [
        {"id": "plain-8", "variant": "plain", "depth": 8, "train_error": error, "test_error": None},
        {"id": "residual-8", "variant": "residual", "depth": 8, "diverged": seed == 1, "train_error": None},
    ]})) for seed, error in [(0, 0.30), (1, 0.34), (2, 0.41)]]
    plain, residual = aggregate_models(per_seed, ("train_error", "test_error"))
    assert plain["train_error"] == pytest.approx(np.mean([0.30, 0.34, 0.41]))
    assert plain["train_error_std"] == pytest.approx(np.std([0.30, 0.34, 0.41], ddof=1))
    assert plain["train_error_per_seed"] == [0.30, 0.34, 0.41] and plain["seeds"] == [0, 1, 2]
    assert plain["test_error"] is None and not plain["diverged"]
    assert residual["diverged"] and residual["diverged_seeds"] == [1]


def test_mean_curve_keeps_the_points_every_seed_has():
    x, mean, std = mean_curve([([1, 2, 3], [10.0, 8.0, 6.0]), ([1, 2], [12.0, 10.0])])
    assert x == [1, 2] and mean == [11.0, 9.0] and std == pytest.approx([math.sqrt(2)] * 2)


@pytest.mark.parametrize("main, argv", [(vision_main, VISION), (language_main, LANGUAGE)], ids=["vision", "language"])
@pytest.mark.parametrize("extra, message", [
    (["--seeds", "3"], "--seeds needs at least two seeds"),
    (["--seeds", "0,1,0"], "--seeds lists 0 more than once"),
    (["--seeds", "0,-1"], "--seeds must be in 0..4294967295 (NumPy's 32-bit seeds), got -1"),
    (["--seeds", "0,1", "--seed", "2"], "--seeds replaces --seed"),
])
def test_bad_seeds_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, main, argv, extra, message):
    assert_refused_in_one_line(main, argv + extra, tmp_path / "run", capsys, message)


def test_diagnose_refuses_seeds(tmp_path, capsys):
    code, _, err = run_cli(vision_main, ["diagnose", "--seeds", "0,1", "--out", tmp_path / "d"], capsys)
    assert code == 2 and "--seeds has nothing to average" in err and not (tmp_path / "d").exists()


def _models(path):
    return {m["id"]: m for m in json.loads(path.read_text())["models"]}


@pytest.mark.slow  # three vision runs; the language test below runs the same dispatcher by default
def test_vision_seeds_run_is_each_seed_run_then_the_spread(tmp_path, capsys):
    code, out, err = run_cli(vision_main, VISION + ["--seeds", "0,1", "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    run = tmp_path / "run"
    per_seed = [_models(run / f"seed-{seed}" / "results.json") for seed in (0, 1)]
    combined = _models(run / "results.json")
    for model_id in ("plain-8", "residual-8"):
        errors = [seed_models[model_id]["train_error"] for seed_models in per_seed]
        assert combined[model_id]["train_error_per_seed"] == errors
        assert combined[model_id]["train_error"] == pytest.approx(np.mean(errors))
        assert combined[model_id]["train_error_std"] == pytest.approx(np.std(errors, ddof=1))
        assert errors[0] != errors[1]  # the seeds differ: another initialisation and batch order
    # The seed-1 run is the run --seed 1 makes.
    code, _, err = run_cli(vision_main, VISION + ["--seed", "1", "--out", tmp_path / "alone"], capsys)
    assert code == 0, err
    alone = _models(tmp_path / "alone" / "results.json")
    for model_id in ("plain-8", "residual-8"):
        assert alone[model_id]["train_error"] == pytest.approx(per_seed[1][model_id]["train_error"], abs=1e-6)
    summary = (run / "summary.md").read_text()
    assert "[seed 0](seed-0/summary.md)" in summary and "A finding holds across the seeds" in summary
    assert f"{100 * combined['plain-8']['train_error']:.1f}% ± " in summary
    assert (run / "training_curves.png").stat().st_size > 0 and (run / "seed-1" / "summary.md").exists()
    assert "mean ± std over the seeds" in out
    # Resuming a finished run trains nothing again and keeps every seed's numbers.
    code, out, err = run_cli(vision_main, ["--resume", run], capsys)
    assert code == 0, err
    assert out.count("already finished") == 2 and _models(run / "results.json") == combined


def test_language_seeds_run_gives_the_spread_and_sampling_points_to_a_seed(tmp_path, capsys):
    code, _, err = run_cli(language_main, LANGUAGE + ["--seeds", "0,1", "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    run = tmp_path / "run"
    combined = _models(run / "results.json")
    losses = [_models(run / f"seed-{seed}" / "results.json")["pre-1-warmup0"]["val_loss"] for seed in (0, 1)]
    assert combined["pre-1-warmup0"]["val_loss"] == pytest.approx(np.mean(losses))
    assert combined["pre-1-warmup0"]["val_loss_std"] == pytest.approx(np.std(losses, ddof=1))
    assert "± " in (run / "summary.md").read_text() and (run / "loss_curves.png").stat().st_size > 0
    code, _, err = run_cli(language_main, ["sample", run], capsys)
    assert code == 2 and "sample from one of them" in err and "seed-0" in err
