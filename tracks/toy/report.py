"""The toy run's report: training loss against depth, the decision boundaries, what the instruments saw.

- loss_curves.png: training loss per epoch, plain left, residual right (colour = depth);
- boundaries.png: each trained net's P(class 1) over the plane, with the training points;
- the plots at initialisation and dynamics.png (tracks/common/instruments.py, instrument_report.py);
- lesion.png, block_deletion.png, paths.png, loss_landscape.png: the deepest trained
  nets taken apart (Veit et al. 2016, Li et al. 2018), drawn by residual_keras.plots;
- summary.md: the table, the findings computed from it (findings.py), the figures.
"""

import textwrap

import numpy as np
from matplotlib.figure import Figure

from residual_keras import plots
from tracks.common.findings import finding_lines
from tracks.common.instrument_report import (
    LANDSCAPE_NOTE,
    LESION_NOTE,
    PATHS_NOTE,
    initialisation_table,
    instrument_figures,
    instrument_notes,
    plot_dynamics,
)
from tracks.common.report import banner_markdown, deepest_with, format_value, markdown_table, run_ending
from tracks.common.seeds_report import band_series, combine_findings, spread_cell, write_seeds_results, write_seeds_summary
from tracks.common.training import read_metrics_rows
from tracks.toy.experiment import LANDSCAPE_STEPS, LIMIT, PATH_POINTS
from tracks.toy.findings import toy_findings
from tracks.toy.results import ToyResults


def series_label(entry):
    return plots.Label(entry.id, entry.variant, entry.depth)


def plot_loss_curves(config, results, path, runs, subtitle=None):
    """loss_curves.png: training loss per epoch, one panel per variant (mean +- std with several runs)."""
    panels = []
    for variant in config.variants:
        group = []
        for entry in sorted((m for m in results.models if m.variant == variant), key=lambda m: m.depth):
            per_run = [rows for rows in (read_metrics_rows(r.metrics_path(entry.id)) for r in runs) if rows]
            if not per_run:
                continue
            curves = [([row["epoch"] + 1 for row in rows], [row.get("loss", float("nan")) for row in rows])
                      for rows in per_run]
            legend = f"{entry.depth} layers" + (" (diverged)" if entry.diverged else "")
            if len(runs) > 1:
                group.append(band_series(curves, series_label(entry), f"{legend}, mean of {len(per_run)} seeds"))
            else:
                group.append({"label": series_label(entry), "legend": legend, "x": curves[0][0], "y": curves[0][1]})
        panels.append((f"{variant} MLPs", group))
    plots.curves(panels, xlabel="epoch", ylabel="training loss (nats)", bottom=0, path=path, subtitle=subtitle,
                 note="band: ± 1 std over the seeds" if len(runs) > 1 else None,
                 title="Two spirals: training loss of plain and residual MLPs")


def plot_boundaries(config, results, data, path, subtitle=None):
    """boundaries.png: P(class 1) of every trained net, a row per variant, a column per depth; the figure.

    At most 4 columns (8.8 inches), so that the figure can be read at 800 px wide: more depths wrap
    onto further rows.
    """
    depths, variants = sorted(config.depths), list(config.variants)
    columns = min(len(depths), 4)
    rows_per_variant = -(-len(depths) // columns)
    size = min(2.6, 8.0 / columns)
    width = size * columns + 0.8
    figure = Figure(figsize=(width, size * rows_per_variant * len(variants) + 0.9), layout="constrained")
    grid = figure.subplots(rows_per_variant * len(variants), columns, squeeze=False)
    panels, axes = [], []
    for row, variant in enumerate(variants):  # each variant starts a row
        for index, depth in enumerate(depths):
            panels.append((variant, depth))
            axes.append(grid[row * rows_per_variant + index // columns][index % columns])
    for axis in grid.flat:
        if axis not in axes:
            axis.remove()  # a row that the depths do not fill: no empty panel
    heading = "Decision boundaries after training: P(class 1); training points on top (yellow: class 1)"
    characters = int(15 * width)  # of the 10-point heading on a line
    lines = textwrap.wrap(heading, characters) + (textwrap.wrap(subtitle, characters) if subtitle else [])
    figure.suptitle("\n".join(lines), fontsize="medium")
    image = None
    for axis, (variant, depth) in zip(axes, panels):
        entry = results.model(f"{variant}-{depth}")
        axis.set_xticks([])
        axis.set_yticks([])
        if entry is not None and entry.boundary is not None:
            image = axis.imshow(np.asarray(entry.boundary, dtype=float), origin="lower", cmap="RdBu_r",
                                vmin=0, vmax=1, extent=(-LIMIT, LIMIT, -LIMIT, LIMIT), interpolation="bilinear")
            axis.set_title(f"{variant}-{depth}: loss {entry.train_loss:.2f}", fontsize="small")
        else:
            axis.set_title(f"{variant}-{depth}: {'diverged' if entry is not None and entry.diverged else 'not trained'}",
                           fontsize="small")
        axis.scatter(data.x_train[:, 0], data.x_train[:, 1], s=4, edgecolors="none",
                     c=np.where(data.y_train == 1, "#FFD21F", "black"))  # class 1 yellow, class 0 black
        axis.set_xlim(-LIMIT, LIMIT)
        axis.set_ylim(-LIMIT, LIMIT)
        axis.set_xlabel("$x_1$", fontsize="small", labelpad=1)
        axis.set_ylabel("$x_2$", fontsize="small", labelpad=1)
    if image is not None:
        figure.colorbar(image, ax=axes, shrink=0.8, label="P(class 1)")
    figure.savefig(path, dpi=110)
    return figure


def results_table(results):
    rows = []
    for entry in sorted(results.models, key=lambda m: (m.variant, m.depth)):
        rows.append([entry.variant, entry.depth, format_value(entry.params, "int"),
                     format_value(entry.train_loss), format_value(entry.train_accuracy, "percent"),
                     format_value(entry.test_accuracy, "percent"),
                     f"diverged at {entry.diverged_at}" if entry.diverged else "ok",
                     format_value(entry.seconds, "seconds")])
    return ["variant", "layers", "parameters", "train loss", "train accuracy", "test accuracy", "status",
            "time"], rows


def comparison_figures(results):
    return {f"{entry.id} training loss": (entry.train_loss, "nats") for entry in results.models}


def write_summary(run, config, results, data, figures, subtitle):
    lines = [
        f"# Toy run: plain vs residual MLPs on two spirals ({config.preset} preset)\n",
        banner_markdown(data.banner),
        f"Data: **{data.title}**, {config.points} training points (noise {config.noise}), seed {config.seed}. "
        f"Each layer is LayerNorm -> Dense({config.width}) -> ReLU; the residual MLP adds every layer's input "
        f"back. Adam, lr {config.learning_rate}, {config.epochs} epochs of {config.steps_per_epoch} steps of "
        f"{config.batch_size} points. Train loss and accuracy on all training points at the end; test accuracy "
        f"on {len(data.y_test)} other points of the same spirals.\n",
        "## Results\n", markdown_table(*results_table(results)) + "\n",
        "## What this run shows\n",
        "Computed from this run's numbers (thresholds in `tracks/toy/findings.py`).\n",
        "\n".join(finding_lines(toy_findings(results))) + "\n",
        "## Instruments at initialisation\n",
        initialisation_table(results.initialisation or {}) + "\n",
        instrument_notes(results.initialisation or {}),
    ]
    drawn = {name for _, name in figures}
    trained = [note for name, note in (("lesion.png", LESION_NOTE), ("paths.png", PATHS_NOTE),
                                       ("loss_landscape.png", LANDSCAPE_NOTE)) if name in drawn]
    if trained:
        lines += [f"## The trained {max(config.depths)}-layer MLPs taken apart\n", "".join(trained)]
    lines += [f"## {title}\n\n![{title}]({name})\n" for title, name in figures]
    (run.path / "summary.md").write_text("\n".join(lines))


def subtitle(ctx):
    """The line under every figure's title that says which run it is."""
    config, data = ctx.config, ctx.data
    return f"two spirals, seed {config.seed}: {len(data.y_train)} points, width {config.width} ({config.preset} preset)"


def draw_figures(results, ctx):
    """Every figure of a finished run's report, from what the run keeps (results.json, metrics/, dynamics/).

    Returns the (title, file) of summary.md's figures, those at initialisation
    (drawn when they were measured) included. scripts/replot.py calls it too.
    """
    run, config, data, line = ctx.run, ctx.config, ctx.data, subtitle(ctx)
    plot_loss_curves(config, results, run.path / "loss_curves.png", [run], line)
    plot_boundaries(config, results, data, run.path / "boundaries.png", line)
    figures = [("Training loss", "loss_curves.png"), ("Decision boundaries", "boundaries.png")]
    figures += instrument_figures(run.path)
    figures += plot_dynamics(run.path, results, subtitle=f"{line}; on {config.instrument_points} points")
    figures += plot_trained(config, results, run.path, line)
    return figures


def report(results, ctx):
    """The figures and summary.md of a finished run; returns the lines the run ends with in the terminal."""
    figures = draw_figures(results, ctx)
    write_summary(ctx.run, ctx.config, results, ctx.data, figures, subtitle(ctx))
    return run_ending(ctx.run, *results_table(results))


def plot_trained(config, results, directory, subtitle):
    """The deepest trained nets taken apart (experiment.trained_studies), drawn by residual_keras.plots.

    lesion.png and block_deletion.png (Veit et al. 2016: one layer removed;
    k layers removed), paths.png (the residual net's paths),
    loss_landscape.png (Li et al. 2018). Returns the figures drawn.
    """
    figures = []
    on_test = f"{subtitle}; on the {config.points} test points"
    depth, entries = deepest_with(config, results, "lesion")
    if entries:
        plots.lesion([m.lesion for m in entries], [series_label(m) for m in entries], path=directory / "lesion.png",
                     subtitle=on_test, title=f"Test accuracy with one layer removed ({depth} layers)")
        figures.append(("Removing one layer of the trained nets", "lesion.png"))
    depth, entries = deepest_with(config, results, "deletion")
    if entries:
        plots.block_deletion([m.deletion for m in entries], labels=[series_label(m) for m in entries],
                             path=directory / "block_deletion.png", subtitle=on_test,
                             title=f"Test accuracy with k of the {depth} layers removed at once")
        figures.append(("Removing k layers at once (Veit et al. 2016)", "block_deletion.png"))
    depth, entries = deepest_with(config, results, "paths")
    if entries:
        plots.path_gradients([m.paths for m in entries], [series_label(m) for m in entries],
                             path=directory / "paths.png", subtitle=f"{subtitle}; on {PATH_POINTS} test points",
                             title=f"The {depth}-layer residual MLP as 2^{depth} paths (Veit et al. 2016, figure 6)")
        figures.append(("Which paths carry the gradient (Veit et al. 2016)", "paths.png"))
    depth, entries = deepest_with(config, results, "landscape")
    if entries:
        plots.loss_landscape([m.landscape for m in entries], [series_label(m) for m in entries],
                             path=directory / "loss_landscape.png",
                             subtitle=f"{subtitle}; {LANDSCAPE_STEPS} x {LANDSCAPE_STEPS} points, on the "
                                      f"{config.points} training points",
                             title=f"Trained {depth}-layer MLPs: the training loss around their weights")
        figures.append(("The loss around the trained weights (Li et al. 2018)", "loss_landscape.png"))
    return figures


SEED_METRICS = ("train_loss", "train_accuracy", "test_accuracy")


def seeds_table(results):
    rows = []
    for entry in sorted(results.models, key=lambda m: (m.variant, m.depth)):
        rows.append([entry.variant, entry.depth,
                     spread_cell(entry.train_loss, entry.std("train_loss"), format_value),
                     *(spread_cell(getattr(entry, metric), entry.std(metric),
                                   lambda value: format_value(value, "percent")) for metric in SEED_METRICS[1:]),
                     ", ".join(map(str, entry.seeds))])
    return ["variant", "layers", "train loss", "train accuracy", "test accuracy", "seeds"], rows


def seeds_report(seed_runs, ctx):
    """results.json, loss_curves.png (mean +- std bands) and summary.md of a `--seeds` run; its last lines."""
    run, config, data = ctx.run, ctx.config, ctx.data
    per_seed = [(seed, ToyResults.from_json(child.read_results())) for seed, child in seed_runs]
    results = write_seeds_results(run, "toy", config, per_seed, SEED_METRICS, keys=("variant", "depth"))
    subtitle = f"two spirals, seeds {','.join(map(str, config.seeds))} ({config.preset} preset)"
    plot_loss_curves(config, results, run.path / "loss_curves.png", [child for _, child in seed_runs], subtitle)
    write_seeds_summary(
        run, title=f"Toy run over {len(config.seeds)} seeds: plain vs residual MLPs ({config.preset} preset)",
        banner=data.banner,
        description=f"Two spirals of {config.points} points, each seed its own draw and initialisation.",
        table=markdown_table(*seeds_table(results)),
        combined=combine_findings([(seed, toy_findings(r)) for seed, r in per_seed]), seeds=config.seeds,
        figures=[("Training loss: mean ± std over the seeds", "loss_curves.png")])
    return run_ending(run, *seeds_table(results))
