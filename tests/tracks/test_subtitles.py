"""The line under every figure's title names the run it comes from, and only what that run did.

A training run's figures name the data, the seed, the training set and the
schedule; a `diagnose` run trains nothing, so its figures name the data, the
seed and the batch the instruments measured on, and no epochs or training-set
size (tracks/common/run.py: `instrument_subtitle`, `diagnose_subtitle`).
"""

import dataclasses
import types

import numpy as np
import pytest

from tracks.common import cli, instruments, run
from tracks.common.track import RunContext
from tracks.language.presets import PRESETS as LANGUAGE_PRESETS
from tracks.language.track import TRACK as LANGUAGE
from tracks.vision.presets import PRESETS as VISION_PRESETS
from tracks.vision.track import TRACK as VISION

pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model

CIFAR = types.SimpleNamespace(title="CIFAR-10", y_train=np.zeros(50_000), banner=None, plot_banner=None)
SHAKESPEARE = types.SimpleNamespace(title="Tiny Shakespeare", banner=None, plot_banner=None)


def test_a_diagnose_subtitle_names_the_data_the_seed_and_the_batch_and_no_training():
    config = dataclasses.replace(VISION_PRESETS["mechanism"], seed=3)
    batch = np.zeros((32, 32, 32, 3), "float32")
    assert run.diagnose_subtitle(VISION, RunContext(config, data=CIFAR), batch) == (
        "CIFAR-10, seed 3 (mechanism preset): at initialisation, nothing trained; "
        "measured on a batch of 32 training images")
    config = dataclasses.replace(LANGUAGE_PRESETS["quick"], seed=0)
    windows = np.zeros((8, 64), "int32")
    subtitle = run.diagnose_subtitle(LANGUAGE, RunContext(config, data=SHAKESPEARE), windows)
    assert subtitle == ("Tiny Shakespeare, seed 0 (quick preset): at initialisation, nothing trained; "
                        "measured on a batch of 8 validation windows")
    assert "steps" not in subtitle and "epochs" not in subtitle


def test_a_training_runs_subtitle_names_its_training_and_the_instruments_batch():
    config = dataclasses.replace(VISION_PRESETS["quick"], seed=1)
    batch = np.zeros((32, 32, 32, 3), "float32")
    assert VISION.parts.subtitle(RunContext(config, data=CIFAR)) == (
        f"CIFAR-10, seed 1: 50,000 training images, {config.epochs} epochs, width {config.width} (quick preset)")
    assert run.instrument_subtitle(VISION, RunContext(config, data=CIFAR), batch) == (
        f"{VISION.parts.subtitle(RunContext(config, data=CIFAR))}; at initialisation, 32 training images")
    config = LANGUAGE_PRESETS["quick"]
    assert run.instrument_subtitle(LANGUAGE, RunContext(config, data=SHAKESPEARE), np.zeros((8, 64))) == (
        f"{LANGUAGE.parts.subtitle(RunContext(config, data=SHAKESPEARE))}; at initialisation, 8 validation windows")
    assert f"{config.steps:,} steps" in LANGUAGE.parts.subtitle(RunContext(config, data=SHAKESPEARE))


def test_diagnose_draws_its_figures_under_the_diagnose_subtitle(tmp_path, monkeypatch):
    """The `diagnose` command's figures get `diagnose_subtitle`, a training run's `instrument_subtitle`."""
    drawn = []

    def at_initialisation(models, x, out_dir, **options):  # records the subtitle instead of measuring
        drawn.append(options["subtitle"])
        return {}

    monkeypatch.setattr(instruments, "at_initialisation", at_initialisation)
    monkeypatch.setattr(run, "initial_models", lambda track, ctx, specs: [])
    code = cli.main(VISION, ["diagnose", "--preset", "smoke", "--data", "synthetic", "--depths", "8",
                             "--variants", "plain", "--seed", "2", "--out", str(tmp_path / "run")])
    assert code == 0
    (subtitle,) = drawn
    config = VISION_PRESETS["smoke"]
    assert subtitle == ("synthetic images, seed 2 (smoke preset): at initialisation, nothing trained; "
                        f"measured on a batch of {config.instrument_images} training images")
    data = types.SimpleNamespace(title="synthetic images", y_train=np.zeros(256), banner=None, plot_banner=None)
    parts = dataclasses.replace(
        VISION.parts, instrument_batch=lambda ctx: (np.zeros((ctx.config.instrument_images, 32, 32, 3)), None))
    track = dataclasses.replace(VISION, load_parts=lambda: parts)
    ctx = RunContext(config, types.SimpleNamespace(path=tmp_path), data)
    run.measure_at_initialisation(track, ctx, [])
    assert drawn[-1] == run.instrument_subtitle(VISION, ctx, np.zeros((config.instrument_images, 1)))
    assert "256 training images" in drawn[-1] and "epochs" in drawn[-1]
