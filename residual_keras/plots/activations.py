"""The size of the residual stream along the network."""

from typing import Optional

import numpy as np
from matplotlib.figure import Figure

from residual_keras._types import Labels, OneOrMore, PathLike
from residual_keras.plots._style import (
    STREAM_AXIS,
    _as_list,
    _figure,
    _finish,
    _integer_ticks,
    _labels,
    _log_y,
    series_styles,
)


def activation_growth(
    results: OneOrMore, labels: Labels=None, *, log_y: Optional[bool]=None, sqrt_reference: Optional[int]=None, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None
) -> Figure:
    """RMS of the residual stream against depth.

    Args:
        results: one `diagnostics.activation_norms` result or a list of them.
        labels: one legend label per result. Default: the model names.
        log_y: bool or None. Logarithmic y axis; None (the default) chooses
            one when the values span more than a factor 100.
        sqrt_reference: optional index of the result to draw the reference
            `sqrt(r_0^2 + k l)` for, fitted to its first and last points: the
            growth of a stream that adds l independent branches of equal
            size (the picture for residual BatchNorm branches within a
            stage). Default None: no reference, since how a stream grows
            depends on its blocks (exponentially for unnormalised He-init
            residual branches).
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one line per result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title or r"Growth of the residual stream: RMS of $x_\ell$", banner, subtitle=subtitle)
    everything = []
    for style, result, label in zip(series_styles(labels), results, labels):
        rms = np.asarray(result["rms"], dtype="float64").mean(axis=1)
        everything.extend(rms[rms > 0])
        axes.plot(np.arange(len(rms)), rms, markersize=3, **style, label=label)
    if sqrt_reference is not None:
        first = np.asarray(results[sqrt_reference]["rms"], dtype="float64").mean(axis=1)
        depth = len(first) - 1
        slope = max((first[-1] ** 2 - first[0] ** 2) / max(depth, 1), 0.0)
        depths = np.linspace(0, depth, 200)
        axes.plot(depths, np.sqrt(first[0] ** 2 + slope * depths), color="gray", linestyle="--", linewidth=1,
                  label=rf"$\sqrt{{{first[0] ** 2:.3g} + {slope:.3g}\,\ell}}$ (fitted to {labels[sqrt_reference]})")
    if log_y is None:
        log_y = bool(everything) and max(everything) > 100 * min(everything)
    if log_y:
        _log_y(axes)
    _integer_ticks(axes.xaxis)
    axes.set_xlabel(STREAM_AXIS)
    axes.set_ylabel("RMS of the stream (mean over examples)")
    axes.legend(fontsize="small")
    return _finish(figure, path)
