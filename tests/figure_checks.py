"""Whether a matplotlib figure can be read at page width: the rule every figure a student sees obeys.

`legibility_problems(figure)` draws the figure (Agg, no file) and returns one
line per problem, [] when there is none:

- text smaller than `MIN_TEXT_PX` pixels when the figure is shown
  `PAGE_WIDTH_PX` wide (a figure W inches wide shows text of s points at
  s * PAGE_WIDTH_PX / (72 W) pixels, whatever its dpi);
- text outside the figure (cut off when saved);
- an axes with data whose x or y axis (and z, in 3-D) has no label;
- an empty axes: no line, bar, image or filled area, and no text.

`hidden_points(figure)` lists the data points (markers, scatter dots) that
a legend drawn inside a panel covers: a legend may sit over empty space or
a line, never over a measurement.

Used by tests/library/test_plots_legible.py (every function of
residual_keras.plots) and tests/tracks/test_report_figures.py (the figures the
tracks draw themselves).
"""

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot

from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.text import Text  # noqa: E402

PAGE_WIDTH_PX = 800
MIN_TEXT_PX = 8


def _has_data(axes):
    lines = [line for line in axes.get_lines() if len(line.get_xdata()) > 0]
    return bool(lines or axes.collections or axes.patches or axes.images)


def _is_colorbar(axes):
    return getattr(axes, "_colorbar", None) is not None


def text_px_at_page_width(figure, text):
    """The height in pixels of `text`'s font when `figure` is shown PAGE_WIDTH_PX wide."""
    return text.get_fontsize() * PAGE_WIDTH_PX / (72.0 * figure.get_figwidth())


def legibility_problems(figure, name="figure"):
    """One line per rule that `figure` breaks (see the module's docstring); [] when it breaks none."""
    drawn = []  # every text the figure draws (a tick label outside the view is never drawn)
    draw = Text.draw

    def recording(text, renderer):
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        return draw(text, renderer)

    canvas = FigureCanvasAgg(figure)
    with mock.patch.object(Text, "draw", recording):
        canvas.draw()
    renderer = canvas.get_renderer()
    problems = []
    box = figure.bbox
    for text in dict.fromkeys(drawn):
        px = text_px_at_page_width(figure, text)
        if px < MIN_TEXT_PX - 1e-6:
            problems.append(f"{name}: {text.get_text()[:40]!r} is {px:.1f} px high at {PAGE_WIDTH_PX} px wide "
                            f"(font {text.get_fontsize():.1f} pt in a {figure.get_figwidth():.1f} in figure)")
        extent = text.get_window_extent(renderer)
        if extent.width and (extent.x0 < box.x0 - 2 or extent.x1 > box.x1 + 2 or extent.y0 < box.y0 - 2
                             or extent.y1 > box.y1 + 2):
            problems.append(f"{name}: {text.get_text()[:40]!r} runs outside the figure")
    for axes in figure.axes:
        if _is_colorbar(axes):
            continue
        shown = getattr(axes, "_axis3don", axes.axison)  # a 3-D axes hides the 2-D frame, not its axes
        if not shown:  # a panel of text only (a note): it must hold some
            if not any(text.get_text().strip() for text in axes.texts):
                problems.append(f"{name}: an empty panel (no axis, no text)")
            continue
        if not _has_data(axes):
            problems.append(f"{name}: an empty panel {axes.get_title()[:40]!r}")
            continue
        labels = {"x": axes.get_xlabel(), "y": axes.get_ylabel()}
        if hasattr(axes, "get_zlabel"):
            labels["z"] = axes.get_zlabel()
        for axis, label in labels.items():
            if not label.strip():
                problems.append(f"{name}: the panel {axes.get_title()[:40]!r} has no {axis}-axis label")
    return problems


def _points(axes):
    """Every marker and scatter dot of `axes`, in display coordinates (after a draw)."""
    points = []
    for line in axes.get_lines():
        if line.get_visible() and line.get_marker() not in (None, "", "None", " ") and len(line.get_xdata()):
            xy = np.column_stack([np.asarray(line.get_xdata(), dtype=float),
                                  np.asarray(line.get_ydata(), dtype=float)])
            points.append(line.get_transform().transform(xy))
    for collection in axes.collections:
        offsets = np.asarray(collection.get_offsets(), dtype=float)
        if collection.get_visible() and offsets.size:
            points.append(collection.get_offset_transform().transform(offsets))
    if not points:
        return np.zeros((0, 2))
    points = np.concatenate(points)
    return points[np.all(np.isfinite(points), axis=1)]


def hidden_points(figure, name="figure"):
    """One line per panel whose legend, drawn inside the panel, covers a data point; [] when none does."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    problems = []
    for axes in figure.axes:
        legend = axes.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        panel = axes.get_window_extent(renderer)
        if box.x1 <= panel.x0 or box.x0 >= panel.x1 or box.y1 <= panel.y0 or box.y0 >= panel.y1:
            continue  # outside the panel: it covers nothing
        points = _points(axes)
        inside = ((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
                  & (points[:, 1] < box.y1))
        if inside.any():
            problems.append(f"{name}: the legend of {axes.get_title()[:40]!r} covers {int(inside.sum())} "
                            f"data point(s)")
    return problems


def visible_ticks(axes, which="x"):
    """The tick positions inside the view limits of one axis of `axes`."""
    axis = axes.xaxis if which == "x" else axes.yaxis
    low, high = sorted(axes.get_xlim() if which == "x" else axes.get_ylim())
    return [tick for tick in axis.get_majorticklocs() if low - 1e-9 <= tick <= high + 1e-9]
