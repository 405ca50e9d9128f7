"""What every figure shares: one palette, one convention (colour = depth, style = variant), one figure helper."""

import os
import re
from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, LogFormatterSciNotation, MaxNLocator

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
# One line style and marker per variant, in order of first appearance.

VARIANT_STYLES = (
    ("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1)), "v"),
    ((0, (3, 1, 1, 1)), "P"), ((0, (1, 1)), "X"), ((0, (5, 2, 1, 2)), "*"),
)  # fmt: skip

def _as_list(results):
    """One result (a dict) or several (a list/tuple of dicts) -> list of dicts."""
    if isinstance(results, dict):
        return [results]
    results = list(results)
    if not results or not all(isinstance(result, dict) for result in results):
        raise TypeError(
            "Expected an instrument's result (a dict) or a non-empty list of them."
        )
    return results

def _labels(results, labels):
    if labels is None:
        return [
            result.get("model") or f"model {i + 1}" for i, result in enumerate(results)
        ]
    if isinstance(labels, str):
        labels = [labels]
    labels = list(labels)
    if len(labels) != len(results):
        raise ValueError(
            f"Got {len(labels)} labels for {len(results)} results: give one label "
            "per result."
        )
    return labels

def _color(index):
    return PALETTE[index % len(PALETTE)]

class Label(str):
    """A series' label that also says its variant and depth: `Label("plain-20", "plain", 20)`.

    It is the string shown in the legend; `series_styles` reads `variant` and
    `depth` from it to style the series by the figures' convention
    (colour = depth, line style and marker = variant). A plain string is a
    series of its own (one colour each).
    """

    def __new__(cls, text: str, variant: Optional[str] = None, depth: Optional[int] = None) -> "Label":
        label = super().__new__(cls, text)
        label.variant, label.depth = variant, depth
        return label

    def __reduce__(self):
        return Label, (str(self), self.variant, self.depth)


def series_styles(labels: Sequence[str]) -> list[dict[str, str]]:
    """The figures' one convention: colour = depth, line style and marker = variant.

    When every label is a `Label` with a variant and a depth, the series get
    the colour of their depth (shallow to deep along `PALETTE`) and the line
    style and marker of their variant (in order of first appearance); when
    all share one depth, the colour follows the variant too. Otherwise every
    series gets a colour of its own and a solid line: a label's text is
    never parsed.

    Returns:
        a list of dicts with `color`, `linestyle` and `marker`, one per
        label, for `axes.plot`.
    """
    parsed = [(getattr(label, "variant", None), getattr(label, "depth", None)) for label in labels]
    if not labels or any(variant is None or depth is None for variant, depth in parsed):
        return [{"color": _color(i), "linestyle": "-", "marker": "o"} for i in range(len(labels))]
    depths = sorted({depth for _, depth in parsed})
    variants = list(dict.fromkeys(variant for variant, _ in parsed))
    styles = []
    for variant, depth in parsed:
        linestyle, marker = VARIANT_STYLES[variants.index(variant) % len(VARIANT_STYLES)]
        # One depth only (e.g. the deepest model of each variant): colour by variant too.
        colour = PALETTE[(depths.index(depth) if len(depths) > 1 else variants.index(variant)) % len(PALETTE)]
        styles.append({"color": colour, "linestyle": linestyle, "marker": marker})
    return styles

# Every figure is read at PAGE_WIDTH_PX wide (a page of the docs, a notebook cell), where
# its smallest text must be at least MIN_TEXT_PX high. A figure W inches wide shows text of s
# points at s * PAGE_WIDTH_PX / (72 W) pixels: with "x-small" (6.9 pt at matplotlib's 10 pt)
# the smallest size used, no figure is wider than 9.6 inches. So several panels go in a grid
# of at most two columns (FIGURE_WIDTH), never in a strip; tests/library/test_plots.py checks
# every figure against this rule.
PAGE_WIDTH_PX = 800
MIN_TEXT_PX = 8
FIGURE_WIDTH = 8.8  # inches: two panels side by side
PANEL_HEIGHT = 3.6  # inches: one row of panels

# One numbering and one notation in every figure: block 1 is the first block; the stream
# x_0 enters block 1 and x_l leaves block l, so x_L is the last block's output.
BLOCK_AXIS = r"block $\ell$ (block 1 = the first)"
STREAM_AXIS = r"stream point $\ell$ ($x_0$ enters block 1, $x_\ell$ leaves block $\ell$)"


def _shown_length(word):
    """About how many characters `word` takes once drawn: a $math$ part without its markup."""
    parts = word.split("$")
    math = "".join(parts[1::2])
    math = re.sub(r"\\[a-zA-Z]+", "x", math)  # a command (\partial, \|) is one symbol
    return len("".join(parts[0::2])) + len(re.sub(r"[{}_^\\]", "", math))


def _wrapped(text, width_inches, characters_per_inch=13):
    """`text` broken into lines that fit a figure `width_inches` wide; never inside a $math$ part."""
    width = max(30, int(width_inches * characters_per_inch))
    lines = []
    for paragraph in text.split("\n"):
        words, line, length, in_math = [], [], 0, False
        for word in paragraph.split(" "):  # the words, a $math$ part with its spaces kept as one
            if in_math:
                words[-1] += " " + word
            else:
                words.append(word)
            in_math ^= word.count("$") % 2 == 1
        for word in words:
            if line and length + 1 + _shown_length(word) > width:
                lines.append(" ".join(line))
                line, length = [], 0
            length += (1 if line else 0) + _shown_length(word)
            line.append(word)
        lines.append(" ".join(line))
    return "\n".join(lines)


class _LogLabels(LogFormatterSciNotation):
    """A log axis' labels as plain numbers (0.3, 6, 20) from 0.01 to 1000, as powers of ten beyond."""

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)  # "" where the axis shows no label
        return f"{x:g}" if label and 1e-2 <= abs(x) < 1e3 else label


def _log_y(axes):
    """A log y axis whose labels read as numbers ("6", not "6 x 10^0")."""
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(_LogLabels())
    axes.yaxis.set_minor_formatter(_LogLabels(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def _block_axis(axes, num_blocks, prefix=""):
    """An x axis of blocks 1..`num_blocks`: labelled, ticked from block 1 (1, 5, 10, ... or 1, 3, 5, ...)."""
    spaced = MaxNLocator(nbins=8, integer=True, steps=[1, 2, 5, 10]).tick_values(1, max(num_blocks, 2))
    step = max(1, int(round(spaced[1] - spaced[0])))
    ticks = list(range(1, num_blocks + 1, step)) if step <= 2 else [1, *range(step, num_blocks + 1, step)]
    axes.xaxis.set_major_locator(FixedLocator(ticks))
    axes.set_xlim(0.5, num_blocks + 0.5)
    axes.set_xlabel(prefix + BLOCK_AXIS)


def _integer_ticks(axis):
    """Whole-number ticks at 1, 2, 5 or 10 times a power of ten on `axis` (an epoch, a block, a depth)."""
    axis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))


def _heading(banner, title, subtitle, width_inches):
    """The lines above a figure: the banner (a data warning), the title, the subtitle (which run)."""
    parts = [banner, title, subtitle]
    return "\n".join(_wrapped(part, width_inches, characters_per_inch=11) for part in parts if part)


def _figure(title, banner, figsize=(7.0, 4.5), subtitle=None):
    """A one-axes figure: the banner (a data warning, dark red) and title above, then the subtitle."""
    figure = Figure(figsize=figsize, layout="constrained")
    axes = figure.add_subplot()
    heading = _heading(banner, title, None, figsize[0])
    if subtitle:  # the title above the axes, the subtitle (which run it is) just above the plot
        figure.suptitle(heading, color="darkred" if banner else None)
        axes.set_title(_wrapped(subtitle, figsize[0]), fontsize="small", color="dimgray")
    else:
        axes.set_title(heading)
        if banner:
            axes.title.set_color("darkred")
    axes.grid(True, which="major", alpha=0.3)
    return figure, axes


def _panels(title, banner, num_panels, subtitle=None, panel_height=PANEL_HEIGHT, columns=2, projections=None):
    """Panels in a grid of at most `columns` columns under one heading (banner, title, subtitle).

    The grid reflows: `num_panels` panels fill rows of `columns`, and a last
    row with fewer panels is centred; one panel alone is a figure of its own
    width. `projections`: optional list, one matplotlib projection (or None)
    per panel ("3d" for a surface).

    Returns:
        (figure, list of `num_panels` axes, in reading order).
    """
    if num_panels < 1:
        raise ValueError("A figure needs at least one panel with data to draw.")
    columns = max(1, min(columns, num_panels))
    rows = -(-num_panels // columns)
    width = FIGURE_WIDTH if columns > 1 else 7.0
    heading = _heading(banner, title, subtitle, width)
    figure = Figure(figsize=(width, panel_height * rows + 0.3 * (heading.count("\n") + 1)), layout="constrained")
    grid = figure.add_gridspec(rows, 2 * columns)
    projections = list(projections or [None] * num_panels)
    axes = []
    for index in range(num_panels):
        row, column = divmod(index, columns)
        in_row = min(columns, num_panels - row * columns)
        start = (columns - in_row) + 2 * column  # a shorter last row is centred
        axis = figure.add_subplot(grid[row, start:start + 2], projection=projections[index])
        if projections[index] is None:
            axis.grid(True, which="major", alpha=0.3)
        axes.append(axis)
    figure.suptitle(heading, color="darkred" if banner else None)
    return figure, axes


def _finish(figure, path):
    if path is not None:
        directory = os.path.dirname(os.fspath(path))
        if directory:
            os.makedirs(directory, exist_ok=True)
        figure.savefig(path, dpi=120)
    return figure

def _number(value):
    """A legend number: 3 significant digits, or "undefined" for NaN/None."""
    if value is None or not np.isfinite(value):
        return "undefined"
    return f"{value:.3g}"

def _positive(values):
    """Values for a log axis: zeros and negatives become NaN (a gap, not an error)."""
    values = np.asarray(values, dtype="float64")
    return np.where(values > 0, values, np.nan)
