"""End to end: `python -m tracks.vision` on synthetic data and on an image folder."""

import dataclasses
import importlib.util
import json
import os
import pathlib

import numpy as np
import pytest
from PIL import Image

from track_helpers import Killed, assert_refused_in_one_line, kill_at, run_cli, snapshot
from tracks.common.run_directory import RunDirectory
from tracks.common.training import Checkpoints, read_metrics_rows
from tracks.vision.__main__ import main

SMOKE = ["--preset", "smoke", "--data", "synthetic"]
REPORT_FILES = ["config.json", "results.json", "training_curves.png", "gradient_flow.png", "summary.md"]


def _check_run(run_dir, config_epochs=2, variants=("plain", "residual"), depths=(8, 14), curve="test_subset"):
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
        # The curve the "Deeper residual nets" finding reads, and the warm-up it asks about.
        assert entry["train_errors"] == pytest.approx([1 - row["accuracy"] for row in rows], abs=1e-6)
        assert isinstance(entry["warmup_steps"], int) and entry["warmup_steps"] >= 0
        # The smoke preset draws its curves on 128 test images (on the whole test set when it
        # is smaller): named so, never val_*.
        assert f"{curve}_accuracy" in rows[-1] and not any(key.startswith("val_") for key in rows[-1])
        assert 0 <= entry["test_error"] <= 1
        assert entry["params"] > 0 and not entry["diverged"]
    for key in ("dataset", "device", "precision", "xla", "versions"):
        assert key in results
    summary = (run_dir / "summary.md").read_text()
    assert "![Training curves](training_curves.png)" in summary
    assert "![Gradient flow at initialisation](gradient_flow.png)" in summary
    return results


@pytest.mark.slow  # the whole smoke preset (four models, the landscape); test_track_contract.py trains a tiny grid
def test_smoke_run_writes_every_file(tmp_path, capsys):
    code, out, _ = run_cli(main, SMOKE + ["--out", tmp_path / "run"], capsys)
    assert code == 0
    results = _check_run(tmp_path / "run")
    assert results["dataset"] == "synthetic"
    assert "model 4/4" in out and "estimated time" in out
    # The smoke preset draws the loss landscape of its deepest nets, and summary.md explains it.
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert (tmp_path / "run" / "loss_landscape.png").stat().st_size > 0
    assert "](loss_landscape.png)" in summary and "**Loss landscape**" in summary
    # The run ends with its results table, one row per model, and where the rest is.
    ending = out[out.index("results (4 models"):].splitlines()
    header = next(line for line in ending if line.startswith("variant"))
    assert header.split()[:3] == ["variant", "depth", "parameters"] and "test error" in header
    rows = [line.split() for line in ending if line.startswith(("plain ", "residual "))]
    assert sorted((row[0], row[1]) for row in rows) == [("plain", "14"), ("plain", "8"),
                                                         ("residual", "14"), ("residual", "8")]
    for row in rows:
        entry = next(m for m in results["models"] if m["id"] == f"{row[0]}-{row[1]}")
        assert f"{100 * entry['test_error']:.1f}%" in row
    assert ending[-1] == f"report with figures: {tmp_path / 'run' / 'summary.md'}"
    if importlib.util.find_spec("tensorboard"):  # the test extra installs it
        assert f"tensorboard --logdir {tmp_path / 'run' / 'tensorboard'}" in out
        assert sorted(p.name for p in (tmp_path / "run" / "tensorboard").iterdir()) == sorted(
            m["id"] for m in results["models"])
        from tracks.common.tensorboard import read_scalars

        for model in results["models"]:  # train and the test-subset curve overlay: the same tags, one file each
            tags = {}
            for split in ("train", "validation"):
                folder = tmp_path / "run" / "tensorboard" / model["id"] / split
                assert len(list(folder.glob("events.out.tfevents.*"))) == 1, folder
                tags[split] = {tag for tag, _, _ in read_scalars(folder)}
            assert {"epoch_loss", "epoch_accuracy"} <= tags["train"] & tags["validation"]
            assert "residual/gradient_gain" in tags["train"]


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
            "--batch-size", "16", "--train-size", "64", "--landscape-steps", "0", "--out", tmp_path / "run"]
    # More lesion images asked for than the folder's 16 test images: refused, nothing written.
    code, _, err = run_cli(main, [*argv, "--lesion-images", "17"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "--lesion-images 17 is more than the 16 test images of folder:" in err
    assert not (tmp_path / "run").exists()
    # A run directory inside the images' train/ or test/ would be read as a class by the next run: refused.
    for inside in (tmp_path / "images" / "train" / "run", tmp_path / "images" / "test" / "cat" / "run"):
        before = snapshot(tmp_path / "images")
        code, _, err = run_cli(main, [*argv[:-2], "--out", inside], capsys)
        assert code == 2 and err.count("\n") == 1 and "would be inside" in err and "give an --out outside it" in err
        assert snapshot(tmp_path / "images") == before
    # The preset's 100 is lowered to the 16 there are, with a line saying so.
    code, out, err = run_cli(main, argv, capsys)
    assert code == 0, err
    assert "--lesion-images: the preset's 100 is more than the 16 test images of folder:" in out
    assert json.loads((tmp_path / "run" / "config.json").read_text())["lesion_images"] == 16
    results = _check_run(tmp_path / "run", depths=(8,), curve="test")  # 16 test images < 128
    # Chance on the lesion images, recorded with each study: 8 cats and 8 dogs, so a constant guess scores 50%.
    for model in results["models"]:
        assert model["lesion"]["chance"] == model["ensemble"]["deletion"]["chance"] == 0.5, model["id"]
    # No landscape asked for: none drawn, and summary.md does not explain a figure it lacks.
    assert not (tmp_path / "run" / "loss_landscape.png").exists()
    assert "landscape" not in (tmp_path / "run" / "summary.md").read_text().lower()
    assert results["dataset"] == f"folder:{tmp_path / 'images'}"
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"] == f"folder:{tmp_path / 'images'}"  # absolute, as resolved
    assert config["data_fingerprint"]["train_images"] == 64
    # The folder changed since: --resume refuses it before writing anything.
    Image.fromarray(np.zeros((32, 32, 3), "uint8")).save(tmp_path / "images" / "train" / "cat" / "0.png")
    before = snapshot(tmp_path / "run")
    code, _, err = run_cli(main, ["--resume", tmp_path / "run"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "the data differ from those the run was trained on (sha256:" in err
    assert snapshot(tmp_path / "run") == before


def _rows(run_dir):
    return {path.stem: read_metrics_rows(path) for path in sorted((run_dir / "metrics").glob("*.csv"))}


def _finished_rows(run_dir):
    """The CSV rows of epochs that are safe: checkpointed, or of a recorded model."""
    recorded = {m["id"] for m in json.loads((run_dir / "results.json").read_text())["models"]}
    finished = {}
    for model, rows in _rows(run_dir).items():
        saved = Checkpoints(run_dir / "backup" / model).saved()
        finished[model] = rows if model in recorded else rows[:saved[-1][0] if saved else 0]
    return finished


@pytest.mark.slow  # eight starts of a run; test_language_track.py kills the same machinery at three points
def test_killed_at_every_point_resumes_to_the_uninterrupted_result(tmp_path, capsys, monkeypatch):
    """Kill the run at each point of a model's life (and press Ctrl-C once); every resume
    continues where it stopped, and the end is the uninterrupted run's result."""
    from tracks.common import tfds_source

    argv = ["--preset", "smoke", "--data", "auto", "--depths", "8", "--epochs", "3", "--train-size", "64"]
    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: "unavailable")  # offline
    code, _, err = run_cli(main, argv + ["--out", tmp_path / "whole"], capsys)
    assert code == 0, err
    run_dir = tmp_path / "run"
    kills = [("plain-8", "inside-save", 0), ("plain-8", "after-row", 1), ("plain-8", "before-record", 0),
             ("residual-8", "after-checkpoint", 0), ("residual-8", "after-record", 0)]
    for number, (model_id, point, epoch) in enumerate(kills):
        kill_at(monkeypatch, model_id, point, epoch)
        resume = ["--resume", run_dir] if number else argv + ["--out", run_dir]
        finished_rows = _finished_rows(run_dir) if number else {}
        with pytest.raises(Killed):
            main([str(a) for a in resume])
        monkeypatch.undo()
        capsys.readouterr()
        # "auto" fell back to synthetic when the run started; a resume never asks again.
        monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: pytest.fail("auto resolved again"))
        for model, rows in finished_rows.items():  # finished epochs are never trained again
            assert _rows(run_dir)[model][:len(rows)] == rows  # (their "seconds" would differ)
    results = json.loads((run_dir / "results.json").read_text())
    assert [m["id"] for m in results["models"]] == ["plain-8", "residual-8"]
    assert (run_dir / "backup" / "residual-8").is_dir()  # recorded, killed before the backup was deleted

    # Ctrl-C: one line saying how to resume, exit 130, the lock released.
    monkeypatch.setattr(RunDirectory, "update_results", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt))
    code, _, err = run_cli(main, ["--resume", run_dir], capsys)
    assert code == 130 and err.count("\n") == 1
    assert f"continue with python -m tracks.vision --resume {run_dir}" in err
    monkeypatch.undo()
    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: pytest.fail("auto resolved again"))

    code, out, err = run_cli(main, ["--resume", run_dir], capsys)
    assert code == 0, err
    assert "2 of 2 models already finished" in out and not (run_dir / "backup").exists()
    results = _check_run(run_dir, config_epochs=3, depths=(8,))
    assert results["dataset"] == "synthetic" and "SYNTHETIC IMAGES" in results["banner"]
    # Deterministic pipelines, seeds and checkpoints: the same numbers as the uninterrupted run.
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())
    for entry, reference in zip(results["models"], whole["models"]):
        assert entry["id"] == reference["id"]
        assert entry["train_error"] == pytest.approx(reference["train_error"], abs=1e-6)
        assert entry["test_error"] == pytest.approx(reference["test_error"], abs=1e-6)
        for row, reference_row in zip(_rows(run_dir)[entry["id"]], _rows(tmp_path / "whole")[entry["id"]]):
            for key in ("loss", "accuracy", "test_subset_loss", "test_subset_accuracy"):
                assert row[key] == pytest.approx(reference_row[key], rel=1e-5, abs=1e-6), (entry["id"], key)

    # Options given with --resume: refused before anything is touched, or applied with a word.
    before = snapshot(run_dir)
    for extra, words in [(["--epochs", "5"], "--epochs cannot change"), (["--out", tmp_path / "x"], "cannot be combined"),
                         (["--preset", "quick"], "--preset cannot change")]:
        code, _, err = run_cli(main, ["--resume", run_dir, *extra], capsys)
        assert code == 2 and words in err and err.count("\n") == 1
    assert snapshot(run_dir) == before
    code, out, _ = run_cli(main, ["--resume", run_dir, "--xla", "off"], capsys)
    assert code == 0 and "resume: applying --xla off" in out
    assert json.loads((run_dir / "config.json").read_text())["xla"] == "off"


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
        (["--depths", "21"], "--depths 21: depths must be 6n+2"),
        (["--variants", "plain,wide"], "unknown variant 'wide'"),
        (["--preset", "huge"], "unknown preset 'huge'"),
        (["--data", "imagenet"], "imagenet"),
        (["--momentum", "1.5"], "--momentum must be in [0, 1), got 1.5"),
        (["--weight-decay", "-1"], "--weight-decay must be >= 0, got -1.0"),
        (["--instrument-images", "0"], "--instrument-images must be >= 1, got 0"),
        (["--lesion-images", "0"], "--lesion-images must be >= 1, got 0"),
        (["--curve-eval-size", "-5"], "--curve-eval-size must be >= 1"),
        (["--seed", "-1"], "--seed must be in 0..4294967295 (NumPy's 32-bit seeds), got -1"),
        (["--learning-rate", "inf"], "argument --learning-rate: expected a finite number, got 'inf'"),
        (["--depths", "8,14,8"], "--depths lists 8 more than once"),
        (["--variants", "plain,residual,plain"], "--variants lists plain more than once"),
        (["--strategy", "multiworker"], "needs the TF_CONFIG environment variable"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert_refused_in_one_line(main, SMOKE + extra, tmp_path / "run", capsys, message)


def test_an_unusable_out_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, _, err = run_cli(main, SMOKE + ["--out", tmp_path / "file"], capsys)
    assert code == 2 and "is a file, not a directory; choose another --out" in err
    code, _, err = run_cli(main, SMOKE + ["--out", tmp_path / "file" / "run"], capsys)
    assert code == 2 and f"{tmp_path / 'file'} is a file, not a directory" in err and err.count("\n") == 1
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    if os.access(read_only, os.W_OK):  # root ignores permissions: take a directory the kernel refuses
        read_only = pathlib.Path("/sys/residual-keras-run")
    code, _, err = run_cli(main, SMOKE + ["--out", read_only / "run"], capsys)
    assert code == 2 and str(read_only) in err and "choose another --out" in err
    assert err.count("\n") == 1
    assert (tmp_path / "file").read_text() == "x"


def _started_run(tmp_path, epochs=2):
    """A run directory as a killed run leaves it before training (no model trained yet)."""
    from tracks.common.run_directory import RunDirectory
    from tracks.vision.data import fingerprint, load_vision_data
    from tracks.vision.presets import PRESETS

    config = dataclasses.replace(PRESETS["smoke"], data="synthetic", depths=(8,), variants=("residual",),
                                 epochs=epochs, train_size=64)
    data = load_vision_data("synthetic", seed=0, train_size=64, log=lambda line: None,
                            synthetic_examples=(10_000, 2_000))
    run = RunDirectory.create("vision", config, out=tmp_path / "run",
                              data_fingerprint={**fingerprint(data), "banner": None})
    run.update_results(initialisation={})  # as if the instruments had run
    run.release()
    return run.path


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda run: (run / "results.json").write_text("{\"models\": [{"), "results.json is damaged"),
        (lambda run: (run / "config.json").write_text("[\"depths\", 8]"), "config.json does not describe a run"),
        (lambda run: (run / "metrics").mkdir() or (run / "metrics" / "residual-8.csv").write_text(
            "epoch,loss\n0,\x00zz\n"), "residual-8.csv is damaged"),
        (lambda run: (run / "backup" / "residual-8").mkdir(parents=True) or (
            run / "backup" / "residual-8" / "epoch-0001.weights.h5").write_bytes(b"\x89HDF garbage"),
         "no checkpoint in"),
    ],
    ids=["results", "config-list", "metrics-csv", "checkpoint"],
)
def test_a_damaged_run_file_is_one_line_naming_it(tmp_path, capsys, damage, words):
    run_dir = _started_run(tmp_path)
    damage(run_dir)
    code, _, err = run_cli(main, ["--resume", run_dir], capsys)
    assert code == 2 and words in err and err.count("\n") == 1
    assert "Traceback" not in err


def test_bad_folders_and_foreign_resume_dirs(tmp_path, capsys):
    (tmp_path / "images" / "train" / "cat").mkdir(parents=True)
    code, _, err = run_cli(main, ["--data", f"folder:{tmp_path / 'images'}", "--out", tmp_path / "run"], capsys)
    assert code == 2 and "test" in err and not (tmp_path / "run").exists()
    _write_image_folder(tmp_path / "one-class", classes=("cat",), per_class=4)
    code, _, err = run_cli(main, ["--data", f"folder:{tmp_path / 'one-class'}", "--out", tmp_path / "run"], capsys)
    assert code == 2 and "has one class only ('cat')" in err and not (tmp_path / "run").exists()
    foreign = tmp_path / "lang"
    foreign.mkdir()
    (foreign / "config.json").write_text(json.dumps({"track": "language"}))
    code, _, err = run_cli(main, ["--resume", foreign], capsys)
    assert code == 2 and "belongs to the 'language' track" in err
    assert json.loads((foreign / "config.json").read_text()) == {"track": "language"}


@pytest.mark.slow  # the path is in test_track_contract.py; these are the smoke grid's numbers
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
    code, _, err = run_cli(main, argv, capsys)  # diagnose never resumes: it asks for a new --out
    assert code == 2 and "choose another --out (diagnose always writes a new directory)" in err
    assert "--resume" not in err


@pytest.mark.slow  # two logical devices and a strategy: a process of its own
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


def test_every_variant_names_a_block_family_whose_kind_it_states():
    # the table names families by string (no Keras at import); each must exist and agree with what it says
    from residual_keras import blocks
    from tracks.vision.variants import VARIANTS

    for variant in VARIANTS.values():
        family = variant.block
        assert isinstance(family, blocks.BlockFamily), variant.name
        assert variant.plain == (family.kind == "plain") and variant.fixup == (family.norm == "fixup"), variant.name
        assert (variant.plain_twin is None) == variant.plain, variant.name
