"""The loss around trained weights (`loss_landscape` results): contours, surfaces and the 1-D slices."""

from typing import Optional

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator

from residual_keras._types import Labels, OneOrMore, PathLike
from residual_keras.plots._style import _as_list, _finish, _labels, _log_y, _number, _panels, _wrapped, series_styles

LEVELS = 20


def _shared_levels(grids):
    """Log-spaced contour levels over every grid's finite values (one scale for all panels)."""
    values = np.concatenate([grid[np.isfinite(grid)].ravel() for grid in grids])
    values = values[values > 0]
    if values.size == 0:
        return None
    low, high = float(values.min()), float(values.max())
    if high <= low * (1 + 1e-9):
        high = low * 1.01 + 1e-12
    return np.geomspace(low, high, LEVELS)


def loss_landscape(
    results: OneOrMore,
    labels: Labels = None,
    *,
    path: PathLike = None,
    banner: Optional[str] = None,
    subtitle: Optional[str] = None,
    title: Optional[str] = None,
) -> Figure:
    """Each model's loss plane: the contour maps, then the surfaces, then all 1-D slices and a note.

    A grid of two columns: for two results (e.g. the deepest plain and
    residual nets) their contour maps side by side, their surfaces below,
    then the 1-D slices of both and a note on what was measured. One colour
    scale (log-spaced levels) is shared by every panel, so heights compare
    across models. Each column's title gives the figures measured on its grid
    (`edge_rise`, `curvature`, `nonconvex_share`). Where the loss was not
    finite the grid is blank.

    Args:
        results: one `diagnostics.loss_landscape` result or a list of them.
        labels: one label per result (default: each model's name).
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    count = len(results)
    # Reading order in a grid of two columns: every contour map, every surface, the slices, the note.
    figure, axes = _panels(title or "The loss around the trained weights (filter-normalised random directions)",
                           banner, 2 * count + 2, subtitle=subtitle, panel_height=3.9,
                           projections=[None] * count + ["3d"] * count + [None, None])
    tops, bottoms, slices, note = axes[:count], axes[count:2 * count], axes[-2], axes[-1]
    grids = [np.asarray(result["grid"], dtype="float64") for result in results]
    levels = _shared_levels(grids)
    finite = [grid[np.isfinite(grid)] for grid in grids]
    z_low = min((float(np.log10(values[values > 0].min())) for values in finite if (values > 0).any()), default=0.0)
    z_high = max((float(np.log10(values[values > 0].max())) for values in finite if (values > 0).any()), default=1.0)
    contour_set = None
    for top, bottom, result, label, grid in zip(tops, bottoms, results, labels, grids):
        alphas = np.asarray(result["alphas"], dtype="float64")
        a, b = np.meshgrid(alphas, alphas, indexing="ij")
        shown = np.ma.masked_invalid(np.where(grid > 0, grid, np.nan))
        if levels is not None and shown.count():
            contour_set = top.contourf(b, a, shown, levels=levels, cmap="viridis", norm=_log_norm(levels))
            top.contour(b, a, shown, levels=levels, colors="white", linewidths=0.4, alpha=0.6)
        top.plot([0], [0], marker="+", color="red", markersize=10)
        top.set_xlabel("direction 2")
        top.set_ylabel("direction 1")
        top.set_aspect("equal")
        top.set_title(f"{label}\nloss at the weights {_number(result.get('center_loss'))}, "
                      f"rise at the edge {_number(result.get('edge_rise'))}\n"
                      f"curvature {_number(result.get('curvature'))}, non-convex "
                      f"{_share(result.get('nonconvex_share'))} of the plane", fontsize="small")
        surface = np.log10(np.where(grid > 0, grid, np.nan))
        bottom.plot_surface(b, a, np.ma.masked_invalid(surface), cmap="viridis", vmin=z_low, vmax=z_high,
                            linewidth=0, antialiased=True)
        bottom.set_zlim(z_low, z_high)
        bottom.set_xlabel("direction 2", fontsize="small")
        bottom.set_ylabel("direction 1", fontsize="small")
        bottom.set_zlabel("log10 loss", fontsize="small")
        bottom.set_title(f"{label}: the surface", fontsize="small")
    if contour_set is not None:
        bar = figure.colorbar(contour_set, ax=tops, location="right", shrink=0.8)
        bar.set_label("loss (one scale for all)")
        bar.locator = LogLocator()
    for style, result, label in zip(series_styles(labels), results, labels):
        slices.plot(result["alphas"], result["slice"], label=label, markersize=3, **style)
    _log_y(slices)
    slices.set_xlabel("along direction 1 (1 = the weights' norm)")
    slices.set_ylabel("loss")
    slices.set_title("1-D slices through the weights", fontsize="small")
    slices.legend(fontsize="x-small")
    note.axis("off")
    first = results[0]
    note.text(0.0, 0.95, _wrapped(
        f"Loss: {first.get('loss', 'the model loss')}, in inference mode, on {first.get('examples', '?')} "
        "examples at each of the grid's points. Directions: random, each filter scaled to the norm of the "
        "same filter of the weights (Li et al. 2018); biases and normalisation parameters stay put. "
        "Non-convex: the share of the plane's inner points where the surface curves down along some "
        "direction (a Hessian eigenvalue below zero, at least a tenth of the largest).", 4.2, 12),
        va="top", ha="left", fontsize="small", transform=note.transAxes)
    return _finish(figure, path)


def _log_norm(levels):
    from matplotlib.colors import LogNorm

    return LogNorm(vmin=levels[0], vmax=levels[-1])


def _share(value):
    return "undefined" if value is None or not np.isfinite(value) else f"{100 * value:.0f}%"
