"""The instruments while training (`TrainingDynamics` rows) against the epoch."""

from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from residual_keras._types import Labels, PathLike
from residual_keras.plots._style import (
    _finish,
    _integer_ticks,
    _log_y,
    _panels,
    series_styles,
)

# (row key, short name for the figure's title, panel title, y-axis label, log scale): one panel
# per instrument, drawn when some model has it.
PANELS = (
    ("gradient_gain", "gradient gain", "gradient gain (inference mode)",
     r"$\|\partial L/\partial x_0\| / \|\partial L/\partial x_L\|$", True),
    ("update_ratio", "updates", "how far each block moved in the epoch",
     r"update $\|\Delta W\| / \|W\|$ (mean of blocks)", True),
    ("branch_ratio", "branches", "branch against stream",
     r"$\|f(x)\| / \|x\|$ (mean of blocks)", True),
    ("identity_scalar", "identity scalars", r"identity scalar ($\alpha$, $|\gamma|$, scale)",
     "identity scalar (mean of blocks)", False),
    ("delta_rank", "rank", "what the blocks wrote: rank of $x_L - x_0$\n(where the stream changes shape: its last stage)",
     r"rank of $x_L - x_0$", False),
)


def dynamics(results: Sequence[Sequence[dict[str, Optional[float]]]], labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None, epoch_label: str="epoch") -> Figure:
    """How the instruments change while training: one line per model, against the epoch.

    Args:
        results: one list of `TrainingDynamics.rows` per model (a list of
            such lists), or one list of rows.
        labels: one label per model.
        path, banner, title, subtitle: as in `gradient_flow`.
        epoch_label: the x axis' name (e.g. "evaluation interval").

    Returns:
        matplotlib.figure.Figure with one panel per instrument that some
        model has, in a grid of two columns: the gradient gain, the
        blocks' mean update-to-weight ratio per epoch, the mean
        branch-to-stream ratio, the mean identity scalar (ReZero alpha,
        zero gamma, Fixup scale), and the rank of x_L - x_0 (`delta_rank`;
        0 while every block is the identity; where the stream changes shape,
        over the last span of same-shape blocks, see `stream_delta_rank`).
        An instrument no model has (the identity scalar of networks without
        one) gets no panel.

    Raises:
        ValueError: no model has any of the instruments.
    """
    if results and isinstance(results[0], dict):
        results = [results]
    labels = [f"model {i + 1}" for i in range(len(results))] if labels is None else list(labels)
    # series[key]: (style, label, epochs, values) of every model with some value of `key`.
    series = {panel[0]: [] for panel in PANELS}
    for style, rows, label in zip(series_styles(labels), results, labels):
        epochs = sorted({row["epoch"] for row in rows})
        for key in series:
            values = []
            for epoch in epochs:
                found = [row[key] for row in rows if row["epoch"] == epoch and row.get(key) is not None]
                values.append(np.mean(found) if found else np.nan)
            if not np.all(np.isnan(values)):
                series[key].append((style, label, epochs, values))
    shown = [panel for panel in PANELS if series[panel[0]]]  # a panel without data is left out
    if not shown:
        raise ValueError("No model has any of the training dynamics' instruments: nothing to draw.")
    figure, axes = _panels(title or "While training: " + ", ".join(panel[1] for panel in shown),
                           banner, len(shown), subtitle=subtitle)
    for axis, (key, _, name, ylabel, log) in zip(axes, shown):
        zero = False  # some value exactly 0 (cannot be drawn on a log axis)
        for style, label, epochs, values in series[key]:
            zero = zero or any(value == 0 for value in values)
            axis.plot(epochs, values, markersize=3, **style, label=label)
        if log and any(np.any(np.asarray(line.get_ydata(), dtype=float) > 0) for line in axis.get_lines()):
            _log_y(axis)
        else:
            log = False
        _integer_ticks(axis.xaxis)
        axis.set_xlabel(epoch_label)
        axis.set_ylabel(ylabel)
        axis.set_title(name + ("\n(exactly 0 at some epochs: below the log axis)" if log and zero else ""),
                       fontsize="small")
        if key == "delta_rank":
            _integer_ticks(axis.yaxis)
            axis.set_ylim(bottom=-0.5)
        axis.legend(fontsize="x-small")
    return _finish(figure, path)
