"""Transformer figures: what sublayers write, the logit lens, sublayer lesions."""

from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from residual_keras._types import Labels, OneOrMore, PathLike, Results
from residual_keras.plots._style import (
    _as_list,
    _block_axis,
    _figure,
    _finish,
    _integer_ticks,
    _labels,
    _panels,
    series_styles,
)


def stream(results: OneOrMore, labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """What attention and feed-forward add to the stream, per block, relative to it.

    Args:
        results: one `diagnostics.stream_contributions` result or a list of
            them. Attention is drawn solid with circles, feed-forward dashed
            with squares, one color per result (mean over examples).
        labels: one legend label per result. Default: the model names.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with two lines per result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title or r"Update sizes: $\|$sublayer output$\|$ / $\|$stream$\|$ per block",
        banner, subtitle=subtitle)
    for style, result, label in zip(series_styles(labels), results, labels):
        blocks = np.arange(1, len(result["names"]) + 1)
        color = style["color"]
        axes.plot(
            blocks,
            np.asarray(result["attention"]).mean(axis=1),
            color=color,
            marker="o",
            label=f"{label}: attention",
        )
        axes.plot(
            blocks,
            np.asarray(result["feedforward"]).mean(axis=1),
            color=color,
            marker="s",
            linestyle="--",
            label=f"{label}: feed-forward",
        )
    _block_axis(axes, max(len(result["names"]) for result in results))
    axes.set_ylabel("relative update size (mean over examples)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    return _finish(figure, path)

def logit_lens(results: OneOrMore, labels: Labels=None, *, reference: Optional[tuple[float, str]]=None, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """The loss of the stream read out through the model's head at every depth.

    Args:
        results: one `diagnostics.logit_lens` result or a list of them.
        labels: one legend label per result. Default: the model names.
        reference: optional (value, text) drawn as a dotted line, e.g. the
            loss of predicting character frequencies.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one line per result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(title or "Logit lens: the stream at each depth, read out by the head", banner, subtitle=subtitle)
    for style, result, label in zip(series_styles(labels), results, labels):
        axes.plot(result["depths"], result["loss"], markersize=3, **style, label=label)
    if reference is not None:
        axes.axhline(reference[0], color="gray", linestyle=":", linewidth=1.2, label=reference[1])
    _integer_ticks(axes.xaxis)
    axes.set_xlabel(r"stream point $\ell$ read by the head ($x_0$: the embeddings, $x_\ell$ leaves block $\ell$)")
    axes.set_ylabel("loss (nats per character)")
    axes.legend(fontsize="small")
    return _finish(figure, path)

def sublayer_lesions(lesions: Sequence[Results], sublayers: Sequence[Results], labels: Labels=None, *, path: PathLike=None, banner: Optional[str]=None, subtitle: Optional[str]=None, title: Optional[str]=None) -> Figure:
    """The loss with one block, or one of its two sublayers, removed, per block.

    Args:
        lesions: `diagnostics.lesion` results (one per model).
        sublayers: `diagnostics.lesion_sublayers` results (same models).
        labels: one label per model. Default: the model names.
        path, banner, title, subtitle: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one panel per model (a grid of two
        columns, one y scale for all): bars for the block, its attention and
        its feed-forward sublayer removed, and the intact loss as a dashed
        line.
    """
    lesions, sublayers = _as_list(lesions), _as_list(sublayers)
    labels = _labels(lesions, labels)
    metric = sublayers[0].get("metric", "metric")
    figure, axes = _panels(title or f"Removing a block or one sublayer of a trained model: {metric}",
                           banner, len(lesions), subtitle=subtitle)
    top = max(max(v for v in (*l["lesioned"], *s["attention"], *s["feedforward"]) if v is not None)
              for l, s in zip(lesions, sublayers))
    for axis, lesion_result, sublayer_result, label in zip(axes, lesions, sublayers, labels):
        blocks = np.arange(1, len(sublayer_result["names"]) + 1)
        width = 0.27
        for offset, values, name, color in (
            (-width, lesion_result["lesioned"], "whole block", "tab:gray"),
            (0.0, sublayer_result["attention"], "attention", "tab:blue"),
            (width, sublayer_result["feedforward"], "feed-forward", "tab:orange"),
        ):
            axis.bar(blocks + offset, [np.nan if v is None else v for v in values], width=width,
                     color=color, label=f"{name} removed")
        axis.axhline(sublayer_result["intact"], color="black", linestyle="--", linewidth=1.2,
                     label=f"intact ({sublayer_result['intact']:.3g})")
        axis.set_ylim(0, 1.05 * top)
        _block_axis(axis, len(sublayer_result["names"]))
        axis.set_ylabel(metric)
        axis.set_title(label, fontsize="medium")
        axis.legend(fontsize="x-small")
    return _finish(figure, path)
