"""Every figure of residual_keras.plots can be read at 800 px wide (tests/figure_checks.py says how).

Each plot function is drawn on small data shaped like its instrument's
result, with the longest labels and the most panels the tracks give it, and
checked: text of at least 8 px at 800 px wide and inside the figure, every
panel with data labelled on both axes, no empty panel, at most two panels in
a row (a grid, not a strip), blocks numbered from 1 and the stream written
x_0 ... x_L in every figure.
"""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from figure_checks import hidden_points, legibility_problems, visible_ticks  # noqa: E402

from residual_keras import plots  # noqa: E402
from residual_keras.diagnostics import scalar_chain  # noqa: E402

BANNER = "SYNTHETIC DATA, NOT CIFAR-10"
SUBTITLE = ("synthetic images, seed 0: 6,000 training images, 10 epochs, width 8 (quick preset); at "
            "initialisation, 32 training images; the Jacobian on 1 example, BatchNorm calibrated on the batch")
RNG = np.random.default_rng(0)
LABELS = [plots.Label("plain-32", "plain", 32), plots.Label("residual-32", "residual", 32)]
THREE = [plots.Label("pre-6-warmup100", "pre warm-up 100", 6), plots.Label("post-6-warmup100", "post warm-up 100", 6),
         plots.Label("plain-6-warmup100", "plain warm-up 100", 6)]


def gradient(name, blocks, growth):
    norms = growth ** np.arange(blocks, -1, -1.0)
    return {"model": name, "names": [f"block{i}" for i in range(1, blocks + 1)], "stream_grad_norms": norms,
            "gain": norms[0] / norms[-1], "training": True, "block_weight_grad_norms": RNG.uniform(0.1, 1, blocks)}


def jacobian_result(name, blocks, per_block, branches=True):
    per = np.full((blocks, 1), per_block)
    return {"model": name, "names": [f"block{i}" for i in range(1, blocks + 1)], "total": np.array([per_block ** blocks]),
            "per_block": per, "cumulative": np.cumprod(per, axis=0), "converged": False, "iterations": 3,
            "per_branch": [np.array([0.2])] * blocks if branches else None}


def rows(blocks, epochs, identity=False, rank=32.0):
    return [{"epoch": epoch, "block": block, "name": f"block{block}", "gradient_gain": 2.0 + epoch,
             "update_ratio": None if epoch == 0 else 0.1 / epoch, "branch_ratio": 0.5,
             "identity_scalar": 0.1 * epoch if identity else None, "delta_rank": rank,
             "delta_effective_rank": 8.0, "delta_size": 1.0}
            for epoch in range(epochs + 1) for block in range(1, blocks + 1)]


def landscape(name, center):
    alphas = np.linspace(-1, 1, 9)
    a, b = np.meshgrid(alphas, alphas, indexing="ij")
    grid = center + 10 * (a ** 2 + b ** 2)
    return {"model": name, "alphas": alphas, "grid": grid, "slice": grid[:, 4], "center_loss": center,
            "edge_rise": 10.0, "curvature": 20.0, "nonconvex_share": 0.3,
            "loss": "the loss of model.compile (sparsecategoricalcrossentropy)", "examples": 256}


def deletion(name, blocks, intact):
    ks = list(range(1, blocks + 1))
    return {"model": name, "metric": "test error (%)", "intact": intact, "candidates": [f"b{i}" for i in ks],
            "num_removed": ks, "mean": [intact + 3 * k for k in ks], "values": [[intact + 3 * k, intact + 2 * k] for k in ks]}


def gallery():
    """(name, function drawing the figure): every plot function, on data shaped as the tracks give it."""
    fifteen = [f"stage{s}_block{b}" for s in (1, 2, 3) for b in range(1, 6)]
    yield "gradient_flow", lambda: plots.gradient_flow(
        [gradient("plain-32", 15, 1.4), gradient("residual-32", 15, 1.1)], LABELS, banner=BANNER, subtitle=SUBTITLE)
    yield "layer_gradients", lambda: plots.layer_gradients(
        [gradient("plain-32", 15, 1.4), gradient("residual-32", 15, 1.1)], LABELS, banner=BANNER, subtitle=SUBTITLE)
    yield "scalar_chain", lambda: plots.scalar_chain([scalar_chain(-0.1, 50), scalar_chain(0.5, 50)])
    yield "activation_growth", lambda: plots.activation_growth(
        [{"model": "a", "rms": np.ones((16, 3))}, {"model": "b", "rms": np.sqrt(1 + np.arange(16))[:, None]}],
        LABELS, sqrt_reference=1, banner=BANNER, subtitle=SUBTITLE)
    yield "jacobian", lambda: plots.jacobian(
        [jacobian_result("plain-32", 15, 2.0, branches=False), jacobian_result("residual-32", 15, 1.3)], LABELS,
        references=(2.0,), banner=BANNER, subtitle=SUBTITLE)
    yield "jacobian_blocks", lambda: plots.jacobian_blocks(
        [jacobian_result(label, blocks, 1.5 + index) for index, (label, blocks) in enumerate(zip(THREE, (6, 24, 15)))],
        THREE, banner=BANNER, subtitle=SUBTITLE)
    yield "depth_scaling", lambda: plots.depth_scaling(
        {variant: {depth: {"gradient_gain": growth ** depth, "jacobian_norm": growth ** depth, "stream_growth": 1.5,
                           "jacobian_converged": False, "jacobian_iterations": 10} for depth in (8, 20, 32)}
         for variant, growth in (("plain", 1.2), ("residual", 1.05))}, banner=BANNER, subtitle=SUBTITLE)
    yield "lesion", lambda: plots.lesion(
        [{"model": label, "metric": "test error (%)", "names": fifteen, "intact": intact,
          "lesioned": [None if name.endswith("block1") and label.startswith("plain") and name != fifteen[0] else
                       intact + 5 for name in fifteen]}
         for label, intact in zip(LABELS, (88.6, 41.4))], LABELS, banner=BANNER, subtitle=SUBTITLE,
        title="Trained depth-32 networks: test error with one block removed", chance=86.6, chance_noise=4.6)
    yield "lesion_110", lambda: plots.lesion(  # the nonorm preset's 54 blocks, five models
        [{"model": str(index), "metric": "test error (%)", "names": [f"b{i}" for i in range(54)], "intact": 50.0,
          "lesioned": list(RNG.uniform(40, 90, 54))} for index in range(5)], banner=BANNER, subtitle=SUBTITLE)
    yield "block_deletion", lambda: plots.block_deletion(
        [deletion("plain-32", 13, 88.6), deletion("residual-32", 13, 41.4)],
        [{"pairs": [("a", "b")] * 10, "swapped": list(RNG.uniform(40, 90, 10)), "intact": intact}
         for intact in (88.6, 41.4)], LABELS, banner=BANNER, subtitle=SUBTITLE,
        title="Trained depth-32 networks: test error with blocks removed or swapped",
        chance=86.6, chance_noise=4.6)  # as the vision track draws chance: the offline reference's
    # An offline quick run's swaps (emulated AVX2, seed 0): the residual net's spread from its intact 21.4% up
    # to 58%, where a legend in the panel's corner sat over pair 4 (46.4%).
    yield "block_deletion_low", lambda: plots.block_deletion(
        [deletion("plain-32", 13, 88.4), deletion("residual-32", 13, 21.4)],
        [{"pairs": [("a", "b")] * 10, "swapped": swapped, "intact": intact}
         for swapped, intact in (([90.4, 89.8, 90.0, 87.6, 89.8, 90.4, 90.4, 90.2, 91.2, 91.6], 88.4),
                                 ([58.2, 34.2, 28.6, 46.4, 25.0, 22.8, 26.8, 21.6, 22.0, 21.6], 21.4))],
        LABELS, banner=BANNER, subtitle=SUBTITLE, title="Trained depth-32 networks: test error with blocks removed "
        "or swapped")
    yield "block_deletion_alone", lambda: plots.block_deletion(
        [deletion(label, 6, 1.3) for label in THREE], None, THREE, banner=BANNER, subtitle=SUBTITLE)
    yield "path_gradients", lambda: plots.path_gradients(
        {"model": "residual-32", "lengths": np.arange(16), "path_fraction": np.full(16, 1 / 16),
         "gradient_share": np.full(16, 1 / 16), "gradient_per_path": 10.0 ** -np.arange(16)},
        LABELS[1:], banner=BANNER, subtitle=SUBTITLE)
    yield "loss_landscape", lambda: plots.loss_landscape(
        [landscape("plain-32", 2.29), landscape("residual-32", 0.97)], LABELS, banner=BANNER, subtitle=SUBTITLE,
        title="Trained depth-32 networks: the training loss around their weights")
    yield "curves", lambda: plots.curves(
        [(variant, [{"label": plots.Label(f"{variant}-{depth}", variant, depth), "legend": f"{depth} layers",
                     "x": [1, 2, 3], "y": [90, 60, 50], "dashed": [88, 62, 49]} for depth in (20, 56, 110)])
         for variant in ("plain", "residual", "fixup", "preact-zero", "residual-bn")],
        xlabel="epoch", ylabel="error (%)", bottom=0, banner=BANNER, subtitle=SUBTITLE,
        note="bold: train, dashed: test subset (1,000 images)")
    yield "dynamics", lambda: plots.dynamics(
        [rows(15, 10), rows(15, 10, rank=8.0)], LABELS, banner=BANNER, subtitle=SUBTITLE)
    yield "dynamics_identity", lambda: plots.dynamics(
        [rows(15, 10), rows(15, 10, identity=True)], LABELS, banner=BANNER, subtitle=SUBTITLE,
        epoch_label="evaluation interval (250 steps)")
    yield "stream", lambda: plots.stream(
        [{"model": label, "names": [f"block{i}" for i in range(1, 7)], "attention": RNG.uniform(0, 1, (6, 4)),
          "feedforward": RNG.uniform(0, 1, (6, 4))} for label in THREE], THREE, banner=BANNER, subtitle=SUBTITLE)
    yield "logit_lens", lambda: plots.logit_lens(
        [{"model": label, "depths": list(range(7)), "loss": list(np.linspace(5, 1.3, 7))} for label in THREE], THREE,
        reference=(3.24, "character frequencies only (3.24)"), banner=BANNER, subtitle=SUBTITLE)
    yield "sublayer_lesions", lambda: plots.sublayer_lesions(
        [{"model": label, "names": [f"block{i}" for i in range(1, 7)], "intact": 1.3, "lesioned": [2.8] + [1.5] * 5}
         for label in THREE],
        [{"model": label, "names": [f"block{i}" for i in range(1, 7)], "metric": "crossentropy", "intact": 1.3,
          "attention": [2.8] + [1.4] * 5, "feedforward": [1.5] * 6} for label in THREE], THREE,
        banner=BANNER, subtitle=SUBTITLE)


GALLERY = dict(gallery())
# The per-block figures: their x axis is the block, numbered from 1.
PER_BLOCK = ("layer_gradients", "jacobian_blocks", "lesion", "lesion_110", "stream", "sublayer_lesions")
# The figures along the stream: x_0 (entering block 1) to x_L (leaving the last block).
ALONG_THE_STREAM = ("gradient_flow", "activation_growth", "jacobian", "logit_lens")


def test_the_gallery_draws_every_plot_function():
    drawn = {name.split("_alone")[0].split("_low")[0].split("_110")[0].split("_identity")[0] for name in GALLERY}
    assert drawn == set(plots.__all__) - {"Label", "PALETTE", "VARIANT_STYLES", "series_styles"}


@pytest.mark.parametrize("name", GALLERY)
def test_every_figure_is_legible_at_800_px(name):
    figure = GALLERY[name]()
    assert legibility_problems(figure, name) == []


@pytest.mark.parametrize("name", GALLERY)
def test_no_legend_covers_a_data_point(name):
    figure = GALLERY[name]()
    assert hidden_points(figure, name) == []


@pytest.mark.parametrize("name", GALLERY)
def test_panels_go_in_a_grid_of_at_most_two_columns(name):
    figure = GALLERY[name]()
    panels = [axes for axes in figure.axes if getattr(axes, "_colorbar", None) is None]
    rows = {}
    for axes in panels:
        rows.setdefault(round(axes.get_position().y1, 2), []).append(axes)
    assert max(len(row) for row in rows.values()) <= 2, name
    assert figure.get_figwidth() <= 9.6  # the widest at which x-small text stays 8 px at 800 px


@pytest.mark.parametrize("name", PER_BLOCK)
def test_blocks_are_numbered_from_1(name):
    figure = GALLERY[name]()
    for axes in figure.axes:
        assert "block $\\ell$ (block 1 = the first)" in axes.get_xlabel()
        ticks = visible_ticks(axes)
        assert ticks and min(ticks) == 1, (name, ticks)  # block 1 ticked, no block 0
        xs = [x for line in axes.get_lines() for x in np.atleast_1d(line.get_xdata()) if len(line.get_xdata()) > 2]
        xs += [patch.get_x() + patch.get_width() / 2 for patch in axes.patches
               if not patch.get_label().startswith("chance")]  # the band spans the axes: no block
        assert round(min(xs)) == 1, name  # the first block is drawn at 1


@pytest.mark.parametrize("name", ALONG_THE_STREAM)
def test_the_stream_runs_from_x_0_into_block_1(name):
    figure = GALLERY[name]()
    (axes,) = figure.axes
    assert "$x_0$" in axes.get_xlabel() and "block 1" in axes.get_xlabel() or "embeddings" in axes.get_xlabel()
    assert "x_e" not in axes.get_xlabel() and "x_s" not in axes.get_xlabel()


def test_dynamics_leaves_out_an_instrument_no_model_has_and_writes_the_rank_of_x_L_minus_x_0():
    figure = GALLERY["dynamics"]()
    titles = [axes.get_title() for axes in figure.axes]
    assert len(figure.axes) == 4 and not any("identity" in title for title in titles)  # no model has one
    assert not any(text.get_text() == "no model has one" for axes in figure.axes for text in axes.texts)
    (rank,) = [axes for axes in figure.axes if "rank" in axes.get_ylabel()]
    assert "$x_L - x_0$" in rank.get_ylabel() and "x_e" not in rank.get_title()
    assert [line.get_ydata()[-1] for line in rank.get_lines()] == [32.0, 8.0]
    # Four panels, two rows of two; with an identity scalar, five: the fifth centred below.
    assert len({round(axes.get_position().y0, 2) for axes in figure.axes}) == 2
    five = GALLERY["dynamics_identity"]()
    assert len(five.axes) == 5
    last = five.axes[-1].get_position()
    assert last.x0 > five.axes[0].get_position().x0 + 0.1 and abs((last.x0 + last.x1) / 2 - 0.5) < 0.05
    with pytest.raises(ValueError, match="nothing to draw"):
        plots.dynamics([[{"epoch": 0, "block": 1, "name": "b"}]])


def test_curves_leave_out_a_group_without_a_series():
    series = {"label": "a", "legend": "a", "x": [1, 2], "y": [3, 2]}
    figure = plots.curves([("plain", [series]), ("residual", [])], xlabel="epoch", ylabel="loss")
    assert [axes.get_title() for axes in figure.axes] == ["plain"]


def test_the_checker_finds_what_it_looks_for():
    """A strip of five panels with small labels, an unlabelled and an empty panel: every rule fires."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(20, 4.4))
    axes = figure.subplots(1, 5)
    for axis in axes[:4]:
        axis.plot([0, 1], [0, 1])
        axis.set_xlabel("epoch")
        axis.set_ylabel("gain")
    axes[0].set_ylabel("")
    problems = legibility_problems(figure, "strip")
    assert any("px high at 800 px wide" in problem for problem in problems)
    assert any("has no y-axis label" in problem for problem in problems)
    assert any("an empty panel" in problem for problem in problems)
    outside = Figure(figsize=(7, 4))
    outside.add_subplot().plot([0, 1], [0, 1])
    outside.axes[0].set_xlabel("x")
    outside.axes[0].set_ylabel("y")
    outside.suptitle("a title far too long to fit into the figure at all " * 4)
    assert any("runs outside the figure" in problem for problem in legibility_problems(outside))
