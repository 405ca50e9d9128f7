"""What a report says about the instruments: how to read each figure, the table at initialisation, dynamics.png.

The numbers come from instruments.py (at initialisation) and from each
model's dynamics CSV (while training); this module writes the text and
figures of summary.md around them: the notes (only those that apply to the
models measured), the table, the diagnose run's summary.md.
"""

import numpy as np

from residual_keras import diagnostics, plots


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
    # The caption names the panels drawn: an instrument no model has gets none.
    drawn = [name for key, name in DYNAMICS_PANELS.items()
             if any(row.get(key) is not None for model_rows in rows for row in model_rows)]
    return [("While training: " + ", ".join(drawn), "dynamics.png")]


# The panels of dynamics.png as its caption names them, by the column of the dynamics CSV.
DYNAMICS_PANELS = {"gradient_gain": "gradient gain", "update_ratio": "updates", "branch_ratio": "branches",
                   "identity_scalar": "identity scalars", "delta_rank": "the rank of x_L - x_0"}


def _floats(values):
    """results.json's numbers (None where a value was not finite) as a float array (NaN there)."""
    return np.array(np.where(np.equal(np.asarray(values, dtype=object), None), np.nan, values), dtype="float64")


def plot_initialisation(directory, summary, series, banner=None, subtitle=None, depth_scaling=True):
    """The figures at initialisation that results.json's numbers draw again; the files drawn.

    gradient_flow.png, activation_growth.png, layer_gradients.png (the deepest
    model of each variant) and depth_scaling.png (`depth_scaling` and several
    depths), with the arguments tracks/common/instruments.py draws them with
    when it measures. jacobian.png and jacobian_blocks.png are not among them:
    results.json keeps each model's ||d x_L / d x_0||, not the norms block by
    block and along the depth that they draw.

    Args:
        directory: where the PNGs go.
        summary: results.json's "initialisation" ({label: numbers}).
        series: {label: (variant, depth)} of the models measured, in the order measured.
        banner, subtitle: the figures' data warning and the line that names the run.
    """
    labels = [plots.Label(label, *series[label]) for label in summary]
    gradients = [{"model": str(label), "stream_grad_norms": _floats(summary[label]["stream_grad_norms"]),
                  "block_weight_grad_norms": _floats(summary[label]["block_weight_grad_norms"]),
                  "gain": summary[label].get("gradient_gain"), "training": True} for label in labels]
    plots.gradient_flow(gradients, labels, path=directory / "gradient_flow.png", banner=banner, subtitle=subtitle)
    activations = [{"model": str(label), "rms": _floats(summary[label]["stream_rms"])} for label in labels]
    plots.activation_growth(activations, labels, path=directory / "activation_growth.png", banner=banner,
                            subtitle=subtitle)
    deepest = {}  # variant -> index of its deepest model
    for index, label in enumerate(labels):
        if label.variant not in deepest or label.depth > labels[deepest[label.variant]].depth:
            deepest[label.variant] = index
    plots.layer_gradients([gradients[index] for index in deepest.values()], [labels[index] for index in deepest.values()],
                          path=directory / "layer_gradients.png", banner=banner, subtitle=subtitle)
    drawn = ["gradient_flow.png", "activation_growth.png", "layer_gradients.png"]
    if depth_scaling and len({label.depth for label in labels}) > 1:
        by_variant = {}
        for label in labels:
            by_variant.setdefault(label.variant, {})[label.depth] = summary[label]
        plots.depth_scaling(by_variant, path=directory / "depth_scaling.png", banner=banner, subtitle=subtitle)
        drawn.append("depth_scaling.png")
    return drawn


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


__all__ = ["LANDSCAPE_NOTE", "LESION_NOTE", "PATHS_NOTE", "dynamics_cost_line", "initialisation_table",
           "instrument_figures", "instrument_notes", "plot_dynamics", "plot_initialisation", "write_diagnose_summary"]
