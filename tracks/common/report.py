"""Pieces of a run's report shared by the tracks: figures on disk, markdown tables.

Figures are drawn with `matplotlib.figure.Figure` directly (no pyplot state),
so reports render on machines without a display.
"""

import matplotlib

matplotlib.use("Agg")  # reports are files; never open a window

from matplotlib.figure import Figure  # noqa: E402

# Depth -> colour, shallow to deep, readable on white and for colour-blind readers.
DEPTH_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000"]


def depth_colour(index):
    return DEPTH_COLOURS[index % len(DEPTH_COLOURS)]


def new_figure(num_panels, *, panel_width=5.0, height=4.0):
    figure = Figure(figsize=(panel_width * num_panels, height), layout="constrained")
    axes = figure.subplots(1, num_panels, squeeze=False)[0]
    return figure, axes


def title_with_banner(title, banner):
    return f"{banner}\n{title}" if banner else title


def save_figure(figure, path):
    figure.savefig(path, dpi=110)
    return path


def format_value(value, kind="float"):
    if value is None:
        return "—"
    if kind == "percent":
        return f"{100 * value:.1f}%"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "seconds":
        return f"{value:.0f} s"
    return f"{value:.3f}"


def deepest_with(config, results, key):
    """(depth, entries): the deepest grid depth's results entries that carry `key`."""
    depth = max(config.depths)
    return depth, [m for m in results["models"] if m["depth"] == depth and m.get(key)]


def markdown_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def banner_markdown(banner):
    """A data-fallback banner as a markdown quote (rules of "!" dropped)."""
    if not banner:
        return ""
    lines = [line.strip("! ").strip() for line in banner.splitlines()]
    lines = [line for line in lines if line]
    return f"> **{lines[0]}**\n" + "".join(f">\n> {line}\n" for line in lines[1:]) + "\n"
