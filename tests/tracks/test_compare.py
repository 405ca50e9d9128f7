"""`python -m tracks.X compare RUN REFERENCE`: a class run beside the committed reference, with bands."""

import json
import pathlib

from track_helpers import run_cli
from tracks.language.__main__ import main as language_main
from tracks.vision.__main__ import main as vision_main


def _run(path, train_errors, gains, *, track="vision", dataset="cifar10", seed=0):
    path.mkdir(parents=True)
    models = [{"id": model_id, "variant": model_id.split("-")[0], "depth": int(model_id.split("-")[1]),
               "train_error": error, "test_error": error + 0.01} for model_id, error in train_errors.items()]
    initialisation = {model_id: {"gradient_gain": gain} for model_id, gain in gains.items()}
    (path / "results.json").write_text(json.dumps(
        {"track": track, "dataset": dataset, "models": models, "initialisation": initialisation}))
    (path / "config.json").write_text(json.dumps(
        {"track": track, "preset": "quick", "seed": seed, "variants": ["plain", "residual"], "depths": [8, 32]}))
    return path


def test_compare_prints_both_runs_their_bands_and_marks_what_is_outside(tmp_path, capsys):
    reference = _run(tmp_path / "reference", {"plain-8": 0.45, "plain-32": 0.58, "residual-8": 0.46,
                                              "residual-32": 0.39}, {"plain-32": 181.0, "residual-32": 13.5})
    (reference / "bands.json").write_text(json.dumps({
        "rule": "the seeds' range widened by 3 points",
        "bands": {"plain-32 training error": [0.53, 0.61], "residual-32 training error": [0.35, 0.42]}}))
    # A class run: plain-32 inside its band, residual-32 above it, so the shortcut's finding fails.
    run = _run(tmp_path / "run", {"plain-8": 0.44, "plain-32": 0.55, "residual-8": 0.45, "residual-32": 0.52},
               {"plain-32": 150.0, "residual-32": 20.0}, seed=3)
    code, out, err = run_cli(vision_main, ["compare", run, reference], capsys)
    assert code == 0, err
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    assert "58.0%" in rows["plain-32 training error"] and "55.0%" in rows["plain-32 training error"]
    assert "53-61%" in rows["plain-32 training error"] and "OUTSIDE" not in rows["plain-32 training error"]
    assert "52.0%" in rows["residual-32 training error"] and rows["residual-32 training error"].endswith("OUTSIDE")
    assert "181" in rows["plain-32 gradient gain at initialisation"]
    assert "seed 3" in out and "seed 0" in out
    assert "bands: the seeds' range widened by 3 points" in out
    assert "1 of 2 values with a band lie outside it" in out
    assert rows["The shortcut (plain minus residual)"].endswith("DIFFERS")


def test_compare_refuses_what_is_not_a_run_of_this_track_in_one_line(tmp_path, capsys):
    reference = _run(tmp_path / "reference", {"plain-8": 0.45}, {})
    code, _, err = run_cli(vision_main, ["compare", tmp_path / "nothing", reference], capsys)
    assert code == 2 and "RUN" in err and "no results.json there" in err and err.count("\n") == 1
    language = _run(tmp_path / "language", {"pre-6": 1.5}, {}, track="language")
    code, _, err = run_cli(vision_main, ["compare", language, reference], capsys)
    assert code == 2 and "is a 'language' run, not a 'vision' run" in err


def test_language_compare_uses_the_validation_losses(tmp_path, capsys):
    def lm_run(path, loss):
        path.mkdir()
        (path / "results.json").write_text(json.dumps({"track": "language", "dataset": "pydoc", "models": [
            {"id": "pre-6-warmup0", "variant": "pre", "depth": 6, "warmup": 0, "val_loss": loss,
             "train_loss": loss - 0.1}]}))
        (path / "config.json").write_text(json.dumps({"track": "language", "preset": "quick", "seed": 0,
                                                      "variants": ["pre"]}))
        return path

    reference, run = lm_run(tmp_path / "reference", 1.52), lm_run(tmp_path / "run", 1.61)
    (reference / "bands.json").write_text(json.dumps({"bands": {"pre-6-warmup0 validation loss": [1.49, 1.56]}}))
    code, out, err = run_cli(language_main, ["compare", run, reference], capsys)
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("pre-6-warmup0 validation loss"))
    assert "1.520" in line and "1.610" in line and "1.49-1.56" in line and line.endswith("OUTSIDE")


REFERENCE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference"


def _reference_runs_with_bands():
    return sorted(path.name for path in REFERENCE.iterdir() if (path / "bands.json").is_file())


def test_every_committed_reference_with_bands_is_compared_and_lies_in_its_own_bands(capsys):
    """`compare` on the committed folders themselves: each reference against itself, every banded
    figure printed and inside its band (the bands were made to hold it)."""
    names = _reference_runs_with_bands()
    assert len(names) >= 4, names
    for name in names:
        main = vision_main if name.startswith("vision") else language_main
        bands = json.loads((REFERENCE / name / "bands.json").read_text())["bands"]
        code, out, err = run_cli(main, ["compare", REFERENCE / name, REFERENCE / name], capsys)
        assert code == 0, (name, err)
        assert f"0 of {len(bands)} values with a band lie outside it" in out, (name, out[-500:])
        assert "OUTSIDE" not in out
