"""Figures of the diagnostics: one function per instrument of `diagnostics`.

Each function takes the plain data an instrument returns (one result or a
list of them, e.g. a plain and a residual network), draws it on a
`matplotlib.figure.Figure` and returns the figure; with `path=` it also
saves it (PNG, SVG or PDF by the file's extension). Figures are made
without `pyplot`, so nothing opens a window, no global state is touched, and
everything works headless (on a server, in CI, in a thread).

Every function accepts `banner`, a line put above the title (for example
"SYNTHETIC DATA" when the numbers do not come from the real data set), and
`labels`, one legend label per result (by default each result's `model`
name).

The reference curves are the course's equations: `c^L` for products of L
Jacobians of norm c (`jacobian`), `prod (1 +- eps_l)` for blocks x + f(x)
(`jacobian_blocks`), `sqrt(L)` for a stream that adds L branches of fixed
size (`activation_growth`, on request), `alpha^L` and `(1 + alpha)^L` for
the scalar chain (`scalar_chain`).

Every figure follows one convention (`series_styles`): colour = depth,
line style and marker = variant, one palette (`PALETTE`).
"""

import os

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

# One palette for every figure: colour-blind safe (Okabe and Ito), shallow to deep.
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


def _split_label(label):
    """("plain", 44) for "plain-44" or "plain-44-warmup100" (the tracks' model ids), else None."""
    parts = str(label).split("-")
    if len(parts) >= 3 and parts[-1].startswith("warmup"):
        parts = parts[:-1]
    if len(parts) >= 2 and parts[-1].isdigit():
        return "-".join(parts[:-1]), int(parts[-1])
    return None


def series_styles(labels):
    """The figures' one convention: colour = depth, line style and marker = variant.

    Labels of the form "<variant>-<depth>" (optionally "-warmup<N>", which
    then also sets a hollow marker for a warm-up) get the colour of their
    depth (shallow to deep along `PALETTE`) and the line style and marker of
    their variant; when all share one depth, the colour follows the variant
    too. Other labels get one colour each, solid lines.

    Returns:
        a list of dicts with `color`, `linestyle`, `marker` (and
        `markerfacecolor` for warm-up runs), one per label, for `axes.plot`.
    """
    parsed = [_split_label(label) for label in labels]
    if not labels or any(item is None for item in parsed):
        return [{"color": _color(i), "linestyle": "-", "marker": "o"} for i in range(len(labels))]
    depths = sorted({depth for _, depth in parsed})
    variants = list(dict.fromkeys(variant for variant, _ in parsed))
    styles = []
    for label, (variant, depth) in zip(labels, parsed):
        linestyle, marker = VARIANT_STYLES[variants.index(variant) % len(VARIANT_STYLES)]
        # One depth only (e.g. the deepest model of each variant): colour by variant too.
        colour = PALETTE[(depths.index(depth) if len(depths) > 1 else variants.index(variant)) % len(PALETTE)]
        style = {"color": colour, "linestyle": linestyle, "marker": marker}
        if str(label).split("-")[-1].startswith("warmup") and not str(label).endswith("warmup0"):
            style["markerfacecolor"] = "white"
        styles.append(style)
    return styles


def _figure(title, banner, figsize=(7.0, 4.5)):
    figure = Figure(figsize=figsize, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(f"{banner}\n{title}" if banner else title)
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


def gradient_flow(
    results, labels=None, *, relative=True, path=None, banner=None, title=None
):
    """Gradient norm along the residual stream, input to output, for several models.

    Args:
        results: one `diagnostics.gradient_norms` result or a list of them.
        labels: one legend label per result. Default: the model names.
        relative: bool. Divide each curve by its value at the last block's
            output, so all curves end at 1 and show the gain from the output
            back to each block. Default True.
        path: optional file to save the figure to.
        banner: optional line above the title (e.g. "SYNTHETIC DATA").
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
        title or f"Gradient flow back through the blocks: {what}", banner
    )
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
    axes.set_yscale("log")
    axes.axhline(1.0, color="gray", linewidth=1, linestyle=":")
    axes.set_xlabel(
        r"stream point $\ell$ (0 = first block's input, L = last block's output)"
    )
    axes.set_ylabel(what)
    axes.legend(fontsize="small")
    return _finish(figure, path)


def jacobian(
    results, labels=None, *, references=(), path=None, banner=None, title=None
):
    """Spectral norm of d x_l / d x_0 against depth l, with `c^l` reference lines.

    A result with `cumulative` norms (`jacobian_norm(..., cumulative=True)`)
    is drawn as a line over l = 1..L (the mean over examples, with the
    min-max range shaded); one without is a single marker at depth L, so a
    list of models of different depths also draws a curve.

    Args:
        results: one `diagnostics.jacobian_norm` result or a list of them.
        labels: one legend label per result. Default: the model names.
        references: numbers c; each draws the dashed line `c^l`
            (e.g. (0.2, 0.8, 1.2) for branches with ||J_f|| <= 0.2).
            The line at 1 (the identity) is always drawn.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure (log y axis).
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title
        or r"Jacobian of the stream: $\|\partial x_\ell / \partial x_0\|_2$ vs depth",
        banner,
    )
    max_depth = 1
    for style, result, label in zip(series_styles(labels), results, labels):
        color = style["color"]
        if result.get("cumulative") is not None:
            norms = np.asarray(result["cumulative"], dtype="float64")
            depths = np.asarray(result.get("cumulative_depths") or np.arange(1, len(norms) + 1))
            axes.plot(depths, _positive(norms.mean(axis=1)), markersize=2, **style, label=label)
            if norms.shape[1] > 1:
                axes.fill_between(
                    depths,
                    _positive(norms.min(axis=1)),
                    _positive(norms.max(axis=1)),
                    color=color,
                    alpha=0.2,
                    linewidth=0,
                )
            max_depth = max(max_depth, int(depths[-1]))
        else:
            total = np.asarray(result["total"], dtype="float64")
            depth = len(result["names"])
            axes.errorbar(
                [depth],
                [total.mean()],
                yerr=[[total.mean() - total.min()], [total.max() - total.mean()]],
                marker="o",
                color=color,
                label=label,
                capsize=3,
            )
            max_depth = max(max_depth, depth)
    depths = np.linspace(0, max_depth, 200)
    for c in references:
        axes.plot(
            depths,
            _positive(float(c) ** depths),
            color="gray",
            linestyle="--",
            linewidth=1,
        )
        axes.annotate(
            f"${c:g}^\\ell$",
            (depths[-1], float(c) ** depths[-1]),
            xytext=(3, 0),
            textcoords="offset points",
            color="gray",
            fontsize="small",
            va="center",
            annotation_clip=False,
        )
    axes.axhline(1.0, color="black", linewidth=1, linestyle=":", label="1 (identity)")
    axes.set_yscale("log")
    axes.set_xlim(0, max_depth * 1.08)
    axes.set_xlabel(r"depth $\ell$ (number of blocks)")
    axes.set_ylabel(r"spectral norm $\|\partial x_\ell / \partial x_0\|_2$")
    axes.legend(fontsize="small")
    return _finish(figure, path)


def activation_growth(
    results, labels=None, *, log_y=None, sqrt_reference=None, path=None, banner=None, title=None
):
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
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one line per result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title or r"Growth of the residual stream: RMS of $x_\ell$", banner
    )
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
        axes.set_yscale("log")
    axes.set_xlabel(
        r"stream point $\ell$ (0 = first block's input, else output of block $\ell$)"
    )
    axes.set_ylabel("RMS of the stream (mean over examples)")
    axes.legend(fontsize="small")
    return _finish(figure, path)


def lesion(results, labels=None, *, path=None, banner=None, title=None):
    """Bar chart of the metric with each single block removed, and the intact metric.

    Several results (e.g. residual and plain) are drawn as grouped bars with
    one dashed "intact" line each. Blocks that cannot be removed (a plain
    block that changes shape) get an "n/a" mark instead of a bar.

    Args:
        results: one `diagnostics.lesion` result or a list of them (same
            number of blocks for grouped bars; the first one's block names
            label the x axis).
        labels: one legend label per result. Default: the model names.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one bar per removable block and result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    metric = results[0].get("metric", "metric")
    num_blocks = max(len(result["names"]) for result in results)
    width = 0.8 / len(results)
    figure, axes = _figure(
        title or f"Lesion study: {metric} with one block removed",
        banner,
        figsize=(max(8.0, 0.35 * num_blocks * len(results) + 2), 5.5),
    )
    for index, (style, result, label) in enumerate(zip(series_styles(labels), results, labels)):
        color = style["color"]
        offset = (index - (len(results) - 1) / 2) * width
        positions = np.arange(len(result["names"])) + offset
        values = result["lesioned"]
        removable = [i for i, value in enumerate(values) if value is not None]
        axes.bar(
            positions[removable],
            [values[i] for i in removable],
            width=width,
            color=color,
            alpha=0.8,
            label=f"{label}, one block removed",
        )
        for i, value in enumerate(values):
            if value is None:
                axes.annotate(
                    "n/a",
                    (positions[i], 0),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    fontsize="x-small",
                    rotation=90,
                    color=color,
                )
        axes.axhline(
            result["intact"],
            color=color,
            linestyle="--",
            linewidth=1.2,
            label=f"{label}, intact ({result['intact']:.3g})",
        )
    values = [v for result in results for v in (result["intact"], *result["lesioned"])]
    if all(value is None or value >= 0 for value in values):
        axes.set_ylim(bottom=0)
    names = results[0]["names"]
    axes.set_xticks(np.arange(len(names)))
    axes.set_xticklabels(names, rotation=90, fontsize="x-small")
    axes.set_xlabel("removed block")
    axes.set_ylabel(metric)
    figure.legend(loc="outside lower center", ncols=2, fontsize="small")
    return _finish(figure, path)


def stream(results, labels=None, *, path=None, banner=None, title=None):
    """What attention and feed-forward add to the stream, per block, relative to it.

    Args:
        results: one `diagnostics.stream_contributions` result or a list of
            them. Attention is drawn solid with circles, feed-forward dashed
            with squares, one color per result (mean over examples).
        labels: one legend label per result. Default: the model names.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with two lines per result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title or r"Update sizes: $\|$sublayer output$\|$ / $\|$stream$\|$ per block",
        banner,
    )
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
    axes.set_xlabel(r"block $\ell$")
    axes.set_ylabel("relative update size (mean over examples)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    return _finish(figure, path)


def scalar_chain(results, labels=None, *, path=None, banner=None, title=None):
    """|gain| of L scalar blocks `f(x) = alpha x`: plain vs residual, log scale.

    Plain `|alpha|^L` is dashed, residual `|1 + alpha|^L` solid, one color
    per alpha.

    Args:
        results: one `diagnostics.scalar_chain` result or a list of them
            (several alphas).
        labels: one label per result. Default: "alpha = ...".
        path, banner, title: as in `gradient_flow`.

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
        title or r"Scalar chain: gain of L blocks $f(x) = \alpha x$", banner
    )
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
    axes.set_yscale("log")
    axes.set_xlabel("depth L (number of blocks)")
    axes.set_ylabel(r"$|\partial x_L / \partial x_0|$")
    axes.legend(fontsize="small")
    return _finish(figure, path)


def _panels(title, banner, num_panels, panel_width=5.2, height=4.4):
    figure = Figure(figsize=(panel_width * num_panels, height), layout="constrained")
    axes = figure.subplots(1, num_panels, squeeze=False)[0]
    figure.suptitle(f"{banner}\n{title}" if banner else title, color="darkred" if banner else None)
    for axis in axes:
        axis.grid(True, which="major", alpha=0.3)
    return figure, axes


def block_deletion(deletions, swaps=None, labels=None, *, path=None, banner=None, title=None):
    """Veit et al.'s lesions: the metric with k blocks removed at once, and with adjacent blocks swapped.

    Args:
        deletions: one `diagnostics.delete_blocks` result or a list of them
            (e.g. residual and plain). Each draw is a dot, the mean over
            draws a line; k = 0 is the intact model.
        swaps: optional `diagnostics.swap_blocks` results, one per deletion
            result (None entries allowed), drawn in a second panel: the
            metric with each adjacent pair exchanged.
        labels: one legend label per result. Default: the model names.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure.
    """
    deletions = _as_list(deletions)
    labels = _labels(deletions, labels)
    metric = deletions[0].get("metric", "metric")
    show_swaps = swaps is not None and any(swap and swap["pairs"] for swap in swaps)
    figure, axes = _panels(
        title or f"Removing and reordering blocks of trained networks (Veit et al. 2016): {metric}",
        banner, 2 if show_swaps else 1,
    )
    axis = axes[0]
    styles = series_styles(labels)
    for style, result, label in zip(styles, deletions, labels):
        color = style["color"]
        ks = [0] + list(result["num_removed"])
        axis.plot(ks, [result["intact"]] + list(result["mean"]), **style,
                  label=f"{label} (of {len(result['candidates'])} blocks)")
        for k, values in zip(result["num_removed"], result["values"]):
            axis.scatter([k] * len(values), values, color=color, s=10, alpha=0.4)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_xlabel("blocks removed at random (k)")
    axis.set_ylabel(f"{metric} (dots: single draws; line: mean)")
    axis.set_ylim(bottom=0)
    axis.legend(fontsize="small")
    axis.set_title("delete k blocks", fontsize="medium")
    if show_swaps:
        axis = axes[1]
        for style, swap, label in zip(styles, swaps, labels):
            if not swap or not swap["pairs"]:
                continue
            color = style["color"]
            positions = np.arange(1, len(swap["swapped"]) + 1)
            axis.plot(positions, swap["swapped"], color=color, marker="s", linestyle="none",
                      label=f"{label}: one adjacent pair swapped")
            axis.axhline(swap["intact"], color=color, linestyle="--", linewidth=1.2,
                         label=f"{label}: intact ({swap['intact']:.3g})")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel("swapped pair (1 = first two same-shape blocks)")
        axis.set_ylabel(metric)
        axis.set_ylim(bottom=0)
        axis.legend(fontsize="small")
        axis.set_title("swap two adjacent blocks", fontsize="medium")
    return _finish(figure, path)


def path_gradients(results, labels=None, *, path=None, banner=None, title=None):
    """Veit et al.'s figure 6: how long the paths are, and which lengths carry the gradient.

    Left: the share of paths of each length (Binomial(n, 1/2), bars) and the
    share of the gradient they carry (lines). Right: the gradient norm of one
    path of each length (log scale): it falls with every branch it passes.

    Args:
        results: one `diagnostics.path_gradients` result or a list of them.
        labels: one legend label per result. Default: the model names.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with two panels.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, (left, right) = _panels(
        title or "Residual networks as ensembles of paths (Veit et al. 2016, figure 6)", banner, 2
    )
    width = 0.8 / len(results)
    for index, (style, result, label) in enumerate(zip(series_styles(labels), results, labels)):
        color = style["color"]
        lengths = np.asarray(result["lengths"])
        left.bar(lengths + (index - (len(results) - 1) / 2) * width, result["path_fraction"],
                 width=width, color=color, alpha=0.3, label=f"{label}: share of paths")
        left.plot(lengths, result["gradient_share"], markersize=3, **style,
                  label=f"{label}: share of the gradient")
        right.plot(lengths, _positive(result["gradient_per_path"]), markersize=3, **style, label=label)
    for axis in (left, right):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel("path length k (branches passed)")
    left.set_ylabel("fraction")
    left.legend(fontsize="small")
    left.set_title("paths vs the gradient they carry", fontsize="medium")
    right.set_yscale("log")
    right.set_xlabel("path length k (branches passed)")
    right.set_ylabel(r"$\|\partial L / \partial x_0\|$ through one path")
    right.legend(fontsize="small")
    right.set_title("gradient of a single path", fontsize="medium")
    return _finish(figure, path)


def depth_scaling(summary, *, path=None, banner=None, title=None):
    """At initialisation, how the gradient gain, the Jacobian and the stream scale with depth.

    Args:
        summary: {variant: {depth: {"gradient_gain": float,
            "jacobian_norm": float or None, "stream_growth": float}}}, where
            `stream_growth` is the RMS of the last block's output over the
            first block's input. One line per variant, log scales.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with three panels.
    """
    keys = (
        ("gradient_gain", r"gradient gain $\|\partial L/\partial x_0\| / \|\partial L/\partial x_L\|$"),
        ("jacobian_norm", r"$\|\partial x_L / \partial x_0\|_2$"),
        ("stream_growth", r"stream growth RMS($x_L$) / RMS($x_0$)"),
    )
    figure, axes = _panels(title or "At initialisation, against depth", banner, 3, panel_width=4.6)
    for index, (variant, by_depth) in enumerate(summary.items()):
        linestyle, marker = VARIANT_STYLES[index % len(VARIANT_STYLES)]
        depths = sorted(by_depth, key=int)
        for axis, (key, _) in zip(axes, keys):
            values = [by_depth[depth].get(key) for depth in depths]
            values = [np.nan if value is None else value for value in values]
            label = variant
            if np.all(np.isnan(values)):
                label += " (undefined: no gradient reaches the last block)" if key == "gradient_gain" else " (n/a)"
            axis.plot([int(d) for d in depths], _positive(values), color=_color(index),
                      linestyle=linestyle, marker=marker, label=label)
    for axis, (_, label) in zip(axes, keys):
        axis.set_yscale("log")
        axis.axhline(1.0, color="gray", linewidth=1, linestyle=":")
        axis.set_xlabel("depth (layers)")
        axis.set_title(label, fontsize="medium")
    for axis in axes:
        axis.legend(fontsize="x-small")
    return _finish(figure, path)


def layer_gradients(results, labels=None, *, path=None, banner=None, title=None):
    """The norm of each block's weight gradient against the block's index (Xiong et al. 2020, figure 3).

    Args:
        results: one `diagnostics.gradient_norms` result or a list of them
            (uses `block_weight_grad_norms`).
        labels: one legend label per result. Default: the model names.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one line per result (log y axis).
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(
        title or r"Weight gradients per block: $\|\partial L / \partial W_\ell\|$ (input left, output right)",
        banner,
    )
    for style, result, label in zip(series_styles(labels), results, labels):
        norms = np.asarray(result["block_weight_grad_norms"], dtype="float64")
        if not norms.size or not np.any(norms > 0):
            label += " (no gradient reaches the blocks)"
        axes.plot(np.arange(1, len(norms) + 1), _positive(norms), markersize=3, **style, label=label)
    axes.set_yscale("log")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(r"block $\ell$")
    axes.set_ylabel(r"$\|\partial L / \partial W_\ell\|$ (all of the block's weights)")
    axes.legend(fontsize="small")
    return _finish(figure, path)


def logit_lens(results, labels=None, *, reference=None, path=None, banner=None, title=None):
    """The loss of the stream read out through the model's head at every depth.

    Args:
        results: one `diagnostics.logit_lens` result or a list of them.
        labels: one legend label per result. Default: the model names.
        reference: optional (value, text) drawn as a dotted line, e.g. the
            loss of predicting character frequencies.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one line per result.
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _figure(title or "Logit lens: the stream at each depth, read out by the head", banner)
    for style, result, label in zip(series_styles(labels), results, labels):
        axes.plot(result["depths"], result["loss"], markersize=3, **style, label=label)
    if reference is not None:
        axes.axhline(reference[0], color="gray", linestyle=":", linewidth=1.2, label=reference[1])
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("depth (0 = embeddings, L = the model's own output)")
    axes.set_ylabel("loss (nats per character)")
    axes.legend(fontsize="small")
    return _finish(figure, path)


def sublayer_lesions(lesions, sublayers, labels=None, *, path=None, banner=None, title=None):
    """The loss with one block, or one of its two sublayers, removed, per block.

    Args:
        lesions: `diagnostics.lesion` results (one per model).
        sublayers: `diagnostics.lesion_sublayers` results (same models).
        labels: one label per model. Default: the model names.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one panel per model: bars for the
        block, its attention and its feed-forward sublayer removed, and the
        intact loss as a dashed line.
    """
    lesions, sublayers = _as_list(lesions), _as_list(sublayers)
    labels = _labels(lesions, labels)
    metric = sublayers[0].get("metric", "metric")
    figure, axes = _panels(title or f"Removing a block or one sublayer of a trained model: {metric}",
                           banner, len(lesions), panel_width=4.4)
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
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel(r"block $\ell$")
        axis.set_ylabel(metric)
        low, high = axis.get_ylim()
        axis.set_ylim(min(low, 0.1), max(high, 10.0))  # at least a decade either side of 1
        axis.set_title(label, fontsize="medium")
        axis.legend(fontsize="x-small")
    return _finish(figure, path)


def jacobian_blocks(results, labels=None, *, path=None, banner=None, title=None):
    """Each block's Jacobian, their product, and the Jacobian of the whole stack, block by block.

    For block l: the block's own spectral norm `||J_l||` (dots), the product
    of those norms up to l (dashed: the bound a product of matrices obeys),
    and the norm of the product `||d x_l / d x_0||` (solid), per model in its
    own panel. For residual blocks with measured branch norms eps_l
    (`jacobian_norm(..., per_branch=True)`) the bound `prod (1 + eps_i)` is
    dotted (a ReLU after the addition only lowers it), and `prod (1 - eps_i)`
    too when every eps_i < 1 (the lower bound needs eps < 1 and blocks
    `x + f(x)`).

    Args:
        results: `diagnostics.jacobian_norm` results computed with
            `per_block=True` and `cumulative=True`.
        labels: one label per result. Default: the model names.
        path, banner, title: as in `gradient_flow`.

    Returns:
        matplotlib.figure.Figure with one panel per result (log y axes).
    """
    results = _as_list(results)
    labels = _labels(results, labels)
    figure, axes = _panels(title or "Block by block: each Jacobian, their product, and the product's norm",
                           banner, len(results), panel_width=4.8)
    for axis, result, label in zip(axes, results, labels):
        per_block = np.asarray(result["per_block"], dtype="float64").mean(axis=1)
        cumulative = np.asarray(result["cumulative"], dtype="float64").mean(axis=1)
        depths = np.arange(1, len(per_block) + 1)
        cumulative_depths = result.get("cumulative_depths") or depths
        axis.plot(depths, _positive(per_block), linestyle="none", marker="o", markersize=4,
                  color="tab:gray", label=r"$\|J_\ell\|$ (one block)")
        axis.plot(depths, _positive(np.cumprod(per_block)), linestyle="--", color="tab:red",
                  label=r"$\prod_{i \leq \ell} \|J_i\|$")
        axis.plot(cumulative_depths, _positive(cumulative), color="tab:blue", linewidth=2,
                  label=r"$\|\partial x_\ell / \partial x_0\|$")
        branches = result.get("per_branch")
        if branches and all(branch is not None for branch in branches):
            eps = np.array([np.mean(branch) for branch in branches])
            axis.plot(depths, np.cumprod(1 + eps), color="tab:green", linestyle=":", linewidth=2,
                      label=r"bound $\prod (1 + \varepsilon_i)$, $\varepsilon_i = \|J_{f_i}\|$")
            if np.all(eps < 1):
                axis.plot(depths, np.cumprod(1 - eps), color="tab:green", linestyle=":", linewidth=2,
                          label=r"bound $\prod (1 - \varepsilon_i)$")
        axis.axhline(1.0, color="black", linestyle=":", linewidth=1)
        axis.set_yscale("log")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel(r"block $\ell$")
        low, high = axis.get_ylim()
        axis.set_ylim(min(low, 0.1), max(high, 10.0))  # at least a decade either side of 1
        axis.set_title(label, fontsize="medium")
        axis.legend(fontsize="x-small")
    return _finish(figure, path)


def dynamics(results, labels=None, *, path=None, banner=None, title=None, epoch_label="epoch"):
    """How the instruments change while training: one line per model, against the epoch.

    Args:
        results: one list of `TrainingDynamics.rows` per model (a list of
            such lists), or one list of rows.
        labels: one label per model.
        path, banner, title: as in `gradient_flow`.
        epoch_label: the x axis' name (e.g. "evaluation interval").

    Returns:
        matplotlib.figure.Figure with four panels: the gradient gain, the
        blocks' mean update-to-weight ratio per epoch, the mean
        branch-to-stream ratio, and the mean identity scalar (ReZero alpha,
        zero gamma, Fixup scale) of the models that have one.
    """
    if results and isinstance(results[0], dict):
        results = [results]
    labels = [f"model {i + 1}" for i in range(len(results))] if labels is None else list(labels)
    panels = (
        ("gradient_gain", "gradient gain (input / output)", True),
        ("update_ratio", r"update $\|\Delta W\| / \|W\|$ per epoch (mean of blocks)", True),
        ("branch_ratio", r"branch / stream $\|f(x)\| / \|x\|$ (mean of blocks)", True),
        ("identity_scalar", "identity scalar (alpha, |gamma|, scale; mean)", False),
    )
    figure, axes = _panels(title or "While training: gradient, updates, branches, identity scalars",
                           banner, 4, panel_width=4.2)
    for style, rows, label in zip(series_styles(labels), results, labels):
        epochs = sorted({row["epoch"] for row in rows})
        for axis, (key, _, _) in zip(axes, panels):
            values = []
            for epoch in epochs:
                found = [row[key] for row in rows if row["epoch"] == epoch and row.get(key) is not None]
                values.append(np.mean(found) if found else np.nan)
            if np.all(np.isnan(values)):
                continue
            axis.plot(epochs, values, markersize=3, **style, label=label)
    for axis, (_, name, log) in zip(axes, panels):
        if log and any(line.get_ydata().size for line in axis.get_lines()):
            axis.set_yscale("log")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel(epoch_label)
        axis.set_title(name, fontsize="small")
        if axis.get_lines():
            axis.legend(fontsize="x-small")
        else:
            axis.text(0.5, 0.5, "no model has one", ha="center", va="center", transform=axis.transAxes)
    return _finish(figure, path)
