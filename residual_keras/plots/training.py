"""Learning curves: a metric against the epoch or step, one panel per variant (He et al.'s Figure 6)."""

from typing import Any, Optional, Sequence

from matplotlib.figure import Figure

from residual_keras._types import PathLike
from residual_keras.plots._style import _finish, _integer_ticks, _panels, series_styles


def curves(panels: Sequence[tuple[str, Sequence[dict[str, Any]]]], *, xlabel: str, ylabel: str, note: Optional[str]=None, bottom: Optional[float]=None, top: Optional[float]=None, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """Curves of several models, one panel per group (e.g. plain left, residual right).

    Args:
        panels: list of (panel title, list of series). A series is a dict with
            `label` (the model's id; a `Label("plain-32", "plain", 32)` gets
            colour = depth and style = variant, as every figure), `legend` (its text in the legend), `x`,
            `y` (drawn bold) and optionally `dashed` (drawn thin and dashed on
            the same x, e.g. the test error beside the training error) and
            `band`, a (low, high) pair of lists on the same x shaded in the
            series' colour (e.g. mean +- std over seeds).
        xlabel, ylabel: axis names.
        note: optional legend title (e.g. "bold: train, dashed: test").
        bottom, top: optional y limits shared by all panels (None: automatic,
            then the same for all).
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one panel per group that has a series
        (a grid of two columns); a group without any is left out.

    Raises:
        ValueError: no group has a series.
    """
    panels = [(panel_title, group) for panel_title, group in panels if group]
    figure, axes = _panels(title or "Learning curves", banner, len(panels), subtitle=subtitle)
    labels = [series["label"] for _, group in panels for series in group]
    styles = dict(zip(labels, series_styles(labels)))
    # Dashed lines mean "the second curve" (e.g. test error) here: keep the bold ones solid.
    solid = any(series.get("dashed") is not None for _, group in panels for series in group)
    for axis, (panel_title, group) in zip(axes, panels):
        for series in group:
            style = dict(styles[series["label"]], **({"linestyle": "-"} if solid else {}))
            axis.plot(series["x"], series["y"], linewidth=2.4, markersize=4, **style, label=series["legend"])
            if series.get("band") is not None:
                low, high = series["band"]
                axis.fill_between(series["x"], low, high, color=style["color"], alpha=0.2, linewidth=0)
            if series.get("dashed") is not None:
                axis.plot(series["x"], series["dashed"], color=style["color"], linewidth=0.9, linestyle="--")
        axis.set_title(panel_title, fontsize="medium")
        _integer_ticks(axis.xaxis)
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        axis.legend(title=note, fontsize="small", title_fontsize="small")
    low = min(axis.get_ylim()[0] for axis in axes) if bottom is None else bottom
    high = max(axis.get_ylim()[1] for axis in axes) if top is None else top
    for axis in axes:
        axis.set_ylim(low, high)
    return _finish(figure, path)
