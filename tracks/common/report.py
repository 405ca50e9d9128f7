"""Pieces of a run's report shared by the tracks: numbers, markdown and terminal tables.

The figures themselves are drawn by `residual_keras.plots` (one palette, one
convention, no pyplot state), so reports render on machines without a display.
"""


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


def id_order(model_id):
    """A sort key for model ids: "plain-8" before "plain-32" (numbers as numbers), and any two ids
    comparable ("fixup-56" against "plain-nonorm-56": a number and a word never meet)."""
    parts = str(model_id).replace("-", " - ").split()
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in parts]


def deepest_with(config, results, key):
    """(depth, entries): the deepest grid depth's results entries that carry `key`."""
    depth = max(config.depths)
    return depth, [m for m in results.models if m.depth == depth and getattr(m, key, None)]


def markdown_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(headers, rows):
    """The rows as aligned plain-text columns, for the terminal (numbers right-aligned)."""
    cells = [[str(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]

    def numeric(text):
        return text[:1].isdigit() or text == "—" or (text[:1] == "-" and text[1:2].isdigit())

    def line(row):
        return "  ".join(cell.rjust(width) if numeric(cell) else cell.ljust(width)
                         for cell, width in zip(row, widths)).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * width for width in widths),
                      *(line(row) for row in cells[1:])])


def run_ending(run, headers, rows, extra_lines=()):
    """What the terminal shows when a run ends: the results table, then where everything is."""
    from tracks.common.tensorboard import tensorboard_available

    lines = [f"results ({len(rows)} models, also in {run.path / 'results.json'}):", "",
             text_table(headers, rows), "", *extra_lines]
    tensorboard = run.path / "tensorboard"
    if tensorboard.is_dir():
        lines.append(f"curves in TensorBoard: tensorboard --logdir {tensorboard}")
    elif not tensorboard_available():
        lines.append("no TensorBoard logs: the tensorboard package is not installed "
                     "(pip install tensorboard, or the package's [tensorboard] extra)")
    lines.append(f"report with figures: {run.path / 'summary.md'}")
    return "\n".join(lines)


def banner_markdown(banner):
    """A data-fallback banner as a markdown quote (rules of "!" dropped)."""
    if not banner:
        return ""
    lines = [line.strip("! ").strip() for line in banner.splitlines()]
    lines = [line for line in lines if line]
    return f"> **{lines[0]}**\n" + "".join(f">\n> {line}\n" for line in lines[1:]) + "\n"
