"""End to end: `python -m tracks.vision` on synthetic data and on an image folder."""

import json

import numpy as np
import pytest
from PIL import Image

from track_helpers import Killed, kill_at, run_cli
from tracks.common.training import read_metrics_rows
from tracks.vision.__main__ import main

SMOKE = ["--preset", "smoke", "--data", "synthetic"]
REPORT_FILES = ["config.json", "results.json", "training_curves.png", "gradient_flow.png", "summary.md"]


def _check_run(run_dir, config_epochs=2, variants=("plain", "residual"), depths=(8, 14)):
    for name in REPORT_FILES:
        assert (run_dir / name).stat().st_size > 0, name
    results = json.loads((run_dir / "results.json").read_text())
    ids = [m["id"] for m in results["models"]]
    assert sorted(ids) == sorted(f"{v}-{d}" for v in variants for d in depths)
    for entry in results["models"]:
        rows = read_metrics_rows(run_dir / "metrics" / f"{entry['id']}.csv")
        # Each model's history: every epoch exactly once, and the results agree with it.
        assert [row["epoch"] for row in rows] == list(range(config_epochs))
        assert entry["epochs_trained"] == config_epochs
        assert entry["train_error"] == pytest.approx(1 - rows[-1]["accuracy"])
        assert 0 <= entry["test_error"] <= 1
        assert entry["params"] > 0 and not entry["diverged"]
    for key in ("dataset", "device", "precision", "xla", "versions"):
        assert key in results
    summary = (run_dir / "summary.md").read_text()
    assert "![Training curves](training_curves.png)" in summary
    assert "![Gradient flow at initialisation](gradient_flow.png)" in summary
    return results


def test_smoke_run_writes_every_file(tmp_path, capsys):
    code, out, _ = run_cli(main, SMOKE + ["--out", tmp_path / "run"], capsys)
    assert code == 0
    results = _check_run(tmp_path / "run")
    assert results["dataset"] == "synthetic"
    assert "model 4/4" in out and "estimated time" in out


def _write_image_folder(root, classes=("cat", "dog"), per_class=40):
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for index, name in enumerate(classes):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(per_class if split == "train" else 8):
                pixels = rng.integers(0, 120, (32, 32, 3)) + 100 * index
                Image.fromarray(pixels.astype("uint8")).save(folder / f"{i}.png")


def test_smoke_run_on_an_image_folder(tmp_path, capsys):
    _write_image_folder(tmp_path / "images")
    argv = ["--preset", "smoke", "--data", f"folder:{tmp_path / 'images'}", "--depths", "8",
            "--batch-size", "16", "--train-size", "64", "--out", tmp_path / "run"]
    code, _, err = run_cli(main, argv, capsys)
    assert code == 0, err
    results = _check_run(tmp_path / "run", depths=(8,))
    assert results["dataset"].startswith("folder:")


@pytest.mark.parametrize("after_backup", [False, True], ids=["before-backup", "after-backup"])
def test_killed_run_resumes_without_losing_or_duplicating(tmp_path, capsys, monkeypatch, after_backup):
    run_dir = tmp_path / "run"
    argv = SMOKE + ["--depths", "8", "--epochs", "3", "--out", run_dir]
    kill_at(monkeypatch, "residual-8", 0, after_backup=after_backup)
    with pytest.raises(Killed):
        main([str(a) for a in argv])
    monkeypatch.undo()
    results = json.loads((run_dir / "results.json").read_text())
    assert [m["id"] for m in results["models"]] == ["plain-8"]  # the first finished
    code, out, _ = run_cli(main, ["--resume", run_dir], capsys)
    assert code == 0
    assert "1 of 2 models already finished" in out
    _check_run(run_dir, config_epochs=3, depths=(8,))


def test_a_diverging_model_is_a_result(tmp_path, capsys):
    argv = SMOKE + ["--depths", "8", "--variants", "residual", "--learning-rate", "1e12",
                    "--out", tmp_path / "run"]
    code, out, _ = run_cli(main, argv, capsys)
    assert code == 0
    (entry,) = json.loads((tmp_path / "run" / "results.json").read_text())["models"]
    assert entry["diverged"] and entry["diverged_epoch"] == 0
    assert entry["train_error"] is None
    assert "diverged at epoch 1" in out
    assert "diverged at epoch 1" in (tmp_path / "run" / "summary.md").read_text()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--depths", "21"], "unknown depth 21"),
        (["--variants", "plain,wide"], "unknown variant 'wide'"),
        (["--preset", "huge"], "unknown preset 'huge'"),
        (["--data", "imagenet"], "imagenet"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, extra, message):
    code, _, err = run_cli(main, SMOKE + extra + ["--out", tmp_path / "run"], capsys)
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_bad_folders_and_foreign_resume_dirs(tmp_path, capsys):
    (tmp_path / "images" / "train" / "cat").mkdir(parents=True)
    code, _, err = run_cli(main, ["--data", f"folder:{tmp_path / 'images'}", "--out", tmp_path / "run"], capsys)
    assert code == 2 and "test" in err and not (tmp_path / "run").exists()
    foreign = tmp_path / "lang"
    foreign.mkdir()
    (foreign / "config.json").write_text(json.dumps({"track": "language"}))
    code, _, err = run_cli(main, ["--resume", foreign], capsys)
    assert code == 2 and "belongs to the 'language' track" in err
    assert json.loads((foreign / "config.json").read_text()) == {"track": "language"}


def test_diagnose_draws_the_instruments_without_training(tmp_path, capsys):
    argv = ["diagnose", "--data", "synthetic", "--depths", "8,14", "--width", "4",
            "--variants", "plain,residual,zero-gamma", "--out", tmp_path / "diag"]
    code, out, err = run_cli(main, argv, capsys)
    assert code == 0, err
    for name in ("gradient_flow.png", "activation_growth.png", "jacobian.png", "summary.md"):
        assert (tmp_path / "diag" / name).stat().st_size > 0
    summary = json.loads((tmp_path / "diag" / "results.json").read_text())["initialisation"]
    assert set(summary) == {f"{v}-{d}" for v in ("plain", "residual", "zero-gamma") for d in (8, 14)}
    # Zero-gamma blocks start as the identity on their shortcuts: the Jacobian is exactly 1.
    assert summary["zero-gamma-14"]["jacobian_norm"] == pytest.approx(1.0, abs=1e-4)
    assert summary["plain-14"]["jacobian_norm"] > 2.0
    assert not (tmp_path / "diag" / "metrics").exists()  # nothing was trained


def test_mirrored_strategy_on_two_logical_cpus(tmp_path):
    """Data parallelism without GPUs: the CPU split into two devices, one replica each."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RESIDUAL_KERAS_CPU_REPLICAS": "2"}
    command = [sys.executable, "-m", "tracks.vision", *SMOKE, "--depths", "8", "--variants", "residual",
               "--strategy", "mirrored", "--out", str(tmp_path / "run")]
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["strategy"] == "mirrored" and results["replicas"] == 2
    (entry,) = results["models"]
    assert entry["epochs_trained"] == 2 and 0 <= entry["train_error"] <= 1
