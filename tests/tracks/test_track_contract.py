"""What every track promises, tested the same way on each (vision, language, toy, and any new one).

A track is a `Track` (tracks/common/track.py) run by `tracks.common.cli.main`.
Whatever it trains, its command line must: help with every preset; refuse bad
input in one line, exit 2, before writing anything; train a grid into a run
directory with a results entry per model and a summary; resume a finished run
without training again; compare a run with a reference; diagnose at
initialisation; and stop on Ctrl-C with exit 130 and its lock released.
"""

import contextlib
import importlib
import io
import json
import pathlib

import pytest

from tracks.common import cli
from tracks.common import run as run_module
from tracks.common.results import SCHEMA
from tracks.common.run_directory import RunDirectory

TRACKS_DIR = pathlib.Path(__file__).resolve().parents[2] / "tracks"
TRACK_NAMES = sorted(path.parent.name for path in TRACKS_DIR.glob("*/track.py") if path.parent.name != "common")

# The smallest training each track has: a few seconds of every model of a tiny grid.
TINY = {
    "vision": ["--preset", "smoke", "--data", "synthetic", "--depths", "8", "--epochs", "1"],
    "language": ["--preset", "smoke", "--data", "pydoc", "--depths", "1", "--variants", "pre,plain", "--xla", "off"],
}
# The track-specific diagnose tests measure the smoke grids; here one plain and one residual model suffice.
DIAGNOSE = {
    "vision": ["--preset", "smoke", "--data", "synthetic", "--depths", "8", "--variants", "plain,residual"],
    "language": ["--preset", "smoke", "--data", "pydoc", "--depths", "1", "--variants", "pre,plain"],
    "toy": ["--preset", "smoke", "--depths", "2"],
}


def _track(name):
    return importlib.import_module(f"tracks.{name}.track").TRACK


def _run(track, argv):
    """(exit code, stdout, stderr) of `cli.main(track, argv)`, in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(track, [str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()


def _tiny(name):
    return TINY.get(name, ["--preset", "smoke"])


def test_every_track_is_found():
    assert {"vision", "language", "toy"} <= set(TRACK_NAMES)


@pytest.mark.parametrize("name", TRACK_NAMES)
def test_help_names_every_preset(name, capsys):
    track = _track(name)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(track, ["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert all(preset in out for preset in track.presets) and f"python -m tracks.{name}" in out


@pytest.mark.parametrize("name", TRACK_NAMES)
@pytest.mark.parametrize("argv, said", [(["--preset", "no-such-preset"], "unknown preset 'no-such-preset'"),
                                        (["--seed", "-1"], "must be in 0..4294967295"),
                                        (["--seeds", "3"], "at least two seeds")])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(name, argv, said, tmp_path):
    code, _, err = _run(_track(name), [*argv, "--out", tmp_path / "run"])
    assert code == 2 and said in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", TRACK_NAMES)
def test_a_run_has_an_entry_per_model_a_summary_resumes_finished_and_compares(name, tmp_path):
    """One tiny run per track (a few seconds), then everything a finished run promises."""
    import keras

    from tracks.common.config import config_from_dict

    keras.utils.set_random_seed(0)
    track, run_dir = _track(name), tmp_path / "run"
    code, out, err = _run(track, [*_tiny(name), "--out", run_dir])
    assert code == 0, err
    results = json.loads((run_dir / "results.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    assert results["track"] == config["track"] == track.name
    assert results["schema"] == SCHEMA  # a new run says which format it wrote
    assert results["dataset_title"] and "/" not in results["dataset_title"]
    assert results["initialisation"]  # the instruments at initialisation
    expected = [spec.id for spec in track.parts.grid(config_from_dict(track.config_cls, config))]
    assert sorted(entry["id"] for entry in results["models"]) == sorted(expected)
    for entry in results["models"]:
        assert {"id", "variant", "depth", "params", "diverged", "diverged_at", "seconds"} <= set(entry), entry["id"]
        assert entry["diverged_at"] is None or entry["diverged"]
    summary = (run_dir / "summary.md").read_text()
    for figure in run_dir.glob("*.png"):
        assert f"({figure.name})" in summary, f"{figure.name} is drawn but summary.md does not show it"
    assert "report with figures:" in out

    # --resume of a finished run trains nothing and changes no result.
    code, out, err = _run(track, ["--resume", run_dir])
    assert code == 0, err
    count = len(results["models"])
    assert f"resuming: {count} of {count} models already finished" in out
    assert json.loads((run_dir / "results.json").read_text())["models"] == results["models"]

    # compare sets the run beside a reference (itself: nothing differs).
    code, out, err = _run(track, ["compare", run_dir, run_dir])
    assert code == 0, err
    assert f"0 of {sum(1 for finding in track.parts.findings(track.results.from_json(results)) if finding and finding.holds is not None)} " \
           "findings differ from the reference" in out


@pytest.mark.parametrize("name", TRACK_NAMES)
def test_diagnose_measures_the_grid_at_initialisation(name, tmp_path):
    track = _track(name)
    code, out, err = _run(track, ["diagnose", *DIAGNOSE.get(name, ["--preset", "smoke"]), "--out", tmp_path / "d"])
    assert code == 0, err
    for file in ("summary.md", "gradient_flow.png", "jacobian.png", "results.json"):
        assert (tmp_path / "d" / file).stat().st_size > 0, file
    with RunDirectory(tmp_path / "d", f"{name}-diagnose") as run:
        run.lock()  # free again: diagnose released it


@pytest.mark.parametrize("name", TRACK_NAMES)
def test_ctrl_c_in_training_is_one_line_exit_130_and_the_run_is_kept_unlocked(name, tmp_path, monkeypatch):
    track = _track(name)
    created = []
    create = RunDirectory.create.__func__

    def remember(cls, *args, **kwargs):
        created.append(create(cls, *args, **kwargs))
        return created[-1]

    def interrupted(track, ctx, specs):  # Ctrl-C once the run directory exists
        raise KeyboardInterrupt

    monkeypatch.setattr(RunDirectory, "create", classmethod(remember))
    monkeypatch.setattr(run_module, "measure_at_initialisation", interrupted)
    code, _, err = _run(track, [*_tiny(name), "--out", tmp_path / "run"])
    assert code == 130 and f"--resume {tmp_path / 'run'}" in err and err.count("\n") == 1, err
    assert len(created) == 1 and not created[0].locked
    assert (tmp_path / "run" / "config.json").exists()  # kept: --resume continues it


def test_a_track_of_only_its_required_parts_runs(tmp_path):
    """The optional parts' defaults (no checks, no sample limits, no estimate, no run fields) make a run."""
    import dataclasses

    from tracks.common.track import Track, TrackParts

    def required(cls, source):
        return {field.name: getattr(source, field.name) for field in dataclasses.fields(cls)
                if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING}

    toy = _track("toy")
    parts = TrackParts(**required(TrackParts, toy.parts))
    bare = Track(**{**required(Track, toy), "load_parts": lambda: parts}, results=toy.results)
    assert bare.resources(toy.presets["smoke"]) is None and bare.parts.sample_limits(None) == []
    code, out, err = _run(bare, ["--preset", "smoke", "--out", tmp_path / "run"])
    assert code == 0, err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert sorted(entry["id"] for entry in results["models"]) == sorted(spec.id for spec in toy.parts.grid(
        toy.presets["smoke"]))
    assert "estimated time" not in out and "report with figures:" in out
