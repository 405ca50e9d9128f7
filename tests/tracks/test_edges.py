"""Issue 51's edges: a swallowed Ctrl-C, figures a resumed run cannot draw, defaults that do not fit the data."""

import json
import os
import signal
import subprocess
import sys
import types
import weakref
from pathlib import Path

import pytest

from tracks.common.run_command import raise_if_interrupted, signals_as_interruptions, take_interruption

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
