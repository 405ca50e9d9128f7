"""The vision run's report: Figure 6 of He et al. 2015 on your own machine.

- training_curves.png: error (%) against epochs, one panel per variant
  (plain left, residual right, as the paper's figure 6); bold lines are
  training error, dashed lines the per-epoch evaluation (validation split,
  test set, or a test subset: the CSV column names which); colour = depth.
- gradient_flow.png, activation_growth.png, jacobian.png: the instruments
  at initialisation (tracks/common/instruments.py, instrument_report.py).
- lesion.png: test accuracy of each trained network at the deepest depth
  with one block removed (Veit et al. 2016).
- loss_landscape.png: the training loss around each deepest trained net's
  weights (Li et al. 2018).
- summary.md: the table of results, the figures, and how to read them.
"""

import statistics

from residual_keras import plots
from tracks.common.instrument_report import initialisation_table, instrument_figures, instrument_notes
from tracks.vision.data.loading import dataset_title
from tracks.common.report import (
    banner_markdown,
    deepest_with,
    format_value,
    id_order,
    markdown_table,
    run_ending,
)
from tracks.common.findings import finding_lines
from tracks.common.instrument_report import LANDSCAPE_NOTE, LESION_NOTE, dynamics_cost_line, plot_dynamics
from tracks.common.seeds_report import (
    band_series,
    combine_findings,
    spread_cell,
    write_seeds_results,
    write_seeds_summary,
)
from tracks.common.training import read_metrics_rows
from tracks.vision.experiment import PATH_IMAGES
from tracks.vision.findings import training_rate_sentence, vision_findings
from tracks.vision.trained_net_findings import NOISE_ERRORS, chance_of, noise_above_chance
from tracks.vision.results import VisionResults


def series_label(entry):
    """A model's label in the figures, with its series: colour = depth, style = variant."""
    return plots.Label(entry.id, entry.variant, entry.depth)


# The per-epoch evaluation's column prefix (tracks/common/training.py) as a reader says it.
CURVE_LABELS = {"val": "validation", "test": "test", "test_subset": "test subset"}


def curve_column(rows):
    """The per-epoch evaluation's accuracy column ("test_subset_accuracy", ...), or None."""
    for row in rows:
        for key in row:
            if key.endswith("_accuracy") and key.removesuffix("_accuracy") in CURVE_LABELS:
                return key
    return None


def subtitle(ctx):
    """The line under every figure's title that says which run it is."""
    config, data = ctx.config, ctx.data
    return (f"{data.title}, seed {config.seed}: {len(data.y_train):,} training images, "
            f"{config.epochs} epochs, width {config.width} ({config.preset} preset)")


def curve_set(config, name):
    """The per-epoch evaluation set named for what it is: "test subset (1,000 images)"."""
    sizes = {"val": config.validation_size, "test_subset": config.curve_eval_size}
    size = sizes.get(name)
    label = CURVE_LABELS.get(name, name)
    return f"{label} ({size:,} images)" if size else label


def plot_training_curves(run, config, results, path, banner=None, subtitle=None, runs=None):
    """training_curves.png: error (%) against epoch, one panel per variant (He et al.'s Figure 6).

    With `runs` (the seed runs of a `--seeds` run), each line is the mean
    over the seeds with a band of +- one standard deviation.
    """
    runs = runs or [run]
    panels, curve_names = [], set()
    for variant in config.variants:
        group = []
        for depth in sorted(config.depths):
            model_id = f"{variant}-{depth}"
            per_run = [rows for rows in (read_metrics_rows(r.metrics_path(model_id)) for r in runs) if rows]
            if not per_run:
                continue
            entry = results.model(model_id)
            label = plots.Label(model_id, variant, depth)
            column = curve_column(per_run[0])
            if column:
                curve_names.add(curve_set(config, column.removesuffix("_accuracy")))
            legend = f"{depth} layers" + (" (diverged)" if entry is not None and entry.diverged else "")

            def errors(rows, key):
                return [row["epoch"] + 1 for row in rows], [100 * (1 - row.get(key, float("nan"))) for row in rows]

            if len(runs) > 1:
                group.append(band_series([errors(rows, "accuracy") for rows in per_run], label,
                                         f"{legend}, mean of {len(per_run)} seeds",
                                         dashed_per_seed=[errors(rows, column) for rows in per_run]
                                         if column else None))
                continue
            rows = per_run[0]
            group.append({
                "label": label, "legend": legend,
                "x": errors(rows, "accuracy")[0], "y": errors(rows, "accuracy")[1],
                "dashed": errors(rows, column)[1] if column else None,
            })
        panels.append((f"{variant} networks", group))
    bands = ", band: ± 1 std over the seeds" if len(runs) > 1 else ""
    return plots.curves(
        panels, xlabel="epoch", ylabel="error (%)", bottom=0, path=path, banner=banner, subtitle=subtitle,
        note=f"bold: train, dashed: {' / '.join(sorted(curve_names)) or 'none'}{bands}",
        title=f"Training on {dataset_title(results.dataset or config.data)} (cf. He et al. 2015, Fig. 6)",
    )


def error_percent(study):
    """A lesion-type result with its accuracies turned into test error in % (the curves' unit)."""
    def convert(value):
        return None if value is None else 100.0 * (1.0 - value)

    converted = dict(study, metric="test error (%)")
    for key in ("intact",):
        converted[key] = convert(study[key])
    for key in ("lesioned", "swapped", "mean"):
        if key in study:
            converted[key] = [convert(value) for value in study[key]]
    if "values" in study:
        converted["values"] = [[convert(value) for value in row] for row in study["values"]]
    return converted


def chance_band(study, entry):
    """How a lesion-type figure draws chance, in test error (%): the keywords of `plots.lesion` and
    `plots.block_deletion` (the error of the best constant guess on the study's images, and the band within
    which the findings call an accuracy chance), and the words that say so in the figure's subtitle. A run
    recorded before its studies kept their chance gets no band ({}, None): the class shares of its images are
    not known, and one class in ten can be far from them (a one-class net scored 16% on 50 images)."""
    if not (study.get("chance") and study.get("images")):
        return {}, None
    chance = chance_of(study, entry)
    keywords = {"chance": 100.0 * (1.0 - chance), "chance_noise": 100.0 * noise_above_chance(study, chance)}
    return keywords, f"grey band: chance (always the largest class) ± {NOISE_ERRORS} standard errors"


def plot_lesions(config, results, path, banner=None, subtitle=None):
    """lesion.png for the deepest depth's trained models; False when there is none."""
    depth, entries = deepest_with(config, results, "lesion")
    if not entries:
        return False
    chance, words = chance_band(entries[0].lesion, entries[0])  # the same test images for every net
    plots.lesion([error_percent(m.lesion) for m in entries], [series_label(m) for m in entries], path=path,
                 banner=banner, subtitle=_on_test_images(subtitle, config, words),
                 title=f"Trained depth-{depth} networks: test error with one block removed", **chance)
    return True


def _on_test_images(subtitle, config, chance_words):
    if subtitle is None:
        return None
    on = f"{subtitle}; measured on {config.lesion_images:,} test images"
    return on if chance_words is None else f"{on}; {chance_words}"


def plot_ensemble(config, results, directory, banner=None, subtitle=None):
    """dynamics.png, and block_deletion.png and paths.png (Veit et al.) for the deepest depth; the figures drawn."""
    figures = plot_dynamics(directory, results, banner,
                            subtitle=None if subtitle is None else
                            f"{subtitle}; on {config.instrument_images} training images, inference mode")
    depth, entries = deepest_with(config, results, "ensemble")
    if entries:
        chance, words = chance_band(entries[0].ensemble["deletion"], entries[0])
        plots.block_deletion(
            [error_percent(m.ensemble["deletion"]) for m in entries],
            [error_percent(m.ensemble["swaps"]) for m in entries],
            [series_label(m) for m in entries], path=directory / "block_deletion.png", banner=banner,
            subtitle=_on_test_images(subtitle, config, words),
            title=f"Trained depth-{depth} networks: test error with blocks removed or swapped", **chance,
        )
        figures.append(("Removing k blocks, swapping neighbours (Veit et al. 2016)", "block_deletion.png"))
    with_paths = [m for m in entries if "paths" in m.ensemble]
    if with_paths:
        plots.path_gradients([m.ensemble["paths"] for m in with_paths], [series_label(m) for m in with_paths],
                             path=directory / "paths.png", banner=banner,
                             subtitle=None if subtitle is None else f"{subtitle}; on {PATH_IMAGES} test images")
        figures.append(("Which paths carry the gradient (Veit et al. 2016)", "paths.png"))
    return figures


def plot_landscape(config, results, directory, banner=None, subtitle=None):
    """loss_landscape.png for the deepest depth's trained models (Li et al. 2018); the figures drawn."""
    depth, entries = deepest_with(config, results, "landscape")
    if not entries:
        return []
    plots.loss_landscape(
        [m.landscape for m in entries], [series_label(m) for m in entries], path=directory / "loss_landscape.png",
        banner=banner, title=f"Trained depth-{depth} networks: the training loss around their weights",
        subtitle=None if subtitle is None else
        f"{subtitle}; {config.landscape_steps} x {config.landscape_steps} points on {config.landscape_images} "
        "training images, inference mode")
    return [("The loss around the trained weights (Li et al. 2018)", "loss_landscape.png")]


def lesion_lines(results):
    """One line per trained model: intact accuracy, and the median and worst single-block lesion (the median as
    the finding "One block removed" takes it: of an even count, the mean of the middle two)."""
    lines = []
    for entry in results.models:
        study = entry.lesion
        if not study:
            continue
        removable = [value for value in study["lesioned"] if value is not None]
        if removable:
            lines.append(
                f"- `{entry.id}`: intact {100 * study['intact']:.1f}%; one block removed: "
                f"median {100 * statistics.median(removable):.1f}%, worst "
                f"{100 * min(removable):.1f}% ({len(removable)} of {len(study['lesioned'])} blocks removable)"
            )
    return lines


def results_table(results):
    """(headers, rows): one row per model, for summary.md and the end of the run in the terminal."""
    rows = []
    for entry in sorted(results.models, key=lambda m: (m.variant, m.depth)):
        status = (f"diverged at epoch {entry.diverged_epoch + 1}" if entry.diverged else "ok")
        rows.append([
            entry.variant, entry.depth, format_value(entry.params, "int"),
            format_value(entry.train_error, "percent"),
            format_value(entry.val_error, "percent"),
            format_value(entry.test_error, "percent"),
            status, format_value(entry.seconds, "seconds"),
            format_value(entry.images_per_second, "int"),
        ])
    headers = ["variant", "depth", "parameters", "train error", "val error", "test error", "status",
               "time", "images/s"]
    return headers, rows


def comparison_figures(results):
    """{figure: (value, unit)} that `compare` sets beside a reference run's (tracks/common/compare.py)."""
    figures = {}
    for entry in sorted(results.models, key=lambda m: (m.variant, m.depth)):
        figures[f"{entry.id} training error"] = (entry.train_error, "percent")
        figures[f"{entry.id} test error"] = (entry.test_error, "percent")
    for model_id, values in sorted((results.initialisation or {}).items(), key=lambda item: id_order(item[0])):
        figures[f"{model_id} gradient gain at initialisation"] = (values.get("gradient_gain"), "ratio")
    return figures


def terminal_ending(run, results):
    """The lines a run ends with in the terminal: the results table, TensorBoard, the report."""
    return run_ending(run, *results_table(results), extra_lines=[
        "train error: the last epoch's running error on augmented batches; test error: the whole "
        "test set, once at the end"])


def recipe_line(config):
    """The training recipe of a run in one sentence: schedule, warm-up, and which variant gets which groups."""
    warmup = (f"{config.warmup_steps} warm-up steps" + (f" from depth {config.warmup_from_depth}"
                                                         if config.warmup_from_depth else "")
              if config.warmup_steps else "no warm-up")
    line = (f"{config.epochs} epochs, batch {config.batch_size}, SGD momentum {config.momentum}, lr "
            f"{config.learning_rate} ({config.schedule}, {warmup}), width {config.width}; coupled weight decay "
            f"{config.weight_decay:g} on the kernels")
    if config.fixup_groups and "fixup" in config.variants:
        line += (f", except fixup: the official Fixup code's groups (the classifier's bias at lr/10, decay "
                 f"{config.weight_decay:g} on every parameter; the scalars at lr/10 as always)")
    if config.gradient_clip:
        line += f"; every step's gradient clipped to a global norm of {config.gradient_clip:g}"
    return line + "."


def draw_figures(results, ctx):
    """Every figure of a finished run's report, from what the run keeps (results.json, metrics/, dynamics/).

    Returns the (title, file) of summary.md's figures, those at initialisation
    (drawn when they were measured) included. scripts/replot.py calls it too.
    """
    run, config, banner, line = ctx.run, ctx.config, ctx.data.plot_banner, subtitle(ctx)
    figures = [("Training curves", "training_curves.png")]
    plot_training_curves(run, config, results, run.path / "training_curves.png", banner, line)
    figures += instrument_figures(run.path)
    if plot_lesions(config, results, run.path / "lesion.png", banner, line):
        figures.append(("Lesion study of the trained networks", "lesion.png"))
    figures += plot_ensemble(config, results, run.path, banner, line)
    figures += plot_landscape(config, results, run.path, banner, line)
    return figures


def report(results, ctx):
    """The figures and summary.md of a finished run; returns the lines the run ends with in the terminal."""
    figures = draw_figures(results, ctx)
    write_summary(ctx.run, ctx.config, results, figures, ctx.data.banner)
    return terminal_ending(ctx.run, results)


def synthetic_note(config, dataset):
    """Which synthetic set the run had ("" for other data): how faint its objects, its distractors, its clutter."""
    if dataset != "synthetic":
        return ""
    if config.synthetic_faintest >= 1:
        note = "; every object fully painted"
    else:
        note = f"; half the objects faint, down to opacity {config.synthetic_faintest:g}"
    if config.synthetic_distractors:
        note += f"; {config.synthetic_distractors} distractors in half the images"
    if config.synthetic_clutter != 1:
        note += f"; background clutter x{config.synthetic_clutter:g}"
    return note


def write_summary(run, config, results, figures, banner=None):
    """summary.md: the results table and the figures, readable on its own."""
    table = markdown_table(*results_table(results))
    lines = [
        f"# Vision run: plain vs residual networks ({config.preset} preset)\n",
        banner_markdown(banner),
        f"Data: **{dataset_title(results.dataset)}** ({results.train_images:,} training images"
        f"{synthetic_note(config, results.dataset)}), seed {config.seed}. "
        f"Device: {results.device}, precision {results.precision}, "
        f"XLA {'on' if results.xla else 'off'}. {recipe_line(config)}\n",
        "## Results\n",
        "Train error is the last epoch's running error on augmented batches, as in "
        "He et al.'s curves; test error is measured once at the end on the whole test set.\n",
        table + "\n",
        "## What this run shows\n",
        "Each line is computed from this run's numbers and says whether the claim held "
        "(thresholds in `tracks/vision/findings.py`).\n",
        "\n".join(finding_lines(vision_findings(results))) + "\n",
        "## How to read the figures\n",
        "- **Training curves**: bold = training error, dashed = the per-epoch evaluation (the legend "
        "and the CSV columns say which: `val_*` a validation split, `test_subset_*` a fixed random "
        "subset of the test set, `test_*` all of it), colour = depth. He et "
        "al.'s Figure 6 found the deeper *plain* net with the *higher* training error (the "
        "degradation problem: not overfitting, it fits its own training data worse) and the deeper "
        "*residual* net with the lower one. The findings above say what this run found.\n",
        "- **Gradient flow, Jacobian, depth scaling** (at initialisation): how the gradient and the "
        "stream change from block to block; the table below gives the numbers.\n",
        LESION_NOTE,
        f"- **Chance** on the lesion figures (the grey band): the test error of always answering the largest "
        f"class of the test images the studies use, ± {NOISE_ERRORS} standard errors on them. A net with blocks "
        f"removed inside the band has nothing left: the findings call it back at chance.\n",
        *([LANDSCAPE_NOTE] if any(name == "loss_landscape.png" for _, name in figures) else []),
        "## Instruments at initialisation\n",
        initialisation_table(results.initialisation or {}) + "\n",
        instrument_notes(results.initialisation or {}),
        dynamics_cost_line(results),
        "## Lesion study (test accuracy)\n",
        "\n".join(lesion_lines(results)) + "\n",
    ]
    for title, name in figures:
        lines.append(f"## {title}\n\n![{title}]({name})\n")
    (run.path / "summary.md").write_text("\n".join(lines))


SEED_METRICS = ("train_error", "val_error", "test_error")


def seeds_table(results):
    """(headers, rows) of a seeds run: each model's errors as mean +- std over the seeds."""
    def percent(value):
        return format_value(value, "percent")

    rows = []
    for entry in sorted(results.models, key=lambda m: (m.variant, m.depth)):
        diverged = entry.diverged_seeds
        rows.append([
            entry.variant, entry.depth, format_value(entry.params, "int"),
            *(spread_cell(getattr(entry, metric), entry.std(metric), percent) for metric in SEED_METRICS),
            ", ".join(map(str, entry.seeds)),
            "diverged on seed " + ", ".join(map(str, diverged)) if diverged else "ok",
        ])
    return ["variant", "depth", "parameters", "train error", "val error", "test error", "seeds", "status"], rows


def seeds_report(seed_runs, ctx):
    """results.json, training_curves.png (mean +- std bands) and summary.md of a `--seeds` run; its last lines."""
    run, config, banner, plot_banner = ctx.run, ctx.config, ctx.data.banner, ctx.data.plot_banner
    per_seed = [(seed, VisionResults.from_json(child.read_results())) for seed, child in seed_runs]
    results = write_seeds_results(run, "vision", config, per_seed, SEED_METRICS,
                                  keys=("variant", "depth", "num_classes"))
    first = per_seed[0][1]
    subtitle = (f"{dataset_title(first.dataset)}, seeds {','.join(map(str, config.seeds))}: "
                f"{first.train_images:,} training images, {config.epochs} epochs, width {config.width} "
                f"({config.preset} preset)")
    plot_training_curves(run, config, results, run.path / "training_curves.png", plot_banner, subtitle,
                         runs=[child for _, child in seed_runs])
    combined = combine_findings([(seed, vision_findings(r)) for seed, r in per_seed])
    write_seeds_summary(
        run, title=f"Vision run over {len(config.seeds)} seeds: plain vs residual networks ({config.preset} preset)",
        banner=banner,
        description=(f"Data: **{dataset_title(first.dataset)}** ({first.train_images:,} training "
                     f"images{synthetic_note(config, first.dataset)}), seeds {', '.join(map(str, config.seeds))}: "
                     "each model trained once per seed "
                     f"(its initialisation, training subset and batch order). Device: {first.device}. "
                     f"{recipe_line(config)} Train error is the last epoch's running "
                     "error on augmented batches; test error the whole test set, at the end."
                     + (f"\n\n**{rate}**" if (rate := training_rate_sentence(per_seed)) else "")),
        table=markdown_table(*seeds_table(results)), combined=combined, seeds=config.seeds,
        figures=[("Training curves: mean ± std over the seeds", "training_curves.png")],
    )
    return seeds_terminal_ending(run, results)


def seeds_terminal_ending(run, results):
    return run_ending(run, *seeds_table(results), extra_lines=[
        f"mean ± std over the seeds; each seed's own report: {run.path}/seed-N/summary.md"])
