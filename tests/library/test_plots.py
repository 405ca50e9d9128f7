"""residual_keras.plots: each figure draws the expected lines/bars and saves a PNG."""

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot; plots.py itself never does

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from residual_keras import plots  # noqa: E402
from residual_keras.diagnostics import scalar_chain  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def saved_png(path):
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG_SIGNATURE)


def data_lines(figure):
    """The lines of the (only) axes that carry a legend label (not references)."""
    (axes,) = figure.axes
    return [line for line in axes.get_lines() if not line.get_label().startswith("_")]


def gradient_result(name, norms):
    norms = np.asarray(norms, dtype="float64")
    return {
        "model": name,
        "names": [f"block{i}" for i in range(1, len(norms))],
        "stream_grad_norms": norms,
        "gain": norms[0] / norms[-1],
        "training": True,
    }


def test_gradient_flow(tmp_path):
    results = [
        gradient_result("resnet", [2.0, 1.5, 1.2, 1.0]),
        gradient_result("plain", [1e4, 1e2, 10.0, 1.0]),
    ]
    path = tmp_path / "sub" / "gradient.png"  # the folder is created
    figure = plots.gradient_flow(results, path=path, banner="SYNTHETIC DATA")
    assert isinstance(figure, Figure)
    lines = data_lines(figure)
    assert len(lines) == 2
    np.testing.assert_allclose(lines[0].get_ydata(), [2.0, 1.5, 1.2, 1.0])  # / x_L's
    (axes,) = figure.axes
    assert axes.get_yscale() == "log"
    assert axes.get_title().startswith("SYNTHETIC DATA")
    assert "resnet" in lines[0].get_label() and "plain" in lines[1].get_label()
    assert saved_png(path)


def test_jacobian_with_cumulative_curves_and_references(tmp_path):
    names = ["b1", "b2", "b3"]
    cumulative = {
        "model": "resnet",
        "names": names,
        "total": np.array([1.3, 1.4]),
        "cumulative": np.array([[1.1, 1.2], [1.2, 1.3], [1.3, 1.4]]),
    }
    point = {"model": "plain", "names": names, "total": np.array([1e-3, 2e-3])}
    figure = plots.jacobian(
        [cumulative, point], references=(0.2, 1.2), path=tmp_path / "j.png"
    )
    (axes,) = figure.axes
    labels = [line.get_label() for line in axes.get_lines()]
    assert "resnet" in labels and "1 (identity)" in labels
    references = [line for line in axes.get_lines() if line.get_linestyle() == "--"]
    assert len(references) == 2
    np.testing.assert_allclose(references[0].get_ydata()[-1], 0.2**3)
    assert len(axes.containers) == 1  # the plain model's single error-bar point
    assert axes.get_yscale() == "log"
    assert saved_png(tmp_path / "j.png")


def test_an_unconverged_jacobian_is_drawn_as_a_lower_bound(tmp_path):
    names = ["b1", "b2"]
    result = {"model": "resnet", "names": names, "total": np.array([2.6]), "per_block": np.array([[1.2], [1.5]]),
              "cumulative": np.array([[1.2], [2.6]]), "converged": False, "iterations": 3}
    figure = plots.jacobian(result, path=tmp_path / "j.png")
    assert "resnet (lower bound: 3 power iterations)" in [line.get_label() for line in figure.axes[0].get_lines()]
    blocks = plots.jacobian_blocks(result, path=tmp_path / "b.png")
    assert "lower bound: 3 power iterations" in blocks.axes[0].get_title()
    converged = plots.jacobian({**result, "converged": True}, path=tmp_path / "c.png")
    assert "resnet" in [line.get_label() for line in converged.axes[0].get_lines()]


def test_the_depth_scaling_jacobian_panel_marks_lower_bounds_as_the_jacobian_figures_do(tmp_path):
    def at(gain, jacobian, converged, iterations):
        return {"gradient_gain": gain, "jacobian_norm": jacobian, "stream_growth": 1.5,
                "jacobian_converged": converged, "jacobian_iterations": iterations}

    summary = {"plain": {20: at(0.6, 5.7, False, 10), 56: at(0.1, 2.0, False, 10)},
               "residual": {20: at(15.0, 105.0, True, 4), 56: at(2e4, 8.7e4, False, 10), 110: at(8e8, 9.9e9, False, 3)},
               "fixup": {20: at(None, 1.0, True, 3), 56: at(None, 1.0, True, 3)},
               "mixed": {20: at(1.0, 2.0, False, 10), 56: at(1.0, 3.0, False, 3)}}
    figure = plots.depth_scaling(summary, path=tmp_path / "d.png")
    gains, jacobians, growth = ([line.get_label() for line in axes.get_lines() if not line.get_label().startswith("_")]
                                for axes in figure.axes)
    assert jacobians == ["plain (lower bound: 10 power iterations)",
                         "residual (lower bound at 56, 110 layers: 3 to 10 power iterations)",
                         "fixup", "mixed (lower bound: 3 to 10 power iterations)"]
    # The note belongs to the Jacobian panel only: the gains and the stream growth are measured exactly.
    assert gains == ["plain", "residual", "fixup (undefined: no gradient reaches the last block)", "mixed"]
    assert growth == ["plain", "residual", "fixup", "mixed"]
    assert saved_png(tmp_path / "d.png")


def test_activation_growth_draws_a_sqrt_reference_only_when_asked(tmp_path):
    rms = np.sqrt(1.0 + np.arange(11))[:, None] * np.ones((1, 3))
    flat = {"model": "plain", "names": [f"b{i}" for i in range(10)], "rms": np.ones((11, 3))}
    result = {"model": "residual", "names": [f"b{i}" for i in range(10)], "rms": rms}
    assert len(data_lines(plots.activation_growth([flat, result]))) == 2  # no reference by default
    figure = plots.activation_growth([flat, result], sqrt_reference=1, path=tmp_path / "a.png")
    lines = data_lines(figure)
    assert len(lines) == 3  # the data and the sqrt reference fitted to the residual model
    assert "fitted to residual" in lines[2].get_label()
    np.testing.assert_allclose(lines[2].get_ydata()[[0, -1]], [1.0, np.sqrt(11.0)])
    assert figure.axes[0].get_yscale() == "linear"
    exploding = {"model": "nonorm", "names": ["b"] * 10, "rms": (2.0 ** np.arange(11))[:, None]}
    assert plots.activation_growth(exploding).axes[0].get_yscale() == "log"  # spans 1000x
    assert saved_png(tmp_path / "a.png")


def test_lesion_bars_skip_blocks_that_cannot_be_removed(tmp_path):
    common = {"names": ["b1", "b2", "b3"], "metric": "accuracy"}
    residual = {"model": "resnet", "intact": 0.9, "lesioned": [0.8, 0.9, 0.7], **common}
    plain = {"model": "plain", "intact": 0.8, "lesioned": [0.1, None, 0.12], **common}
    figure = plots.lesion(
        [residual, plain], path=tmp_path / "l.png", banner="SYNTHETIC DATA"
    )
    (axes,) = figure.axes
    assert len(axes.patches) == 5  # 3 + 2 removable blocks
    intact_lines = [line for line in axes.get_lines() if "intact" in line.get_label()]
    assert [line.get_ydata()[0] for line in intact_lines] == [0.9, 0.8]
    assert [text.get_text() for text in axes.texts] == ["n/a"]
    assert "SYNTHETIC DATA" in axes.get_title()
    assert saved_png(tmp_path / "l.png")


def test_lesion_figures_draw_chance_as_a_line_and_its_noise_as_a_band():
    common = {"names": ["b1", "b2"], "metric": "test error (%)"}
    study = {"model": "resnet", "intact": 20.0, "lesioned": [30.0, 25.0], **common}
    deletion = {"model": "resnet", "metric": "test error (%)", "intact": 20.0, "candidates": ["b1", "b2"],
                "num_removed": [1, 2], "mean": [40.0, 85.0], "values": [[40.0], [85.0]]}
    swaps = {"pairs": [("b1", "b2")], "swapped": [30.0], "intact": 20.0}
    for figure in (plots.lesion(study, chance=86.6, chance_noise=4.6),
                   plots.block_deletion(deletion, [swaps], chance=86.6, chance_noise=4.6)):
        for axes in figure.axes:
            dotted = [line for line in axes.get_lines() if line.get_linestyle() == ":"]
            assert [line.get_ydata()[0] for line in dotted] == [86.6]
            (band,) = [patch for patch in axes.patches if patch.get_label().startswith("chance")]
            assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((82.0, 91.2))
            assert band.get_label() == "chance: 86.6 ± 4.6"
    (axes,) = plots.lesion(study, chance=90.0).axes  # no noise: the line alone, in the legend
    assert [line.get_label() for line in axes.get_lines() if line.get_linestyle() == ":"] == ["chance (90)"]
    assert not [patch for patch in axes.patches if patch.get_label().startswith("chance")]
    for figure in (plots.lesion(study), plots.block_deletion(deletion, [swaps])):  # by default, no chance
        assert not [line for axes in figure.axes for line in axes.get_lines() if line.get_linestyle() == ":"]


def test_stream_two_lines_per_model(tmp_path):
    results = [
        {
            "model": name,
            "names": ["block1", "block2"],
            "attention": np.full((2, 4), value),
            "feedforward": np.full((2, 4), 2 * value),
        }
        for name, value in (("pre", 0.1), ("rezero", 0.0))
    ]
    figure = plots.stream(results, path=tmp_path / "s.png")
    lines = data_lines(figure)
    assert len(lines) == 4
    np.testing.assert_allclose(lines[1].get_ydata(), [0.2, 0.2])
    assert lines[1].get_label() == "pre: feed-forward"
    assert saved_png(tmp_path / "s.png")


def test_scalar_chain_figure(tmp_path):
    figure = plots.scalar_chain(scalar_chain(-0.1, 50), path=tmp_path / "c.png")
    lines = data_lines(figure)
    assert len(lines) == 2
    assert lines[0].get_ydata()[-1] == pytest.approx(1e-50)
    assert lines[1].get_ydata()[-1] == pytest.approx(0.9**50)
    assert "0.00515" in figure.axes[0].get_title()
    assert saved_png(tmp_path / "c.png")


def test_labels_must_match_results():
    with pytest.raises(ValueError, match="2 labels for 1 results"):
        plots.scalar_chain(scalar_chain(0.5, 3), labels=["a", "b"])
    with pytest.raises(TypeError):
        plots.gradient_flow([])


def test_curves_follow_the_convention_and_keep_bold_lines_solid_beside_dashed_ones(tmp_path):
    panels = [
        ("plain", [{"label": plots.Label("plain-8", "plain", 8), "legend": "8 layers", "x": [1, 2], "y": [50, 40], "dashed": [55, 45]},
                   {"label": plots.Label("plain-32", "plain", 32), "legend": "32 layers", "x": [1, 2], "y": [60, 58], "dashed": [61, 59]}]),
        ("residual", [{"label": plots.Label("residual-8", "residual", 8), "legend": "8 layers", "x": [1, 2], "y": [50, 41]},
                      {"label": plots.Label("residual-32", "residual", 32), "legend": "32 layers", "x": [1, 2], "y": [52, 38]}]),
    ]
    figure = plots.curves(panels, xlabel="epoch", ylabel="error (%)", bottom=0, path=tmp_path / "c.png")
    left, right = figure.axes
    bold = [line for line in left.get_lines() if line.get_linewidth() > 2]
    assert [line.get_linestyle() for line in bold] == ["-", "-"]  # dashed means "test" here
    assert bold[0].get_color() != bold[1].get_color()  # colour = depth
    assert right.get_lines()[0].get_color() == bold[0].get_color()  # the same depth, the same colour
    assert left.get_ylim()[0] == 0 and left.get_ylim() == right.get_ylim()
    assert saved_png(tmp_path / "c.png")


def test_series_styles_colour_by_depth_and_style_by_variant_as_the_labels_say():
    labels = [plots.Label("a", "pre", 6), plots.Label("b", "pre warm-up 100", 6), plots.Label("c", "post", 6),
              plots.Label("d", "pre", 12)]
    styles = plots.series_styles(labels)
    assert styles[0]["color"] == styles[1]["color"] == styles[2]["color"] != styles[3]["color"]
    assert styles[0]["linestyle"] != styles[1]["linestyle"]  # a run with warm-up is styled apart
    assert styles[0]["marker"] != styles[2]["marker"]  # another variant
    assert styles[0] == {**styles[3], "color": styles[0]["color"]}  # one variant, one line style
    assert labels[0] == "a" and f"{labels[1]}" == "b"  # a Label is the legend's text


def test_series_styles_never_parse_a_label_text():
    # Ids that look like the tracks' ("plain-20") are still plain strings: one colour each, solid.
    styles = plots.series_styles(["plain-20", "plain-56", "residual-20"])
    assert len({style["color"] for style in styles}) == 3
    assert {style["linestyle"] for style in styles} == {"-"}
    odd = plots.series_styles(["alpha = 0.1", "alpha = 0.5"])
    assert odd[0]["color"] != odd[1]["color"]
