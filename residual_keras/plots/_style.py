"""What every figure shares: one palette, one convention (colour = depth, style = variant), one figure helper."""

import os
import textwrap
from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

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

def _wrapped(text, width_inches, characters_per_inch=13):
    """`text` broken into lines that fit a figure `width_inches` wide (small print)."""
    return textwrap.fill(text, width=max(40, int(width_inches * characters_per_inch)))


def _figure(title, banner, figsize=(7.0, 4.5), subtitle=None):
    """A one-axes figure: the banner (a data warning, dark red) and title above, then the subtitle."""
    figure = Figure(figsize=figsize, layout="constrained")
    axes = figure.add_subplot()
    heading = f"{banner}\n{title}" if banner else title
    if subtitle:  # the title above the axes, the subtitle (which run it is) just above the plot
        figure.suptitle(heading, color="darkred" if banner else None)
        axes.set_title(_wrapped(subtitle, figsize[0]), fontsize="small", color="dimgray")
    else:
        axes.set_title(heading)
        if banner:
            axes.title.set_color("darkred")
    axes.grid(True, which="major", alpha=0.3)
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

def _panels(title, banner, num_panels, panel_width=5.2, height=4.4, subtitle=None):
    """One row of panels under one title (the banner above it, the subtitle below it)."""
    figure = Figure(figsize=(panel_width * num_panels, height), layout="constrained")
    axes = figure.subplots(1, num_panels, squeeze=False)[0]
    width = panel_width * num_panels
    subtitle = None if not subtitle else _wrapped(subtitle, width, characters_per_inch=11)
    heading = "\n".join(part for part in (banner, title, subtitle) if part)
    figure.suptitle(heading, color="darkred" if banner else None)
    for axis in axes:
        axis.grid(True, which="major", alpha=0.3)
    return figure, axes
