"""`python -m tracks.X compare RUN REFERENCE`: a class run beside the committed reference, with bands."""

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]

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


def _diagnose_run(path, measured, *, track="vision-diagnose", seed=0):
    """A `diagnose` run's folder: no models trained, the instruments at initialisation of each model.

    measured: {model_id: (gradient gain, Jacobian norm, converged, stream growth)}.
    """
    path.mkdir(parents=True)
    initialisation = {model_id: {"gradient_gain": gain, "jacobian_norm": jacobian, "jacobian_converged": converged,
                                 "jacobian_iterations": 10, "stream_growth": growth}
                      for model_id, (gain, jacobian, converged, growth) in measured.items()}
    (path / "results.json").write_text(json.dumps(
        {"track": track, "dataset": "cifar10", "models": [], "initialisation": initialisation}))
    (path / "config.json").write_text(json.dumps(
        {"track": track, "preset": "mechanism", "seed": seed, "variants": ["plain-nonorm", "residual-nonorm"],
         "depths": [20], "instrument_images": 32}))
    return path


def _cells(out):
    """{figure: [reference, this run, band, mark...]}: the table's rows cut at the column gaps."""
    rows = (re.split(r"\s{2,}", line.strip()) for line in out.splitlines())
    return {cells[0]: cells[1:] for cells in rows if len(cells) >= 4}


def test_compare_sets_a_diagnose_run_beside_a_diagnose_reference_with_its_bands(tmp_path, capsys):
    reference = _diagnose_run(tmp_path / "reference", {"plain-nonorm-20": (0.582, 5.67, False, 0.331),
                                                       "residual-nonorm-20": (15.4, 105.0, False, 29.0)})
    (reference / "bands.json").write_text(json.dumps({"rule": "seeds 0-2 widened by half", "bands": {
        "residual-nonorm-20 gradient gain at initialisation": [10.0, 25.0],
        "plain-nonorm-20 stream growth RMS(x_L)/RMS(x_0)": [0.2, 0.5]}}))
    # A class's diagnose with another seed: its gain is far above the band; its Jacobian estimate converged.
    run = _diagnose_run(tmp_path / "run", {"plain-nonorm-20": (0.61, 5.9, True, 0.35),
                                           "residual-nonorm-20": (40.0, 130.0, False, 31.0)}, seed=4)
    code, out, err = run_cli(vision_main, ["compare", run, reference], capsys)
    assert code == 0, err
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    gain = rows["residual-nonorm-20 gradient gain at initialisation"]
    assert "15.4" in gain and "40" in gain and "10-25" in gain and gain.endswith("OUTSIDE")
    growth = rows["plain-nonorm-20 stream growth RMS(x_L)/RMS(x_0)"]
    assert "0.331" in growth and "0.35" in growth and "OUTSIDE" not in growth
    # Each run's Jacobian is shown as what it is: a lower bound (≥) unless that run's estimate converged.
    cells = _cells(out)
    assert cells["plain-nonorm-20 ‖dx_L/dx_0‖ at initialisation"] == ["≥ 5.67", "5.9", "—"]
    assert cells["residual-nonorm-20 ‖dx_L/dx_0‖ at initialisation"] == ["≥ 105", "≥ 130", "—"]
    assert "≥: a lower bound" in out and "bands: seeds 0-2 widened by half" in out
    assert "1 of 2 values with a band lie outside it" in out
    assert "seed 4" in out and "training error" not in out


def test_compare_refuses_a_training_run_beside_a_diagnose_reference_and_back_in_one_line(tmp_path, capsys):
    training = _run(tmp_path / "training", {"plain-8": 0.45}, {"plain-8": 3.4})
    diagnose = _diagnose_run(tmp_path / "diagnose", {"plain-nonorm-20": (0.58, 5.67, False, 0.33)})
    code, out, err = run_cli(vision_main, ["compare", training, diagnose], capsys)
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert "is a training run and REFERENCE" in err and "a diagnose run (networks at initialisation" in err
    code, _, err = run_cli(vision_main, ["compare", diagnose, training], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "is a diagnose run (networks at initialisation, nothing trained) and REFERENCE" in err
    assert "a training run: compare a diagnose run with a diagnose reference" in err
    other = _diagnose_run(tmp_path / "other", {"pre-6": (1.5, 10.9, False, 1.4)}, track="language-diagnose")
    code, _, err = run_cli(vision_main, ["compare", other, diagnose], capsys)
    assert code == 2 and "is a 'language-diagnose' run, not a 'vision' run" in err


def _diagnose_references():
    return sorted(path.name for path in REFERENCE.iterdir() if (path / "results.json").is_file()
                  and json.loads((path / "results.json").read_text())["track"].endswith("-diagnose"))


def test_every_committed_diagnose_reference_is_compared_with_itself(capsys):
    """`compare` on the committed diagnose folders: every model's three instruments, equal on both sides,
    the Jacobians that did not converge shown as lower bounds."""
    names = _diagnose_references()
    assert {"vision-diagnose-cifar10-s0", "language-diagnose-tinyshakespeare-s0"} <= set(names), names
    for name in names:
        main = vision_main if name.startswith("vision") else language_main
        measured = json.loads((REFERENCE / name / "results.json").read_text())["initialisation"]
        code, out, err = run_cli(main, ["compare", REFERENCE / name, REFERENCE / name], capsys)
        assert code == 0, (name, err)
        assert "data: the same data as the reference, byte for byte" in out and "differ in" not in out
        cells = _cells(out)
        for model_id, values in measured.items():
            bound = "" if values["jacobian_converged"] else "≥ "
            jacobian = f"{bound}{values['jacobian_norm']:.3g}"
            assert cells[f"{model_id} ‖dx_L/dx_0‖ at initialisation"] == [jacobian, jacobian, "—"], name
            gain = cells[f"{model_id} gradient gain at initialisation"]
            assert gain[0] == gain[1] and gain[2] == "—", (name, gain)
        assert len([line for line in out.splitlines() if " at initialisation " in line]) == 2 * len(measured)
        assert "not in this run" not in out and "OUTSIDE" not in out


def _fingerprinted_run(path, source, sha256, train_images=12_000, test_images=10_000, classes=None):
    """A training run whose config.json records the data's fingerprint, as every run writes it."""
    run = _run(path, {"plain-8": 0.45, "residual-8": 0.44}, {})
    config = json.loads((run / "config.json").read_text())
    config["data_fingerprint"] = {"source": source, "train_images": train_images, "val_images": 0,
                                  "test_images": test_images,
                                  "classes": classes or ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                                         "frog", "horse", "ship", "truck"],
                                  "sha256": sha256}
    (run / "config.json").write_text(json.dumps(config))
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps({**results, "dataset": source}))
    return run


def test_compare_judges_the_data_by_what_they_are_not_by_their_path(tmp_path, capsys):
    reference = _fingerprinted_run(tmp_path / "reference", "folder:/tmp/work/data/cifar10-jpeg", "a" * 64)

    def data_lines(run):
        code, out, err = run_cli(vision_main, ["compare", run, reference], capsys)
        assert code == 0, err
        return [line for line in out.splitlines() if line.startswith(("data:", "note:"))]

    # The same folder copied elsewhere: the same images, whatever the path.
    copied = data_lines(_fingerprinted_run(tmp_path / "copied", "folder:/home/student/cifar10-jpeg", "a" * 64))
    assert copied == ["data: the same data as the reference, byte for byte"]
    # CIFAR-10 from TFDS beside a folder of its JPEGs: the same data set (classes, sizes), other bytes.
    tfds = data_lines(_fingerprinted_run(tmp_path / "tfds", "cifar10", "b" * 64))
    assert len(tfds) == 1 and not any("differ in" in line for line in tfds), tfds
    assert tfds[0].startswith("data: the same data set as the reference (12,000 training images, 10,000 test "
                              "images, 10 classes (airplane, automobile, bird, ...))")
    assert tfds[0].endswith("though not byte for byte (another copy of it, from another source or in another file "
                            "format, or another random subset), which moves the numbers a little; the reference "
                            "read cifar10-jpeg (image folder), this run CIFAR-10")
    assert "/tmp/" not in tfds[0]
    # A larger training set is other data, and the note says which part differs.
    full = data_lines(_fingerprinted_run(tmp_path / "full", "cifar10", "c" * 64, train_images=50_000))
    assert full[0] == ("data: other data than the reference's: the reference used cifar10-jpeg (image folder), "
                       "this run CIFAR-10; training images: 12,000 in the reference, 50,000 in this run")
    assert full[1].startswith("note: the runs differ in data:")
    # The synthetic fallback: other classes.
    synthetic = data_lines(_fingerprinted_run(tmp_path / "synthetic", "synthetic", "d" * 64, test_images=2_000,
                                              classes=["horizontal_stripes", "checkerboard"]))
    assert "the reference used cifar10-jpeg (image folder), this run synthetic images" in synthetic[0]
    assert "test images: 10,000 in the reference, 2,000 in this run" in synthetic[0]
    assert ("classes: 10 (airplane, automobile, bird, ...) in the reference, 2 (horizontal_stripes, checkerboard) "
            "in this run") in synthetic[0]


def test_compare_orders_ids_of_any_shape_and_accepts_the_nonorm_reference(capsys):
    # fixup-56 beside plain-nonorm-56: a number met a word in the sort key (TypeError before).
    from tracks.common.report import id_order

    ids = ["plain-nonorm-56", "fixup-56", "plain-32", "plain-8", "residual-56", "pre-6-warmup100", "pre-6-warmup0"]
    assert sorted(ids, key=id_order) == ["fixup-56", "plain-8", "plain-32", "plain-nonorm-56", "pre-6-warmup0",
                                         "pre-6-warmup100", "residual-56"]
    reference = ROOT / "docs" / "reference" / "vision-nonorm-synthetic-s0"
    code, out, err = run_cli(vision_main, ["compare", reference, reference], capsys)
    assert code == 0, err
    assert "fixup-56 training error" in out and "outside" not in out.split("fixup-56 training error")[1].splitlines()[0]


def test_each_track_names_its_own_setup_fields_and_compare_notes_them(tmp_path, capsys):
    """compare knows no track: the fields a run's setup differs in come from the track (`Track.setup_fields`)."""
    import dataclasses

    from tracks.registry import TRACKS, track

    for name in TRACKS:
        declared = track(name).setup_fields
        fields = {field.name for field in dataclasses.fields(track(name).config_cls)}
        assert set(declared) <= {"training", "diagnose"} and declared, name
        assert {field for kind in declared.values() for field in kind} <= fields, name
    reference = _run(tmp_path / "reference", {"plain-8": 0.45, "residual-8": 0.40}, {})
    run = _run(tmp_path / "run", {"plain-8": 0.44, "residual-8": 0.41}, {})
    for path, epochs, seed in ((reference, 10, 0), (run, 12, 3)):
        config = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**config, "epochs": epochs, "seed": seed}))
    code, out, err = run_cli(vision_main, ["compare", run, reference], capsys)
    assert code == 0, err
    assert "note: the runs differ in epochs: the bands are for the reference's setup" in out  # vision's own field
    assert "seed" not in out.split("note:")[1].split("\n")[0]  # the seed changes no setup
