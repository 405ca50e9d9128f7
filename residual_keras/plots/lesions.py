"""Veit et al.'s experiments on trained networks: lesions, k-block deletion and swaps, paths."""

from typing import Optional

import numpy as np
from matplotlib.figure import Figure

from residual_keras._types import Labels, OneOrMore, PathLike
from residual_keras.plots._style import (
    FIGURE_WIDTH,
    _as_list,
    _block_axis,
    _figure,
    _finish,
    _integer_ticks,
    _labels,
    _log_y,
    _panels,
    _positive,
    series_styles,
)


def lesion(results: OneOrMore, labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None, chance: Optional[float]=None, chance_noise: float=0.0) -> Figure:
    """Bar chart of the metric with each single block removed, and the intact metric.

    Several results (e.g. residual and plain) are drawn as grouped bars with
    one dashed "intact" line each. Blocks that cannot be removed (a plain
    block that changes shape) get an "n/a" mark instead of a bar. Blocks are
    numbered from 1, as in every figure (their names are in each result's
    `names`, in the same order).

    Args:
        results: one `diagnostics.lesion` result or a list of them (same
            number of blocks for grouped bars).
        labels: one legend label per result. Default: the model names.
        path, banner, title, subtitle: as in `gradient_flow`.
        chance: the metric a constant guess scores on the same data (e.g. the
            test error of always answering the largest class), drawn as a
            dotted grey line; None (the default): no line.
        chance_noise: half-width of a grey band around `chance`: how far from
            it a value is still chance within the measurement's noise (e.g. 3
            standard errors on the images measured); 0: the line alone.

    Returns:
        matplotlib.figure.Figure with one bar per removable block and result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    metric = results[0].get("metric", "metric")
    num_blocks = max(len(result["names"]) for result in results)
    width = 0.8 / len(results)
    figure, axes = _figure(
        title or f"Lesion study: {metric} with one block removed",
        banner, figsize=(FIGURE_WIDTH, 5.0), subtitle=subtitle)
    for index, (style, result, label) in enumerate(zip(series_styles(labels), results, labels)):
        color = style["color"]
        offset = (index - (len(results) - 1) / 2) * width
        positions = np.arange(1, len(result["names"]) + 1) + offset
        values = result["lesioned"]
        removable = [i for i, value in enumerate(values) if value is not None]
        axes.bar(
            positions[removable],
            [values[i] for i in removable],
            width=width,
            color=color,
            alpha=0.8,
            label=f"{label}, one block removed",
        )
        for i, value in enumerate(values):
            if value is None:
                axes.annotate(
                    "n/a",
                    (positions[i], 0),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    fontsize="x-small",
                    rotation=90,
                    color=color,
                )
        axes.axhline(
            result["intact"],
            color=color,
            linestyle="--",
            linewidth=1.2,
            label=f"{label}, intact ({result['intact']:.3g})",
        )
    _chance_line(axes, chance, chance_noise)
    values = [v for result in results for v in (result["intact"], *result["lesioned"])]
    if all(value is None or value >= 0 for value in values):
        axes.set_ylim(bottom=0)
    _block_axis(axes, num_blocks, prefix="removed ")
    axes.set_ylabel(metric)
    figure.legend(loc="outside lower center", ncols=2, fontsize="small")
    return _finish(figure, path)

def _chance_line(axis, chance, chance_noise):
    """A dotted grey line at `chance` (the metric of a constant guess) and, for `chance_noise` > 0, a grey band
    of that half-width around it: values inside it are chance within the measurement's noise."""
    if chance is None:
        return
    if chance_noise:
        axis.axhspan(chance - chance_noise, chance + chance_noise, color="0.5", alpha=0.15, linewidth=0,
                     label=f"chance: {chance:.3g} ± {chance_noise:.2g}")
        axis.axhline(chance, color="0.35", linestyle=":", linewidth=1.2)
    else:
        axis.axhline(chance, color="0.35", linestyle=":", linewidth=1.2, label=f"chance ({chance:.3g})")


def _legend_below(axis):
    """The legend under the panel: a trained net's dots can lie anywhere from 0 to chance, so no corner is free."""
    axis.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)

def block_deletion(deletions: OneOrMore, swaps: Optional[OneOrMore]=None, labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None, chance: Optional[float]=None, chance_noise: float=0.0) -> Figure:
    """Veit et al.'s lesions: the metric with k blocks removed at once, and with adjacent blocks swapped.

    Args:
        deletions: one `diagnostics.delete_blocks` result or a list of them
            (e.g. residual and plain). Each draw is a dot, the mean over
            draws a line; k = 0 is the intact model.
        swaps: optional `diagnostics.swap_blocks` results, one per deletion
            result (None entries allowed), drawn in a second panel: the
            metric with each adjacent pair exchanged.
        labels: one legend label per result. Default: the model names.
        path, banner, title, subtitle: as in `gradient_flow`.
        chance: the metric a constant guess scores on the same data (e.g. the
            test error of always answering the largest class), drawn as a
            dotted grey line in each panel; None (the default): no line.
        chance_noise: half-width of a grey band around `chance`: how far from
            it a value is still chance within the measurement's noise (e.g. 3
            standard errors on the images measured); 0: the line alone.

    Returns:
        matplotlib.figure.Figure.
    """
    deletions = _as_list(deletions)
    labels = _labels(deletions, labels)
    metric = deletions[0].get("metric", "metric")
    show_swaps = swaps is not None and any(swap and swap["pairs"] for swap in swaps)
    figure, axes = _panels(
        title or f"Removing and reordering blocks of trained networks (Veit et al. 2016): {metric}",
        banner, 2 if show_swaps else 1, subtitle=subtitle, panel_height=4.0)
    axis = axes[0]
    styles = series_styles(labels)
    for style, result, label in zip(styles, deletions, labels):
        color = style["color"]
        ks = [0] + list(result["num_removed"])
        axis.plot(ks, [result["intact"]] + list(result["mean"]), **style,
                  label=f"{label} (of {len(result['candidates'])} blocks)")
        for k, values in zip(result["num_removed"], result["values"]):
            axis.scatter([k] * len(values), values, color=color, s=10, alpha=0.4)
    _integer_ticks(axis.xaxis)
    axis.set_xlabel("blocks removed at random (k)")
    axis.set_ylabel(f"{metric}\n(dots: single draws; line: mean)")
    _chance_line(axis, chance, chance_noise)
    axis.set_ylim(bottom=0)
    _legend_below(axis)
    axis.set_title("delete k blocks", fontsize="medium")
    if show_swaps:
        axis = axes[1]
        for style, swap, label in zip(styles, swaps, labels):
            if not swap or not swap["pairs"]:
                continue
            color = style["color"]
            positions = np.arange(1, len(swap["swapped"]) + 1)
            axis.plot(positions, swap["swapped"], color=color, marker="s", linestyle="none",
                      label=f"{label}: one adjacent pair swapped")
            axis.axhline(swap["intact"], color=color, linestyle="--", linewidth=1.2,
                         label=f"{label}: intact ({swap['intact']:.3g})")
        _integer_ticks(axis.xaxis)
        most = max([len(swap["swapped"]) for swap in swaps if swap] or [1])
        axis.set_xlim(0.5, most + 0.5)  # one pair or many: whole-number positions
        axis.set_xlabel("swapped pair (1 = first two same-shape blocks)")
        axis.set_ylabel(metric)
        _chance_line(axis, chance, chance_noise)
        axis.set_ylim(bottom=0)
        _legend_below(axis)
        axis.set_title("swap two adjacent blocks", fontsize="medium")
    return _finish(figure, path)

def path_gradients(results: OneOrMore, labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """Veit et al.'s figure 6: how long the paths are, and which lengths carry the gradient.

    Left: the share of paths of each length (Binomial(n, 1/2), bars) and the
    share of the gradient they carry (lines). Right: the gradient norm of one
    path of each length (log scale): it falls with every branch it passes.

    Args:
        results: one `diagnostics.path_gradients` result or a list of them.
        labels: one legend label per result. Default: the model names.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with two panels.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, (left, right) = _panels(
        title or "Residual networks as ensembles of paths (Veit et al. 2016, figure 6)", banner, 2, subtitle=subtitle,
        panel_height=4.0)
    width = 0.8 / len(results)
    for index, (style, result, label) in enumerate(zip(series_styles(labels), results, labels)):
        color = style["color"]
        lengths = np.asarray(result["lengths"])
        left.bar(lengths + (index - (len(results) - 1) / 2) * width, result["path_fraction"],
                 width=width, color=color, alpha=0.3, label=f"{label}: share of paths")
        left.plot(lengths, result["gradient_share"], markersize=3, **style,
                  label=f"{label}: share of the gradient")
        right.plot(lengths, _positive(result["gradient_per_path"]), markersize=3, **style, label=label)
    for axis in (left, right):
        _integer_ticks(axis.xaxis)
    left.set_xlabel("path length k (branches passed)")
    left.set_ylabel("fraction")
    left.legend(fontsize="small")
    left.set_title("paths vs the gradient they carry", fontsize="medium")
    _log_y(right)
    right.set_xlabel("path length k (branches passed)")
    right.set_ylabel(r"$\|\partial L / \partial x_0\|$ through one path")
    right.legend(fontsize="small")
    right.set_title("gradient of a single path", fontsize="medium")
    return _finish(figure, path)
