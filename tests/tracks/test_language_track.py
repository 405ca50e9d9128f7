"""End to end: `python -m tracks.language` on the pydoc corpus and on a text file."""

import json

import pytest

from track_helpers import Killed, assert_refused_in_one_line, kill_at, run_cli, snapshot
from tracks.common.training import read_metrics_rows
from tracks.language.__main__ import main

SMOKE = ["--preset", "smoke", "--data", "pydoc"]
# One block, 20 steps, and no XLA: its compilation (about 8 s a model here) would dominate these runs;
# the smoke run below keeps the preset's XLA and checks that it really ran.
FAST = ["--depths", "1", "--variants", "pre,plain", "--steps", "20", "--eval-interval", "10", "--xla", "off"]
REPORT_FILES = ["config.json", "vocab.json", "results.json", "loss_curves.png", "gradient_flow.png",
                "samples.md", "summary.md", "best_model.keras"]


def _check_run(run_dir, ids, intervals):
    for name in REPORT_FILES:
        assert (run_dir / name).stat().st_size > 0, name
    results = json.loads((run_dir / "results.json").read_text())
    assert sorted(m["id"] for m in results["models"]) == sorted(ids)
    for entry in results["models"]:
        rows = read_metrics_rows(run_dir / "metrics" / f"{entry['id']}.csv")
        assert [row["epoch"] for row in rows] == list(range(intervals))
        assert entry["train_loss"] == pytest.approx(rows[-1]["loss"])
        assert entry["val_bpc"] == pytest.approx(entry["val_loss"] / 0.6931471805599453)
        assert len(entry["sample"]) > 0 and not entry["diverged"]
    best = min(results["models"], key=lambda m: m["val_loss"])
    assert results["best_model"]["id"] == best["id"]
    samples = (run_dir / "samples.md").read_text()
    assert all(f"## {i} " in samples for i in ids)
    summary = (run_dir / "summary.md").read_text()
    assert "![Validation loss](loss_curves.png)" in summary
    assert "![Gradient flow at initialisation](gradient_flow.png)" in summary
    return results


@pytest.mark.slow  # every variant with the preset's XLA; the tests below train pre and plain
def test_smoke_run_on_pydoc_writes_every_file_and_samples(tmp_path, capsys):
    # Every variant, at one depth (the whole smoke preset, both depths, runs in .ci/docker_check).
    code, out, _ = run_cli(main, SMOKE + ["--depths", "1", "--out", tmp_path / "run"], capsys)
    assert code == 0
    ids = [f"{v}-1-warmup0" for v in ("pre", "post", "plain", "rezero")]
    results = _check_run(tmp_path / "run", ids, intervals=2)
    assert results["dataset"] == "pydoc"
    assert all(entry["xla"] for entry in results["models"])  # the preset's XLA on a CPU, and it held
    code, out, err = run_cli(main, ["sample", tmp_path / "run", "--prompt", "def ", "--num-chars", "40",
                                    "--seed", "1"], capsys)
    assert code == 0, err
    assert out.startswith("def ") and len(out.rstrip("\n")) >= 40
    vocab, model = tmp_path / "run" / "vocab.json", tmp_path / "run" / "best_model.keras"
    good_vocab, good_model = vocab.read_bytes(), model.read_bytes()
    for path, damage, words in [(vocab, b"{\"kind\": \"residual_keras.CharVocab", "vocab.json is not a valid vocabulary"),
                                (model, good_model[:2000], "best_model.keras cannot be loaded")]:
        path.write_bytes(damage)
        code, _, err = run_cli(main, ["sample", tmp_path / "run"], capsys)
        assert code == 2 and words in err and err.count("\n") == 1
        path.write_bytes(good_vocab if path == vocab else good_model)


def test_smoke_run_on_a_text_file_with_warmup_grid(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("To be, or not to be, that is the question.\n" * 200)
    argv = ["--preset", "smoke", "--data", f"text:{text}", *FAST, "--warmup-steps", "0,5",
            "--warmup-variants", "pre", "--out", tmp_path / "run"]
    code, out, err = run_cli(main, argv, capsys)
    assert code == 0, err
    # The sample command suggested works on this text, which has no "ROMEO:" characters.
    suggested = out.split("sample from it with python -m tracks.language ")[1].splitlines()[0]
    assert suggested == f"sample {tmp_path / 'run'}"
    assert f"`python -m tracks.language {suggested}`" in (tmp_path / "run" / "summary.md").read_text()
    code, _, err = run_cli(main, [*suggested.split(), "--num-chars", "5"], capsys)
    assert code == 0, err
    # pre with and without warm-up; plain once, with the longest
    ids = ["pre-1-warmup0", "pre-1-warmup5", "plain-1-warmup5"]
    _check_run(tmp_path / "run", ids, intervals=2)
    vocab = json.loads((tmp_path / "run" / "vocab.json").read_text())
    assert vocab  # the vocabulary of the training text is saved with the run
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"] == f"text:{text}" and config["data_fingerprint"]["source"] == f"text:{text}"
    # The text gained characters since: --resume refuses it before vocab.json is rewritten.
    with text.open("a") as handle:
        handle.write("Whether 'tis nobler in the mind to suffer\n")
    before = snapshot(tmp_path / "run")
    code, _, err = run_cli(main, ["--resume", tmp_path / "run"], capsys)
    assert code == 2 and "the data differ from those the run was trained on (train_chars: 7740 then" in err
    assert err.count("\n") == 1 and snapshot(tmp_path / "run") == before


def test_killed_runs_resume_to_the_uninterrupted_result(tmp_path, capsys, monkeypatch):
    # Dropout: the resumed model must also draw the masks the uninterrupted one draws.
    argv = SMOKE + FAST + ["--dropout", "0.1"]
    code, _, err = run_cli(main, argv + ["--out", tmp_path / "whole"], capsys)
    assert code == 0, err
    run_dir = tmp_path / "run"
    for number, (model_id, point) in enumerate([("pre-1-warmup0", "after-checkpoint"),
                                               ("pre-1-warmup0", "before-record"),
                                               ("plain-1-warmup0", "after-row")]):
        kill_at(monkeypatch, model_id, point)
        with pytest.raises(Killed):
            main([str(a) for a in (["--resume", run_dir] if number else argv + ["--out", run_dir])])
        monkeypatch.undo()
        if point == "after-checkpoint":
            assert (run_dir / "backup" / model_id / "epoch-0001.seeds.npz").exists()
    first_rows = read_metrics_rows(run_dir / "metrics" / "pre-1-warmup0.csv")
    code, out, _ = run_cli(main, ["--resume", run_dir], capsys)
    assert code == 0 and "1 of 2 models already finished" in out
    results = _check_run(run_dir, ["pre-1-warmup0", "plain-1-warmup0"], intervals=2)
    assert read_metrics_rows(run_dir / "metrics" / "pre-1-warmup0.csv") == first_rows  # never retrained
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())
    for entry, reference in zip(results["models"], whole["models"]):
        assert entry["id"] == reference["id"]
        for key in ("train_loss", "val_loss"):
            assert entry[key] == pytest.approx(reference[key], rel=1e-5)
        assert entry["sample"] == reference["sample"]


def test_a_diverging_model_is_a_result(tmp_path, capsys):
    argv = SMOKE + FAST + ["--variants", "rezero", "--learning-rate", "1e30", "--min-learning-rate", "1e29",
                           "--grad-clip", "0", "--out", tmp_path / "run"]
    code, out, _ = run_cli(main, argv, capsys)
    assert code == 0
    (entry,) = json.loads((tmp_path / "run" / "results.json").read_text())["models"]
    assert entry["diverged"] and entry["sample"] is None
    assert f"rezero-1-warmup0 diverged at step {entry['diverged_step']} in" in out
    assert "diverged" in (tmp_path / "run" / "summary.md").read_text()
    code, _, err = run_cli(main, ["sample", tmp_path / "run"], capsys)
    assert code == 2 and "every model of" in err and "diverged (1 of 1)" in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--embed-dim", "30", "--num-heads", "4"], "--embed-dim 30 is not divisible by --num-heads 4"),
        (["--variants", "pre,sandwich"], "unknown variant 'sandwich'"),
        (["--preset", "huge"], "unknown preset 'huge'"),
        (["--data", "wikipedia"], "wikipedia"),
        (["--data", "text:/no/such/file.txt"], "/no/such/file.txt"),
        (["--prompt", "\u2603"], "\u2603"),
        (["--instrument-sequences", "0"], "--instrument-sequences must be >= 1, got 0"),
        (["--seed", "-1"], "--seed must be in 0..4294967295 (NumPy's 32-bit seeds), got -1"),
        (["--sample-chars", "-1"], "--sample-chars must be >= 1, got -1"),
        (["--sample-chars", "4294967296"], "--sample-chars must be at most 100,000, got 4,294,967,296"),
        (["--beta2", "2"], "--beta2 must be in [0, 1), got 2.0"),
        (["--grad-clip", "-1"], "--grad-clip must be >= 0 (0 = off), got -1.0"),
        (["--weight-decay", "-1"], "--weight-decay must be >= 0, got -1.0"),
        (["--eval-batches", "0"], "--eval-batches must be >= 1"),
        (["--warmup-steps", "0,10,0"], "--warmup-steps lists 0 more than once"),
        (["--variants", "pre,post", "--warmup-variants", "plain"],
         "--warmup-variants must name some of --variants (pre, post), got plain"),
        (["--strategy", "multiworker"], "needs the TF_CONFIG environment variable"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert_refused_in_one_line(main, SMOKE + extra, tmp_path / "run", capsys, message)


def test_a_text_of_one_character_is_refused_before_anything_is_written(tmp_path, capsys):
    # Its model would have one output: nothing to predict, and Keras' loss refuses the shape mid-training.
    for text in ("a" * 5000, "a" * 4500 + "ab" * 250):  # the second has its "b"s in the validation part only
        (tmp_path / "one.txt").write_text(text)
        assert_refused_in_one_line(main, SMOKE + ["--data", f"text:{tmp_path / 'one.txt'}"], tmp_path / "run",
                                   capsys, "has 1 distinct character in its training part ('a'): a character "
                                           "model needs at least 2")


def test_resume_refuses_a_vision_run_and_sample_refuses_an_unfinished_one(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"track": "vision"}))
    code, _, err = run_cli(main, ["--resume", tmp_path], capsys)
    assert code == 2 and "belongs to the 'vision' track" in err
    code, _, err = run_cli(main, ["sample", tmp_path], capsys)
    assert code == 2 and "no best_model.keras" in err


@pytest.mark.slow  # the path is in test_track_contract.py; these are the smoke grid's numbers
def test_diagnose_draws_the_instruments_without_training(tmp_path, capsys):
    argv = ["diagnose", "--preset", "smoke", "--data", "pydoc", "--out", tmp_path / "diag"]
    code, _, err = run_cli(main, argv, capsys)
    assert code == 0, err
    for name in ("gradient_flow.png", "activation_growth.png", "jacobian.png", "summary.md"):
        assert (tmp_path / "diag" / name).stat().st_size > 0
    summary = json.loads((tmp_path / "diag" / "results.json").read_text())["initialisation"]
    assert set(summary) == {f"{v}-{d}" for v in ("pre", "post", "plain", "rezero") for d in (1, 2)}
    # ReZero blocks start as the identity: the stream's Jacobian is exactly 1.
    assert summary["rezero-2"]["jacobian_norm"] == pytest.approx(1.0, abs=1e-4)


def test_the_quick_presets_warmup_comparison_follows_the_variants_chosen():
    """The collapse demo, `diagnose --variants pre,plain ...` on the quick preset, is not refused for post."""
    from tracks.common.config import config_from_args
    from tracks.language.presets import PRESETS, LanguageConfig
    from tracks.common.options import train_parser

    parser = train_parser("python -m tracks.language", "", LanguageConfig, PRESETS, "quick")
    config = config_from_args(parser.parse_args(["--variants", "pre,plain"]), PRESETS, LanguageConfig)
    assert config.variants == ("pre", "plain") and config.warmup_variants == ("pre",)
    config = config_from_args(parser.parse_args(["--variants", "plain,rezero"]), PRESETS, LanguageConfig)
    assert config.warmup_variants is None  # the preset names none of them: every one is compared
    explicit = parser.parse_args(["--variants", "pre,plain", "--warmup-variants", "post"])
    with pytest.raises(Exception, match="--warmup-variants must name some of --variants"):
        config_from_args(explicit, PRESETS, LanguageConfig)  # what the user wrote is still checked
