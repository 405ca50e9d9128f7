"""Jacobian and depth figures: d x_l / d x_0 along the network, block by block, against depth."""

from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from residual_keras._types import Labels, OneOrMore, PathLike
from residual_keras.plots._style import (
    STREAM_AXIS,
    VARIANT_STYLES,
    _as_list,
    _block_axis,
    _color,
    _figure,
    _finish,
    _integer_ticks,
    _labels,
    _log_y,
    _panels,
    _positive,
    series_styles,
)


def _estimate_note(result):
    """" (lower bound: k power iterations)" for an unconverged estimate, else ""."""
    if result.get("converged", True):
        return ""
    return f" (lower bound: {result.get('iterations', '?')} power iterations)"


def _depths_estimate_note(by_depth, depths):
    """" (lower bound: k power iterations)" when some depth's Jacobian estimate did not converge, else "".

    `by_depth`: {depth: values with "jacobian_converged" and "jacobian_iterations"}. Names the depths
    when only some are lower bounds, and the range of k when the depths had different iterations.
    """
    unconverged = [depth for depth in depths if by_depth[depth].get("jacobian_converged") is False
                   and by_depth[depth].get("jacobian_norm") is not None]
    if not unconverged:
        return ""
    iterations = sorted({by_depth[depth].get("jacobian_iterations", "?") for depth in unconverged}, key=str)
    counts = (str(iterations[0]) if len(iterations) == 1 else
              f"{min(iterations)} to {max(iterations)}" if all(isinstance(k, int) for k in iterations) else "?")
    where = "" if len(unconverged) == len(depths) else f" at {', '.join(str(d) for d in unconverged)} layers"
    return f" (lower bound{where}: {counts} power iterations)"


def jacobian(
    results: OneOrMore, labels: Labels=None, *, references: Sequence[float]=(), path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None
) -> Figure:
    """Spectral norm of d x_l / d x_0 against depth l, with `c^l` reference lines.

    Power iteration approaches the norm from below: a result whose
    estimates did not converge is labelled "lower bound: k power
    iterations". A result with `cumulative` norms (`jacobian_norm(..., cumulative=True)`)
    is drawn as a line over l = 1..L (the mean over examples, with the
    min-max range shaded); one without is a single marker at depth L, so a
    list of models of different depths also draws a curve.

    Args:
        results: one `diagnostics.jacobian_norm` result or a list of them.
        labels: one legend label per result. Default: the model names.
        references: numbers c; each draws the dashed line `c^l`
            (e.g. (0.2, 0.8, 1.2) for branches with ||J_f|| <= 0.2).
            The line at 1 (the identity) is always drawn.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure (log y axis).
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title
        or r"Jacobian of the stream: $\|\partial x_\ell / \partial x_0\|_2$ vs depth",
        banner, subtitle=subtitle)
    max_depth = 1
    for style, result, label in zip(series_styles(labels), results, labels):
        color = style["color"]
        label += _estimate_note(result)
        if result.get("cumulative") is not None:
            norms = np.asarray(result["cumulative"], dtype="float64")
            depths = np.asarray(result.get("cumulative_depths") or np.arange(1, len(norms) + 1))
            axes.plot(depths, _positive(norms.mean(axis=1)), markersize=2, **style, label=label)
            if norms.shape[1] > 1:
                axes.fill_between(
                    depths,
                    _positive(norms.min(axis=1)),
                    _positive(norms.max(axis=1)),
                    color=color,
                    alpha=0.2,
                    linewidth=0,
                )
            max_depth = max(max_depth, int(depths[-1]))
        else:
            total = np.asarray(result["total"], dtype="float64")
            depth = len(result["names"])
            axes.errorbar(
                [depth],
                [total.mean()],
                yerr=[[total.mean() - total.min()], [total.max() - total.mean()]],
                marker="o",
                color=color,
                label=label,
                capsize=3,
            )
            max_depth = max(max_depth, depth)
    depths = np.linspace(0, max_depth, 200)
    for c in references:
        axes.plot(
            depths,
            _positive(float(c) ** depths),
            color="gray",
            linestyle="--",
            linewidth=1,
        )
        axes.annotate(
            f"${c:g}^\\ell$",
            (depths[-1], float(c) ** depths[-1]),
            xytext=(3, 0),
            textcoords="offset points",
            color="gray",
            fontsize="small",
            va="center",
            annotation_clip=False,
        )
    axes.axhline(1.0, color="black", linewidth=1, linestyle=":", label="1 (identity)")
    _log_y(axes)
    axes.set_xlim(0, max_depth * 1.08)
    _integer_ticks(axes.xaxis)
    axes.set_xlabel(STREAM_AXIS)
    axes.set_ylabel(r"spectral norm $\|\partial x_\ell / \partial x_0\|_2$")
    axes.legend(fontsize="small")
    return _finish(figure, path)

def jacobian_blocks(results: OneOrMore, labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """Each block's Jacobian, their product, and the Jacobian of the whole stack, block by block.

    For block l: the block's own spectral norm `||J_l||` (dots), the product
    of those norms up to l (dashed: the bound a product of matrices obeys),
    and the norm of the product `||d x_l / d x_0||` (solid), per model in its
    own panel. For residual blocks with measured branch norms eps_l
    (`jacobian_norm(..., per_branch=True)`) the bound `prod (1 + eps_i)` is
    dotted (a ReLU after the addition only lowers it), and `prod (1 - eps_i)`
    too when every eps_i < 1 (the lower bound needs eps < 1 and blocks
    `x + f(x)`). Unconverged power iterations give lower bounds of every one
    of these norms, so then the solid line can lie above the dashed one;
    the panel's title says so.

    Args:
        results: `diagnostics.jacobian_norm` results computed with
            `per_block=True` and `cumulative=True`.
        labels: one label per result. Default: the model names.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one panel per result (log y axes).
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _panels(title or "Block by block: each Jacobian, their product, and the product's norm",
                           banner, len(results), subtitle=subtitle)
    for axis, result, label in zip(axes, results, labels):
        per_block = np.asarray(result["per_block"], dtype="float64").mean(axis=1)
        cumulative = np.asarray(result["cumulative"], dtype="float64").mean(axis=1)
        depths = np.arange(1, len(per_block) + 1)
        cumulative_depths = result.get("cumulative_depths") or depths
        axis.plot(depths, _positive(per_block), linestyle="none", marker="o", markersize=4,
                  color="tab:gray", label=r"$\|J_\ell\|$ (one block)")
        axis.plot(depths, _positive(np.cumprod(per_block)), linestyle="--", color="tab:red",
                  label=r"$\prod_{i \leq \ell} \|J_i\|$")
        axis.plot(cumulative_depths, _positive(cumulative), color="tab:blue", linewidth=2,
                  label=r"$\|\partial x_\ell / \partial x_0\|$")
        branches = result.get("per_branch")
        if branches and all(branch is not None for branch in branches):
            eps = np.array([np.mean(branch) for branch in branches])
            axis.plot(depths, np.cumprod(1 + eps), color="tab:green", linestyle=":", linewidth=2,
                      label=r"bound $\prod (1 + \varepsilon_i)$, $\varepsilon_i = \|J_{f_i}\|$")
            if np.all(eps < 1):
                axis.plot(depths, np.cumprod(1 - eps), color="tab:green", linestyle=":", linewidth=2,
                          label=r"bound $\prod (1 - \varepsilon_i)$")
        axis.axhline(1.0, color="black", linestyle=":", linewidth=1)
        _log_y(axis)
        _block_axis(axis, len(per_block))
        axis.set_ylabel("spectral norm (log scale)")
        low, high = axis.get_ylim()
        axis.set_ylim(min(low, 0.1), max(high, 10.0))  # at least a decade either side of 1
        note = _estimate_note(result)
        axis.set_title(label + (f"\n{note.strip(' ()')}" if note else ""), fontsize="medium")
        axis.legend(fontsize="x-small")
    return _finish(figure, path)


def depth_scaling(summary: dict[str, dict[int, dict[str, float]]], *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """At initialisation, how the gradient gain, the Jacobian and the stream scale with depth.

    Args:
        summary: {variant: {depth: {"gradient_gain": float,
            "jacobian_norm": float or None, "stream_growth": float}}}, where
            `stream_growth` is the RMS of the last block's output over the
            first block's input. One line per variant, log scales. With
            "jacobian_converged": False (and "jacobian_iterations": k) a
            Jacobian norm is a lower bound, and the line's label in the
            Jacobian panel says "lower bound: k power iterations", as in
            `jacobian` and `jacobian_blocks`.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with three panels (one left out where no
        model has its number), in a grid of two columns.
    """
    keys = (  # (key, panel title, y-axis label)
        ("gradient_gain", r"gradient gain $\|\partial L/\partial x_0\|/\|\partial L/\partial x_L\|$", "gradient gain"),
        ("jacobian_norm", r"$\|\partial x_L / \partial x_0\|_2$", "spectral norm"),
        ("stream_growth", r"stream growth RMS($x_L$) / RMS($x_0$)", "RMS ratio"),
    )

    def measured(key):
        return any(values.get(key) is not None for by_depth in summary.values() for values in by_depth.values())

    keys = [item for item in keys if measured(item[0])]  # a panel without data is left out
    figure, axes = _panels(title or "At initialisation, against depth", banner, len(keys), subtitle=subtitle)
    for index, (variant, by_depth) in enumerate(summary.items()):
        linestyle, marker = VARIANT_STYLES[index % len(VARIANT_STYLES)]
        depths = sorted(by_depth, key=int)
        for axis, (key, _, _) in zip(axes, keys):
            values = [by_depth[depth].get(key) for depth in depths]
            values = [np.nan if value is None else value for value in values]
            label = variant
            if np.all(np.isnan(values)):
                label += " (undefined: no gradient reaches the last block)" if key == "gradient_gain" else " (n/a)"
            elif key == "jacobian_norm":
                label += _depths_estimate_note(by_depth, depths)
            axis.plot([int(d) for d in depths], _positive(values), color=_color(index),
                      linestyle=linestyle, marker=marker, label=label)
    for axis, (_, name, ylabel) in zip(axes, keys):
        _log_y(axis)
        axis.axhline(1.0, color="gray", linewidth=1, linestyle=":")
        _integer_ticks(axis.xaxis)
        axis.set_xlabel("depth (layers)")
        axis.set_ylabel(ylabel)
        axis.set_title(name, fontsize="medium")
        axis.legend(fontsize="x-small")
    return _finish(figure, path)
