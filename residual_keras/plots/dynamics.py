"""The instruments while training (`TrainingDynamics` rows) against the epoch."""

from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from residual_keras._types import Labels, PathLike
from residual_keras.plots._style import (
    _finish,
    _panels,
    series_styles,
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
        matplotlib.figure.Figure with five panels: the gradient gain, the
        blocks' mean update-to-weight ratio per epoch, the mean
        branch-to-stream ratio, the mean identity scalar (ReZero alpha,
        zero gamma, Fixup scale) of the models that have one, and the rank
        of x_L - x_0 (`delta_rank`; 0 while every block is the identity;
        x_e - x_s over the last span of same-shape blocks where the stream
        changes shape, see `stream_delta_rank`).
    """
    if results and isinstance(results[0], dict):
        results = [results]
    labels = [f"model {i + 1}" for i in range(len(results))] if labels is None else list(labels)
    panels = (
        ("gradient_gain", "gradient gain (input / output, inference mode)", True),
        ("update_ratio", r"update $\|\Delta W\| / \|W\|$ per epoch (mean of blocks)", True),
        ("branch_ratio", r"branch / stream $\|f(x)\| / \|x\|$ (mean of blocks)", True),
        ("identity_scalar", "identity scalar (alpha, |gamma|, scale; mean)", False),
        ("delta_rank", r"rank of $x_e - x_s$, the last same-shape span", False),
    )
    figure, axes = _panels(title or "While training: gradient, updates, branches, identity scalars, rank",
                           banner, len(panels), panel_width=4.0, subtitle=subtitle)
    zeros = set()  # log panels where some value is exactly 0 (cannot be drawn there)
    for style, rows, label in zip(series_styles(labels), results, labels):
        epochs = sorted({row["epoch"] for row in rows})
        for axis, (key, _, _) in zip(axes, panels):
            values = []
            for epoch in epochs:
                found = [row[key] for row in rows if row["epoch"] == epoch and row.get(key) is not None]
                values.append(np.mean(found) if found else np.nan)
            if np.all(np.isnan(values)):
                continue
            if any(value == 0 for value in values):
                zeros.add(key)
            axis.plot(epochs, values, markersize=3, **style, label=label)
    for axis, (key, name, log) in zip(axes, panels):
        if log and any(np.any(np.asarray(line.get_ydata(), dtype=float) > 0) for line in axis.get_lines()):
            axis.set_yscale("log")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel(epoch_label)
        axis.set_title(name + ("\n(exactly 0 at some epochs: below the log axis)" if log and key in zeros else ""),
                       fontsize="small")
        if key == "delta_rank":
            axis.yaxis.set_major_locator(MaxNLocator(integer=True))
            axis.set_ylim(bottom=-0.5)
        if axis.get_lines():
            axis.legend(fontsize="x-small")
        else:
            axis.text(0.5, 0.5, "no model has one", ha="center", va="center", transform=axis.transAxes)
    return _finish(figure, path)
