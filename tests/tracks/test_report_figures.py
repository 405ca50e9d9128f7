"""The figures the tracks draw themselves, and scripts/replot.py, which draws a run's figures again.

The boundaries of the toy track and the figures at initialisation redrawn
from results.json obey the rule of every figure (tests/figure_checks.py:
legible at 800 px wide, axes labelled, no empty panel); replot draws a
run's figures from its directory with the tracks' code and writes nothing
but PNG files.
"""

import dataclasses
import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
from figure_checks import hidden_points, legibility_problems

from tracks.common.instrument_report import plot_initialisation
from tracks.toy.report import plot_boundaries

ROOT = pathlib.Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
sys.path.insert(0, str(ROOT / "scripts"))
import replot  # noqa: E402


def toy_run(depths, variants=("plain", "residual")):
    models = {f"{variant}-{depth}": types.SimpleNamespace(boundary=np.full((41, 41), 0.5), train_loss=0.1, diverged=False)
              for variant in variants for depth in depths}
    models[f"plain-{depths[-1]}"] = types.SimpleNamespace(boundary=None, train_loss=None, diverged=True)
    config = types.SimpleNamespace(depths=depths, variants=variants)
    results = types.SimpleNamespace(model=models.get)
    rng = np.random.default_rng(0)
    data = types.SimpleNamespace(x_train=rng.normal(size=(64, 2)), y_train=rng.integers(0, 2, 64))
    return config, results, data


@pytest.mark.parametrize("depths", [(2, 20), (2, 8, 32, 64, 96)])
def test_the_toy_boundaries_are_legible_and_wrap_many_depths(depths, tmp_path):
    figure = plot_boundaries(*toy_run(depths), tmp_path / "b.png", "two spirals, seed 0: 512 points, width 32 "
                             "(quick preset)")
    assert legibility_problems(figure, "boundaries") == [] and hidden_points(figure, "boundaries") == []
    panels = [axes for axes in figure.axes if getattr(axes, "_colorbar", None) is None]
    assert len(panels) == 2 * len(depths)  # one per net, no empty panel where a row is not full
    assert max(len([a for a in panels if round(a.get_position().y1, 2) == round(p.get_position().y1, 2)])
               for p in panels) <= 4
    assert "diverged" in [axes.get_title() for axes in panels][len(depths) - 1]
    assert (tmp_path / "b.png").stat().st_size > 1000


def initialisation_summary():
    def model(growth, blocks, gain):
        norms = [growth ** k for k in range(blocks, -1, -1)]
        return {"gradient_gain": gain, "stream_grad_norms": norms, "block_weight_grad_norms": [1.0] * blocks,
                "stream_rms": [[1.0 + k, 1.0 + k] for k in range(blocks + 1)], "stream_growth": 1.0 + blocks,
                "jacobian_norm": 2.0, "jacobian_converged": True, "jacobian_iterations": 3}

    fixup = model(1.0, 8, None)
    fixup["stream_grad_norms"] = [None] * 9  # results.json's None: no gradient reached the blocks (Fixup at 0)
    return {"plain-2": model(2.0, 2, 4.0), "residual-2": model(1.5, 2, 2.25), "plain-8": model(2.0, 8, 256.0),
            "fixup-8": fixup}


def test_plot_initialisation_draws_the_saved_numbers_as_the_track_does(tmp_path):
    summary = initialisation_summary()
    series = {"plain-2": ("plain", 2), "residual-2": ("residual", 2), "plain-8": ("plain", 8), "fixup-8": ("fixup", 8)}
    drawn = plot_initialisation(tmp_path, summary, series, banner="SYNTHETIC DATA, NOT CIFAR-10", subtitle="a run")
    assert drawn == ["gradient_flow.png", "activation_growth.png", "layer_gradients.png", "depth_scaling.png"]
    for name in drawn:
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    assert "jacobian.png" not in drawn and not (tmp_path / "jacobian.png").exists()  # its numbers are not kept
    one_depth = plot_initialisation(tmp_path, {"plain-2": summary["plain-2"]}, series)
    assert "depth_scaling.png" not in one_depth


def test_plot_initialisation_figures_are_legible(tmp_path, monkeypatch):
    from residual_keras import plots

    figures = {}
    for name in ("gradient_flow", "activation_growth", "layer_gradients", "depth_scaling"):
        draw = getattr(plots, name)
        monkeypatch.setattr(plots, name, lambda *args, _draw=draw, _name=name, **kwargs:
                            figures.setdefault(_name, _draw(*args, **kwargs)))
    series = {"plain-2": ("plain", 2), "residual-2": ("residual", 2), "plain-8": ("plain", 8), "fixup-8": ("fixup", 8)}
    plot_initialisation(tmp_path, initialisation_summary(), series, subtitle="a run")
    assert set(figures) == {"gradient_flow", "activation_growth", "layer_gradients", "depth_scaling"}
    for name, figure in figures.items():
        assert legibility_problems(figure, name) == [] and hidden_points(figure, name) == []
    (axes,) = figures["gradient_flow"].axes
    lines = [line for line in axes.get_lines() if not line.get_label().startswith("_")]
    np.testing.assert_allclose(lines[0].get_ydata(), [4.0, 2.0, 1.0])  # relative to x_L, as the track draws it
    assert "gain 4" in lines[0].get_label() and "gain undefined" in lines[3].get_label()


def digests(directory):
    return {path.relative_to(directory): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def test_replot_says_of_the_data_what_the_loaded_data_say(tmp_path):
    """The run's data as replot reads them from results.json: the title, banner and size the track's data give."""
    from tracks.common.config import config_from_dict
    from tracks.common.track import RunContext
    from tracks.registry import track

    vision = track("vision")
    config = json.loads((REFERENCE / "vision-smoke-s0" / "config.json").read_text())
    config = config_from_dict(vision.config_cls, config)
    loaded = vision.parts.load_data(RunContext(config))
    results = json.loads((REFERENCE / "vision-smoke-s0" / "results.json").read_text())
    recorded = replot._data(vision, "vision", config, results, REFERENCE / "vision-smoke-s0")
    assert (recorded.title, recorded.plot_banner, len(recorded.y_train)) == (
        loaded.title, loaded.plot_banner, len(loaded.y_train))
    assert replot._plot_banner("vision", "any warning") == "SYNTHETIC DATA, NOT CIFAR-10"
    assert replot._plot_banner("language", "any warning") == "PYDOC FALLBACK DATA, NOT TINY SHAKESPEARE"


def test_replot_refuses_what_is_not_a_finished_run(tmp_path):
    (tmp_path / "empty").mkdir()
    seeds = tmp_path / "seeds"
    (seeds / "seed-0").mkdir(parents=True)
    (seeds / "config.json").write_text(json.dumps({"track": "toy"}))
    (seeds / "seed-0" / "config.json").write_text(json.dumps({"track": "toy"}))
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"track": "chess"}))
    for path, message in ((tmp_path / "empty", "no config.json there"), (seeds, "is a --seeds run"),
                          (other, "names no track")):
        with pytest.raises(replot.ReplotError, match=message):
            replot.replot(path)
    assert replot.main([str(tmp_path / "empty"), str(other)]) == 2
    tiny = tmp_path / "language-tinyshakespeare-s0"
    shutil.copytree(REFERENCE / "language-tinyshakespeare-s0", tiny)
    results = json.loads((tiny / "results.json").read_text())
    results["dataset"] = "text:PATH"  # a source recorded without its path, and no title
    (tiny / "results.json").write_text(json.dumps(results))
    with pytest.raises(replot.ReplotError, match="names its data only as text:PATH: give them with --data"):
        replot.replot(tiny)
    with pytest.raises(replot.ReplotError, match="cannot load its data"):
        replot.replot(tiny, source=f"text:{tmp_path / 'missing.txt'}")
    with pytest.raises(replot.ReplotError, match="not the run's"):  # the digest of the text differs
        (tmp_path / "other.txt").write_text("other text " * 2000)
        replot.replot(tiny, source=f"text:{tmp_path / 'other.txt'}")


@pytest.mark.slow
@pytest.mark.parametrize("reference", ["toy-spirals-s0", "vision-smoke-s0", "language-smoke-s0"])
def test_replot_draws_a_reference_run_again_and_writes_only_its_figures(reference, tmp_path):
    """A copy of a reference without its figures: every figure its summary links but the Jacobians' comes back."""
    run = tmp_path / reference
    shutil.copytree(REFERENCE / reference, run)
    for path in run.glob("*.png"):
        if path.name not in replot.NOT_KEPT:
            path.unlink()
    before = digests(run)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "replot.py"), str(run)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    linked = set(re.findall(r"\]\(([^)]+\.png)\)", (run / "summary.md").read_text()))
    assert {path.name for path in run.glob("*.png")} == linked
    assert digests(run) == {**before, **{path: digest for path, digest in digests(run).items()
                                         if path.suffix == ".png"}}  # nothing but the figures written
    assert "left as they were (their numbers are not kept): jacobian.png, jacobian_blocks.png" in done.stdout
    assert not (run / ".lock").exists()


def test_measured_again_the_jacobians_are_kept_only_where_the_numbers_are_the_runs(tmp_path, monkeypatch):
    """measure_jacobians copies the two figures only when every number at initialisation comes out as saved."""
    import tracks.common.run as run_module

    run = tmp_path / "toy-spirals-s0"
    shutil.copytree(REFERENCE / "toy-spirals-s0", run)
    saved = json.loads((run / "results.json").read_text())["initialisation"]
    before = {name: (run / name).read_bytes() for name in replot.NOT_KEPT}
    measured = {}

    def measure(track, ctx, specs, diagnose=False):  # stands for the models measured again (tested slow below)
        for name in replot.NOT_KEPT:
            (ctx.run.path / name).write_bytes(b"measured " + name.encode())
        return measured

    monkeypatch.setattr(run_module, "measure_at_initialisation", measure)
    measured.update({label: {**values, "jacobian_norm": values["jacobian_norm"] * 1.01} for label, values in saved.items()})
    with pytest.raises(replot.ReplotError, match="jacobian_norm .* not the run's models"):
        replot.measure_jacobians(run)
    assert {name: (run / name).read_bytes() for name in replot.NOT_KEPT} == before  # left as they were
    measured.update({label: {**values, "jacobian_norm": values["jacobian_norm"] * (1 + 1e-5)}
                     for label, values in saved.items()})
    assert replot.measure_jacobians(run, log=lambda line: None) == list(replot.NOT_KEPT)
    assert (run / "jacobian.png").read_bytes() == b"measured jacobian.png"


def test_measuring_again_refuses_other_data_than_the_runs(tmp_path):
    from tracks.toy.data import spirals
    from tracks.registry import track

    run = tmp_path / "toy-spirals-s0"
    shutil.copytree(REFERENCE / "toy-spirals-s0", run)
    toy = track("toy")
    same = toy.parts.load_data(types.SimpleNamespace(config=types.SimpleNamespace(points=512, noise=0.02, seed=0)))
    replot._same_data(run, toy, same)  # the run's points: accepted
    x, y = spirals(512, 0.02, 1)
    with pytest.raises(replot.ReplotError, match="are not the run's"):
        replot._same_data(run, toy, dataclasses.replace(same, x_train=x, y_train=y))
    # A run on a fallback (config.json records its banner, not the data's fingerprint): the same fallback only.
    config = json.loads((run / "config.json").read_text())
    config["data_fingerprint"]["banner"] = "DATA FALLBACK: ..."
    (run / "config.json").write_text(json.dumps(config))
    replot._same_data(run, toy, dataclasses.replace(same, banner="DATA FALLBACK: ..."))
    with pytest.raises(replot.ReplotError, match="are not the run's"):
        replot._same_data(run, toy, same)


def test_measuring_again_accepts_data_that_differ_in_their_digest_alone(tmp_path):
    """The synthetic set made on another CPU (a few pixels one level off): the numbers measured again decide."""
    from tracks.registry import track

    run = tmp_path / "toy-spirals-s0"
    shutil.copytree(REFERENCE / "toy-spirals-s0", run)
    toy = track("toy")
    same = toy.parts.load_data(types.SimpleNamespace(config=types.SimpleNamespace(points=512, noise=0.02, seed=0)))
    assert replot._same_data(run, toy, same, measured_again=True) is None  # the digests agree: nothing to say
    nudged = same.x_train.copy()
    nudged[7, 0] = np.nextafter(nudged[7, 0], np.inf)  # one number, one unit in the last place
    rounded = dataclasses.replace(same, x_train=nudged)
    with pytest.raises(replot.ReplotError, match="are not the run's"):  # only drawing: the digest decides
        replot._same_data(run, toy, rounded)
    said = replot._same_data(run, toy, rounded, measured_again=True)
    assert "not its digest" in said and "kept only if every number matches" in said
    for other in (dataclasses.replace(same, x_train=same.x_train[:-2], y_train=same.y_train[:-2]),  # other sizes
                  dataclasses.replace(rounded, name="other"),  # another source
                  dataclasses.replace(rounded, banner="DATA FALLBACK: ...")):  # a fallback the run was not
        with pytest.raises(replot.ReplotError, match="are not the run's"):
            replot._same_data(run, toy, other, measured_again=True)


@pytest.mark.slow
def test_measured_again_the_toy_reference_gives_its_numbers_and_its_jacobians(tmp_path):
    run = tmp_path / "toy-spirals-s0"
    shutil.copytree(REFERENCE / "toy-spirals-s0", run)
    (run / "jacobian_blocks.png").unlink()
    said = []
    assert replot.measure_jacobians(run, log=said.append) == ["jacobian.png", "jacobian_blocks.png"]
    assert (run / "jacobian_blocks.png").read_bytes().startswith(b"\x89PNG")
    assert "within 0.001 of results.json" in said[0]


def test_replot_writes_a_reference_runs_figures_small_as_save_reference_does(tmp_path, monkeypatch):
    """Redrawn inside docs/reference/ (here a stand-in for it), the figures are 8-bit palette PNGs, as the
    references were saved (matplotlib's own are RGBA, three times the size)."""
    from PIL import Image

    run = tmp_path / "reference" / "toy-spirals-s0"
    shutil.copytree(REFERENCE / "toy-spirals-s0", run)
    monkeypatch.setattr(replot, "REFERENCE", run.parent.resolve())
    drawn = replot.replot(run, log=lambda line: None)
    assert drawn and {Image.open(run / name).mode for name in drawn} == {"P"}
