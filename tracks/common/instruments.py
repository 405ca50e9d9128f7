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
layers, branches that start at 0), so that `instrument_notes` explains only
what applies to them.
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


def plot_dynamics(directory, results, banner=None, epoch_label="epoch", subtitle=None, label_of=None):
    """dynamics.png from every trained model's dynamics CSV; the figures drawn (title, file).

    `label_of(entry)`: a model's label in the plot (default: a `plots.Label`
    of its id, variant and depth).
    """
    label_of = label_of or (lambda entry: plots.Label(entry.id, entry.variant, entry.depth))
    rows, labels = [], []
    for entry in results.models:
        found = diagnostics.TrainingDynamics.read_csv(directory / "dynamics" / f"{entry.id}.csv")
        if found:
            rows.append(found)
            labels.append(label_of(entry))
    if not rows:
        return []
    plots.dynamics(rows, labels, path=directory / "dynamics.png", banner=banner, epoch_label=epoch_label,
                   subtitle=subtitle)
    return [("While training: gradient, updates, branches, identity scalars, the rank of x_L - x_0", "dynamics.png")]


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


def dynamics_cost_line(results):
    """One sentence: what recording the dynamics cost, as a share of the training time."""
    spent = sum(m.dynamics_seconds or 0.0 for m in results.models)
    fitting = sum(m.fit_seconds or 0.0 for m in results.models)
    if not fitting or not spent:
        return ""
    return (f"Recording the training dynamics took {spent:.0f} s of {fitting:.0f} s of training "
            f"({100 * spent / fitting:.1f}%; the CSVs are in `dynamics/`). They are measured in "
            f"inference mode (BatchNorm's moving statistics, nothing of the model changes), so "
            f"dynamics.png's gain at epoch 0 differs from the table above, which is measured "
            f"as in a training step (batch statistics).\n")


def instrument_figures(out_dir=None):
    """(title, file) of the plots `at_initialisation` drew (in `out_dir`), for summary.md."""
    figures = [
        ("Gradient flow at initialisation", "gradient_flow.png"),
        ("Activation growth at initialisation", "activation_growth.png"),
        ("Jacobian of the stream at initialisation", "jacobian.png"),
        ("Weight gradients per block at initialisation", "layer_gradients.png"),
        ("Block by block: each Jacobian, their product, the product's norm", "jacobian_blocks.png"),
    ]
    if out_dir is not None and (out_dir / "depth_scaling.png").exists():
        figures.append(("Against depth, at initialisation", "depth_scaling.png"))
    return figures


# How to read the plots at initialisation, one note per instrument; `instrument_notes` adds
# the parts about BatchNorm, branches that start at 0 and undefined gains where they apply.
GRADIENT_FLOW_NOTE = """\
- **Gradient flow**: the norm of the loss gradient at every block's input, divided by
  its value at the last block's output (the gain). 1 means the gradient arrives unchanged.
"""
BATCHNORM_GRADIENT_NOTE = """\
  With BatchNorm in training mode (as in a training step) every layer rescales the
  gradient, so a plain BatchNorm network's gain can be large (Yang et al. 2019); without
  normalisation a plain stack multiplies its layers' Jacobians and the gain moves
  exponentially with depth (depth_scaling.png when several depths are compared).
"""
PLAIN_GRADIENT_NOTE = """\
  A plain stack multiplies its layers' Jacobians, so its gain moves exponentially with
  depth (depth_scaling.png when several depths are compared); a residual stack adds
  the identity to each of them.
"""
ACTIVATION_NOTE = """\
- **Activation growth**: the RMS of the stream after each block. How it grows depends on the
  blocks: branches of a fixed size (their input normalised) add up along a residual stream;
  unnormalised He-initialised residual branches as large as the stream double its variance
  per block.
"""
JACOBIAN_NOTE = """\
- **Jacobian**: the spectral norm of d x_l / d x_0 (power iteration, never forming
  the matrix). Power iteration approaches the norm from below: an estimate that did not
  converge in the iterations it was given is a lower bound, and is marked "≥ ... (lower
  bound)" in the table and "lower bound" in the plots. A plain stack multiplies one
  Jacobian per block (a line c^l on this log scale if each block stretches by c).
  Residual blocks contribute I + df/dx.
"""
ZERO_BRANCH_NOTE = """\
  When every branch starts at exactly 0 (zero-gamma, Fixup, ReZero, zero-initialised
  pre-activation blocks) the product's norm is exactly 1 (tests/library/test_diagnostics.py,
  tests/library/test_preact_blocks.py). The gradient gain of a zero-gamma network is still
  below 1: each of its blocks starts as ReLU(shortcut(x)), whose Jacobian passes the
  gradient only where the stream is positive, so the gradient on the other entries of x_0
  is lost.
"""
WEIGHT_GRADIENT_NOTE = """\
- **Weight gradients per block**: the norm of each block's weight gradient, input side on
  the left (Xiong et al. 2020 compare Post-LN with Pre-LN this way).
"""
UNDEFINED_GAIN_NOTE = """\
- A gain shown as "undefined" has no gradient at the last block to divide by: Fixup
  starts its classifier at 0, so at initialisation no gradient reaches any block.
"""


def _some_model_has(summary, key):
    """Whether a model of `summary` has some of `key` (BatchNorm layers, zero branches).

    True too when no model says (a summary of an older run, a saved model
    measured as saved): then the note may apply, and it is kept.
    """
    known = [values.get(key) for values in summary.values() if values.get(key) is not None]
    return any(known) or not known


def instrument_notes(summary):
    """How to read the plots at initialisation: the notes that apply to the models of `summary`.

    `summary` is what `at_initialisation` returned (results.json's
    "initialisation"): the BatchNorm note only where a model has BatchNorm, the
    note on branches that start at exactly 0 only where one does, the
    undefined gain only where a gain is undefined.
    """
    if not summary:
        return ""
    batchnorm = _some_model_has(summary, "batchnorm_layers")
    notes = [GRADIENT_FLOW_NOTE, BATCHNORM_GRADIENT_NOTE if batchnorm else PLAIN_GRADIENT_NOTE, ACTIVATION_NOTE,
             JACOBIAN_NOTE, ZERO_BRANCH_NOTE if _some_model_has(summary, "zero_branches") else "",
             WEIGHT_GRADIENT_NOTE]
    if any(values.get("gradient_gain") is None for values in summary.values()):
        notes.append(UNDEFINED_GAIN_NOTE)
    return "".join(notes)


# How to read the figures of trained nets taken apart (a track's lesions, paths and landscape).
LESION_NOTE = (
    "- **Lesions** (Veit et al. 2016): a trained network with blocks removed. A residual "
    "network's 2^n paths overlap, so losing one block leaves half of them; a plain network has "
    "one path.\n")
PATHS_NOTE = (
    "- **Paths** (Veit et al. 2016): n residual blocks unroll into 2^n paths from x_0 to x_L, C(n, k) "
    "of them through k branches. Left: the share of the paths of each length (bars; most pass about "
    "n/2 branches) and the share of the gradient at x_0 that they carry (line). Right: the gradient "
    "of one path of each length, which shrinks with every branch it passes.\n")
LANDSCAPE_NOTE = (
    "- **Loss landscape** (Li et al. 2018): the training loss of each deepest trained net on the plane "
    "through its weights spanned by two random directions, each filter scaled to the weights' own "
    "filter (so that planes of different nets compare). Contours above, the surface below, one colour "
    "scale for all; the panel titles give what was measured on each grid: the rise at the edge, the "
    "curvature at the weights, the share of the plane that curves down in some direction "
    "(non-convex).\n")

def initialisation_table(summary):
    from tracks.common.findings import scientific
    from tracks.common.report import markdown_table

    rows = []
    for label, values in summary.items():
        gains = values.get("block_weight_grad_norms") or []
        jacobian = scientific(values.get("jacobian_norm"))
        if values.get("jacobian_norm") is not None and values.get("jacobian_converged") is False:
            jacobian = f"≥ {jacobian} (lower bound, {values.get('jacobian_iterations', '?')} iterations)"
        rows.append([
            label, scientific(values.get("gradient_gain")), jacobian,
            scientific(values.get("stream_growth")),
            f"{scientific(gains[0])} / {scientific(gains[-1])}" if gains else "—",
        ])
    return markdown_table(
        ["model", "gradient gain (input / output)", "||d x_L / d x_0||", "stream RMS x_L / x_0",
         "weight gradient, first / last block"], rows)


def write_diagnose_summary(run, title, summary, banner=None,
                           description="Every model at initialisation, no training.\n"):
    """summary.md of a `diagnose` run: the table and the three plots."""
    from tracks.common.report import banner_markdown

    from tracks.common.findings import depth_scaling, finding_lines

    scaling = [depth_scaling(summary, key, what) for key, what in (
        ("gradient_gain", "gradient gain"), ("jacobian_norm", "||d x_L / d x_0||"),
        ("stream_growth", "stream growth RMS(x_L) / RMS(x_0)"))]
    lines = [f"# {title}\n", banner_markdown(banner),
             description,
             initialisation_table(summary) + "\n"]
    if any(scaling):
        lines += ["## What it shows, against depth\n", "\n".join(finding_lines(scaling)) + "\n"]
    lines += ["## How to read the plots\n", instrument_notes(summary)]
    for figure_title, name in instrument_figures(run.path):
        lines.append(f"## {figure_title}\n\n![{figure_title}]({name})\n")
    (run.path / "summary.md").write_text("\n".join(lines))
