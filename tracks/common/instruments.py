"""The instruments of `residual_keras.diagnostics` run on a track's models.

At initialisation (before any training, and in `diagnose`), for the models of
the grid:

- gradient_flow.png: the loss gradient's norm at every block's input,
  relative to the output (any BatchNorm in training mode, as in the first step);
- activation_growth.png: the RMS of the stream after every block;
- jacobian.png: the spectral norm of d x_l / d x_0 along the deepest model
  of each variant (a model with BatchNorm has its statistics calibrated on
  the batch first, so that inference mode computes what the first training
  step computes), with the line 1 and the line c^l, c = the plain model's
  per-block growth (||d x_L / d x_0||^(1/L)).

Results are stored in results.json as plain numbers, so a report can be
redrawn without the models. They also say what the models contain (BatchNorm
layers, branches that start at 0), so that `instrument_report.instrument_notes`
explains only what applies to them. This module measures (and draws the
figures at initialisation); instrument_report.py writes what a report says
about the measurements.
"""

import math

import numpy as np

from residual_keras import diagnostics, plots


def jsonable(value):
    """numpy arrays and scalars inside dicts/lists -> lists and floats (NaN -> None)."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def at_initialisation(models, x, out_dir, *, y=None, banner=None, subtitle=None, jacobian_examples=1,
                      jacobian_iterations=3, jacobian_tolerance=1e-5, log=print, calibrate=True,
                      output_index=None, blocks=None, depth_scaling=True, jacobian_depths=10):
    """Draws the three initialisation plots; returns per-model summary numbers.

    Args:
        models: list of `GridModel`s (tracks/common/track.py) at initialisation:
            the label, the series (variant, depth: the plots' styles), the
            model, and whether it is plain (the c^l reference line).
        x: a batch of model inputs (images or token ids).
        out_dir: where the PNGs go.
        y: the batch's targets (labels, next characters) for the loss of the
            gradient instruments, or None for random labels.
        banner: a data-fallback warning for the plot titles, or None.
        subtitle: the line under the plot titles that names the run, or None.
        jacobian_examples: examples used for the Jacobian norms.
        jacobian_iterations: most power iterations per estimate (each depth
            starts from the previous depth's singular vector); an estimate
            that has not converged is reported as a lower bound.
        jacobian_tolerance: the relative change at which an estimate has converged.
        log: progress lines.
        calibrate: set the BatchNorm statistics from `x` before the Jacobian
            (False: measure a saved model with its own statistics).
        output_index, blocks: passed to the instruments (a model with
            several outputs; layers of one's own as blocks).
        depth_scaling: draw depth_scaling.png when the models have several depths.
        jacobian_depths: about how many depths along the deepest models the
            cumulative ||d x_l / d x_0|| is estimated at (the cost grows with
            depths x blocks).
    """
    labels = [plots.Label(item.label, item.variant, item.depth) for item in models]
    log(f"measuring gradient flow, activation growth and the Jacobian: {', '.join(labels)}")
    gradients = [diagnostics.gradient_norms(item.model, x, y, output_index=output_index, blocks=blocks)
                 for item in models]
    plots.gradient_flow(gradients, labels, path=out_dir / "gradient_flow.png", banner=banner, subtitle=subtitle)
    activations = [diagnostics.activation_norms(item.model, x, blocks=blocks) for item in models]
    plots.activation_growth(activations, labels, path=out_dir / "activation_growth.png", banner=banner,
                            subtitle=subtitle)

    deepest = {}  # variant -> index of its deepest model
    for index, item in enumerate(models):
        if item.variant not in deepest or item.depth > models[deepest[item.variant]].depth:
            deepest[item.variant] = index
    plots.layer_gradients([gradients[index] for index in deepest.values()],
                          [labels[index] for index in deepest.values()],
                          path=out_dir / "layer_gradients.png", banner=banner, subtitle=subtitle)
    jacobians, jacobian_labels, batchnorms = [], [], []
    references = []
    for index in deepest.values():
        label, model = labels[index], models[index].model
        # The number of BatchNorm layers whose statistics were set (None: not calibrated, not looked for).
        batchnorms.append(diagnostics.calibrate_batchnorm(model, x) if calibrate else None)
        num_blocks = len(gradients[index]["names"])
        result = diagnostics.jacobian_norm(
            model, x[:jacobian_examples], num_iterations=jacobian_iterations,
            tolerance=jacobian_tolerance, per_block=True,
            per_branch=True, cumulative=max(1, num_blocks // jacobian_depths),  # O(L^2 / k)
            blocks=blocks,
        )
        jacobians.append(result)
        jacobian_labels.append(label)
        total = float(np.mean(result["total"]))
        if models[index].plain and total > 0 and math.isfinite(total):
            references.append(round(total ** (1 / len(result["names"])), 3))
    calibrated = ", BatchNorm calibrated on the batch" if any(batchnorms) else ""  # only where it set something
    jacobian_subtitle = None if subtitle is None else (
        f"{subtitle}; the Jacobian on {jacobian_examples} example{'s' if jacobian_examples > 1 else ''}{calibrated}")
    plots.jacobian(jacobians, jacobian_labels, references=references,
                   path=out_dir / "jacobian.png", banner=banner, subtitle=jacobian_subtitle)
    plots.jacobian_blocks(jacobians, jacobian_labels, path=out_dir / "jacobian_blocks.png", banner=banner,
                          subtitle=jacobian_subtitle)

    summary = {}
    for label, gradient, activation in zip(labels, gradients, activations):
        rms = np.asarray(activation["rms"]).mean(axis=1)
        summary[str(label)] = {
            "loss": gradient["loss"],
            "gradient_gain": gradient["gain"],
            "block_weight_grad_norms": gradient["block_weight_grad_norms"],
            "stream_grad_norms": gradient["stream_grad_norms"],
            "stream_rms": activation["rms"],
            "stream_growth": float(rms[-1] / rms[0]) if rms[0] > 0 else None,
        }
    for label, result, batchnorm in zip(jacobian_labels, jacobians, batchnorms):
        label = str(label)
        summary[label]["jacobian_norm"] = float(np.mean(result["total"]))
        summary[label]["jacobian_converged"] = result["converged"]
        summary[label]["jacobian_iterations"] = result["iterations"]
        summary[label]["batchnorm_layers"] = batchnorm
        # Branches whose Jacobian is exactly 0 start at 0 (None: no branch measured: plain, or several steps a block).
        branches = [np.asarray(branch) for branch in result["per_branch"] or [] if branch is not None]
        summary[label]["zero_branches"] = sum(1 for branch in branches if not np.any(branch)) if branches else None
    if depth_scaling and len({item.depth for item in models}) > 1:
        _depth_scaling(models, x, summary, out_dir, banner, jacobian_examples, subtitle)
    return jsonable(summary)


def _depth_scaling(models, x, summary, out_dir, banner, jacobian_examples, subtitle=None):
    """depth_scaling.png: gradient gain, ||d x_L / d x_0|| and stream growth against depth.

    Fills in the Jacobian norm of the models the cumulative plot left out
    (BatchNorm calibrated on the batch, 10 power iterations).
    """
    by_variant = {}
    for label, variant, depth, model, _ in models:
        values = summary[label]
        if "jacobian_norm" not in values:
            diagnostics.calibrate_batchnorm(model, x)
            result = diagnostics.jacobian_norm(model, x[:jacobian_examples], num_iterations=10,
                                               per_block=False)
            values["jacobian_norm"] = float(np.mean(result["total"]))
            values["jacobian_converged"] = result["converged"]
            values["jacobian_iterations"] = result["iterations"]
        by_variant.setdefault(variant, {})[depth] = values
    plots.depth_scaling(by_variant, path=out_dir / "depth_scaling.png", banner=banner, subtitle=subtitle)


def dynamics_summary(rows):
    """A trained model's dynamics at its first and last record, for results.json.

    {"first": {...}, "last": {...}}, each with the epoch, the gradient gain,
    the mean branch ratio and identity scalar over the blocks that have one
    (None where no block has), and the rank, effective rank and relative size
    of x_L - x_0; None when nothing was recorded.
    """
    if not rows:
        return None
    epochs = sorted({row["epoch"] for row in rows})

    def mean(values):
        values = [value for value in values if value is not None and math.isfinite(value)]
        return float(np.mean(values)) if values else None

    def at(epoch):
        records = [row for row in rows if row["epoch"] == epoch]
        first = records[0]
        return {
            "epoch": epoch,
            "gradient_gain": first.get("gradient_gain"),
            "branch_ratio": mean(row.get("branch_ratio") for row in records),
            "identity_scalar": mean(row.get("identity_scalar") for row in records),
            "delta_rank": first.get("delta_rank"),
            "delta_effective_rank": first.get("delta_effective_rank"),
            "delta_size": first.get("delta_size"),
        }

    return jsonable({"first": at(epochs[0]), "last": at(epochs[-1])})


__all__ = ["at_initialisation", "dynamics_summary", "jsonable"]
