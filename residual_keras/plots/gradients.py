"""Gradient figures: the gradient along the stream, per block's weights, the scalar chain."""

from typing import Optional

import numpy as np
from matplotlib.figure import Figure

from residual_keras._types import Labels, OneOrMore, PathLike
from residual_keras.plots._style import (
    STREAM_AXIS,
    _as_list,
    _block_axis,
    _color,
    _figure,
    _finish,
    _integer_ticks,
    _labels,
    _log_y,
    _number,
    _positive,
    series_styles,
)


def gradient_flow(
    results: OneOrMore, labels: Labels=None, *, relative: bool=True, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None
) -> Figure:
    """Gradient norm along the residual stream, input to output, for several models.

    Args:
        results: one `diagnostics.gradient_norms` result or a list of them.
        labels: one legend label per result. Default: the model names.
        relative: bool. Divide each curve by its value at the last block's
            output, so all curves end at 1 and show the gain from the output
            back to each block. Default True.
        path: optional file to save the figure to.
        banner: optional line above the title (e.g. "SYNTHETIC DATA").
        subtitle: optional line under the title naming what was measured
            (the run: data set, seed, sizes; the tracks give one).
        title: optional title; a default one describes the plot.

    Returns:
        matplotlib.figure.Figure with one line per result (log y axis).
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    what = r"$\|\partial L/\partial x_\ell\|$"
    if relative:
        what += r" / $\|\partial L/\partial x_L\|$"
    figure, axes = _figure(
        title or f"Gradient flow back through the blocks: {what}", banner, subtitle=subtitle)
    for style, result, label in zip(series_styles(labels), results, labels):
        norms = np.asarray(result["stream_grad_norms"], dtype="float64")
        if relative:
            with np.errstate(divide="ignore", invalid="ignore"):
                norms = norms / norms[-1]
        mode = "train" if result.get("training", True) else "inference"
        axes.plot(
            np.arange(len(norms)),
            _positive(norms),
            markersize=3,
            **style,
            label=f"{label} (gain {_number(result['gain'])}, {mode} mode)",
        )
    _log_y(axes)
    axes.axhline(1.0, color="gray", linewidth=1, linestyle=":")
    _integer_ticks(axes.xaxis)
    axes.set_xlabel(STREAM_AXIS)
    axes.set_ylabel(what)
    axes.legend(fontsize="small")
    return _finish(figure, path)

def layer_gradients(results: OneOrMore, labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """The norm of each block's weight gradient against the block's index (Xiong et al. 2020, figure 3).

    Args:
        results: one `diagnostics.gradient_norms` result or a list of them
            (uses `block_weight_grad_norms`).
        labels: one legend label per result. Default: the model names.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one line per result (log y axis).
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title or r"Weight gradients per block: $\|\partial L / \partial W_\ell\|$ (input left, output right)",
        banner, subtitle=subtitle)
    for style, result, label in zip(series_styles(labels), results, labels):
        norms = np.asarray(result["block_weight_grad_norms"], dtype="float64")
        if not norms.size or not np.any(norms > 0):
            label += " (no gradient reaches the blocks)"
        axes.plot(np.arange(1, len(norms) + 1), _positive(norms), markersize=3, **style, label=label)
    _log_y(axes)
    _block_axis(axes, max(len(result["block_weight_grad_norms"]) for result in results))
    axes.set_ylabel(r"$\|\partial L / \partial W_\ell\|$ (all of the block's weights)")
    axes.legend(fontsize="small")
    return _finish(figure, path)

def scalar_chain(results: OneOrMore, labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """|gain| of L scalar blocks `f(x) = alpha x`: plain vs residual, log scale.

    Plain `|alpha|^L` is dashed, residual `|1 + alpha|^L` solid, one color
    per alpha.

    Args:
        results: one `diagnostics.scalar_chain` result or a list of them
            (several alphas).
        labels: one label per result. Default: "alpha = ...".
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with two lines per result (log y axis).
    """
    results = _as_list(results)
    if labels is None:
        labels = [rf"$\alpha$ = {result['alpha']:g}" for result in results]
    labels = _labels(results, labels)
    if title is None and len(results) == 1:
        result = results[0]
        title = (
            rf"Scalar chain, $\alpha$ = {result['alpha']:g}, L = {result['depth']}: "
            f"plain {result['plain_gain']:.3g}, residual {result['residual_gain']:.3g}"
        )
    figure, axes = _figure(
        title or r"Scalar chain: gain of L blocks $f(x) = \alpha x$", banner, subtitle=subtitle)
    for index, (result, label) in enumerate(zip(results, labels)):
        color = _color(index)
        axes.plot(
            result["depths"],
            _positive(np.abs(result["plain"])),
            color=color,
            linestyle="--",
            label=rf"{label}: plain $|\alpha|^L$",
        )
        axes.plot(
            result["depths"],
            _positive(np.abs(result["residual"])),
            color=color,
            label=rf"{label}: residual $|1 + \alpha|^L$",
        )
    axes.axhline(1.0, color="gray", linewidth=1, linestyle=":")
    _log_y(axes)
    axes.set_xlabel("depth L (number of blocks)")
    axes.set_ylabel(r"$|\partial x_L / \partial x_0|$")
    axes.legend(fontsize="small")
    return _finish(figure, path)
