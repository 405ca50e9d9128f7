"""Issue 51's edges: a swallowed Ctrl-C, figures a resumed run cannot draw, defaults that do not fit the data."""

import json
import os
import shutil
import signal
import subprocess
import sys
import types
import weakref
from pathlib import Path

import pytest

from tracks.common.command import raise_if_interrupted, signals_as_interruptions, take_interruption

ROOT = Path(__file__).resolve().parents[2]


def test_a_ctrl_c_that_python_swallows_in_a_finaliser_is_raised_again_at_the_next_safe_point():
    class Held:
        pass

    def finaliser(reference):  # as a WeakKeyDictionary's remove, run by the garbage collector
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):
            pass

    with signals_as_interruptions():
        held = Held()
        reference = weakref.ref(held, finaliser)
        del held  # the KeyboardInterrupt is raised in the finaliser: Python prints "Exception ignored" and goes on
        assert reference() is None
        with pytest.raises(KeyboardInterrupt):
            raise_if_interrupted()
        take_interruption()
        raise_if_interrupted()  # handled: nothing pending


def test_a_summary_that_links_a_figure_no_longer_there_says_so(tmp_path):
    from tracks.common.run import note_missing_figures

    run = types.SimpleNamespace(path=tmp_path)
    (tmp_path / "kept.png").write_bytes(b"png")
    (tmp_path / "summary.md").write_text("# Run\n\n![Kept](kept.png)\n\n![Gone](gone.png)\n![Gone again](gone.png)\n")
    said = []
    assert note_missing_figures(run, said.append) == ["gone.png"]
    text = (tmp_path / "summary.md").read_text()
    assert "## Missing figures" in text and "`gone.png`" in text and "`kept.png`" not in text.split("## Missing")[1]
    assert said == [f"summary.md links 1 figures that are not in {tmp_path}: gone.png"]


def test_the_language_presets_prompt_that_the_text_lacks_becomes_its_first_character(capsys):
    from tracks.common.track import RunContext
    from tracks.language.prepare import fit_defaults
    from tracks.language.presets import PRESETS
    from tracks.language.vocabulary import CharVocabulary

    vocab = CharVocabulary.from_text("ACGTTGCA")
    data = types.SimpleNamespace(vocab=vocab, train_tokens=vocab.encode("GATTACA"), name="text:dna.txt")
    said = []
    ctx = RunContext(PRESETS["smoke"], data=data, log=said.append)
    assert PRESETS["smoke"].prompt == "\n" and fit_defaults(ctx, given={}) == {"prompt": "G"}
    assert said and "--prompt: the preset's '\\n' has characters text:dna.txt does not have; using 'G'" in said[0]
    assert fit_defaults(ctx, given={"prompt": "\n"}) == {}  # typed: checked (and refused) by check(), not changed


@pytest.mark.slow
def test_a_resumed_toy_run_draws_again_the_figures_that_were_removed(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tracks.toy", "--preset", "smoke"]
    assert subprocess.run([*command, "--out", str(run)], env=env, capture_output=True, timeout=600).returncode == 0
    drawn = sorted(path.name for path in run.glob("*.png"))
    for path in run.glob("*.png"):
        path.unlink()
    done = subprocess.run([sys.executable, "-m", "tracks.toy", "--resume", str(run)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(path.name for path in run.glob("*.png")) == drawn and len(drawn) >= 10
    assert "## Missing figures" not in (run / "summary.md").read_text()
    assert "the figures at initialisation are missing" in done.stdout + done.stderr
    assert json.loads((run / "results.json").read_text())["initialisation"]


def _started(argv, tmp_path):
    """(config, run directory, data) as a vision run on `argv` would start, without training."""
    from tracks.common.environment import read_environment
    from tracks.common.options import train_parser
    from tracks.common.resume import check_run, start_or_resume
    from tracks.vision.track import TRACK

    args = train_parser(TRACK.prog, TRACK.usage, TRACK.config_cls, TRACK.presets,
                        TRACK.default_preset).parse_args([str(a) for a in argv])
    config, run, data = start_or_resume(TRACK, args, check_run(TRACK, args), read_environment())
    run.release()
    return config, run, data


def test_a_presets_training_subset_and_batch_fit_a_small_image_folder(tmp_path, capsys, monkeypatch):
    """The quick preset (6000 training images, batch 128) on a folder of 24: both lowered, one line each;
    typed, the same values are refused before any image is decoded or cached."""
    from test_vision_data import write_tree

    root = write_tree(tmp_path / "images", per_class=8)  # 24 training, 24 test images
    monkeypatch.setenv("RESIDUAL_KERAS_CACHE", str(tmp_path / "cache"))
    data_option = ["--data", f"folder:{root}", "--depths", "8"]
    config, run, data = _started([*data_option, "--out", tmp_path / "run"], tmp_path)
    out = capsys.readouterr().out
    assert (config.train_size, config.batch_size, len(data.y_train)) == (24, 24, 24)
    assert "--train-size: the preset's 6000 is more than the 24 training images of folder:" in out
    assert "--batch-size: the preset's 128 is more than the 24 training images of folder:" in out
    assert json.loads((run.path / "config.json").read_text())["train_size"] == 24
    for typed, message in [(["--train-size", "100"], "--train-size 100 is more than the 24 training images"),
                           (["--batch-size", "32", "--train-size", "40"], "--train-size 40 is more than the 24"),
                           (["--batch-size", "64"], "--batch-size 64 is more than the 24 training images"),
                           (["--lesion-images", "25"], "--lesion-images 25 is more than the 24 test images"),
                           (["--instrument-images", "30"], "--instrument-images 30 is more than the 24 training")]:
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        with pytest.raises(ValueError) as refused:
            _started([*data_option, *typed, "--out", tmp_path / "refused"], tmp_path)
        assert message in str(refused.value), typed
        assert not (tmp_path / "refused").exists() and not list((tmp_path / "cache").glob("**/*.npz"))


def test_a_typed_training_subset_below_the_presets_batch_makes_the_batch(capsys):
    from tracks.vision.presets import PRESETS

    assert PRESETS["quick"].adapted_to({"train_size": 40}).batch_size == 40
    assert "--batch-size: the preset's 128 is more than --train-size 40; using 40" in capsys.readouterr().out
    assert PRESETS["quick"].adapted_to({"train_size": 40, "batch_size": 64}) is PRESETS["quick"]


def _as_an_unprivileged_user():
    """The command prefix under which file modes bind: none for a user, root without its override of them."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only folder cannot be made to bind")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def test_an_out_in_a_read_only_folder_is_refused_before_tensorflow(tmp_path):
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    cases = [{"module": f"tracks.{track}.__main__", "argv": ["--preset", "smoke", "--out", str(read_only / "run")]}
             for track in ("vision", "language", "toy")]
    cases.append({"module": "tracks.vision.__main__", "argv": ["diagnose", "--out", str(read_only / "run")]})
    cases.append({"module": "tracks.__main__", "argv": ["exercises", "start", "1", str(read_only / "lab")]})
    answers = subprocess.run([*_as_an_unprivileged_user(), sys.executable, str(ROOT / "tests/tracks/refusal_runner.py")],
                             input=json.dumps(cases), capture_output=True, text=True, cwd=ROOT, check=True, timeout=300)
    for case, line in zip(cases, answers.stdout.splitlines(), strict=True):
        answer = json.loads(line)
        assert answer["code"] == 2 and answer["stderr"].count("\n") == 1, (case, answer)
        assert answer["stderr"].startswith("error: ") and str(read_only) in answer["stderr"], (case, answer)
        assert "not writable" in answer["stderr"] or "Permission denied" in answer["stderr"], (case, answer)
        assert answer["imported"] == [], case
    assert not list(read_only.iterdir())
