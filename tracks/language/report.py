"""The language run's report.

- loss_curves.png: validation loss against training step, one panel per
  variant, depth by colour (dashed: with warmup, when both are compared).
- gradient_flow.png, activation_growth.png, jacobian.png: the instruments
  at initialisation (tracks/common/instruments.py, instrument_report.py).
- stream.png: what each trained model's attention and feed-forward
  sublayers write into the residual stream, relative to the stream.
- samples.md: the same prompt continued by every model.
- summary.md: the results table, the figures and how to read them.
"""

from residual_keras import plots
from tracks.common.instrument_report import initialisation_table, instrument_figures, instrument_notes
from tracks.language.data import dataset_title
from tracks.common.report import (
    banner_markdown,
    deepest_with,
    format_value,
    id_order,
    markdown_table,
    run_ending,
)
from tracks.common.findings import finding_lines
from tracks.common.instrument_report import dynamics_cost_line, plot_dynamics
from tracks.common.seeds_report import (
    band_series,
    combine_findings,
    spread_cell,
    write_seeds_results,
    write_seeds_summary,
)
from tracks.common.training import read_metrics_rows
from tracks.language.findings import language_findings
from tracks.language.results import LanguageResults


def series_label(entry):
    """A model's label in the figures: colour = depth, style = variant (a run with warm-up a variant of its own)."""
    warmup = entry.warmup
    variant = entry.variant + (f" warm-up {warmup}" if warmup else "")
    return plots.Label(entry.id, variant, entry.depth)


def subtitle(ctx):
    """The line under every figure's title that says which run it is."""
    config, data = ctx.config, ctx.data
    return (f"{data.title}, seed {config.seed}: {config.steps:,} steps of batch "
            f"{config.batch_size} x {config.sequence_length} characters, width {config.embed_dim} "
            f"({config.preset} preset)")


def plot_loss_curves(run, config, results, path, banner=None, subtitle=None, runs=None):
    """loss_curves.png: validation loss against step, one panel per variant.

    With `runs` (the seed runs of a `--seeds` run), each line is the mean
    over the seeds with a band of +- one standard deviation.
    """
    runs = runs or [run]
    compare_warmup = len(config.warmup_steps) > 1
    # The run's grid as results.json recorded it (computed once, by the track), in grid order.
    models = sorted(results.models, key=lambda m: (m.depth, list(config.warmup_steps).index(m.warmup)))
    panels = []
    for variant in config.variants:
        group = []
        for entry in models:
            if entry.variant != variant:
                continue
            per_run = [rows for rows in (read_metrics_rows(r.metrics_path(entry.id)) for r in runs) if rows]
            if not per_run:
                continue
            label = series_label(entry)
            legend = f"{entry.depth} layers" + (f", warm-up {entry.warmup}" if compare_warmup else "")
            legend += " (diverged)" if entry.diverged else ""
            curves = [([(row["epoch"] + 1) * config.eval_interval for row in rows],
                       [row.get("val_loss", float("nan")) for row in rows]) for rows in per_run]
            if len(runs) > 1:  # a run with warm-up gets its own line style (the label)
                group.append(band_series(curves, label, f"{legend}, mean of {len(per_run)} seeds"))
            else:
                group.append({"label": label, "legend": legend, "x": curves[0][0], "y": curves[0][1]})
        panels.append((variant, group))
    return plots.curves(
        panels, xlabel="training step", ylabel="validation loss (nats/char)", path=path, banner=banner,
        subtitle=subtitle, note="band: ± 1 std over the seeds" if len(runs) > 1 else None,
        title=f"Character Transformers on {dataset_title(results.dataset or config.data)}: validation loss",
    )


def plot_stream(config, results, path, banner=None, subtitle=None):
    """stream.png for the deepest depth's trained models; False when there is none."""
    depth, entries = deepest_with(config, results, "stream")
    if not entries:
        return False
    plots.stream([m.stream for m in entries], [series_label(m) for m in entries], path=path, banner=banner,
                 subtitle=_on(subtitle, config.instrument_sequences), title=f"What each sublayer writes into the stream, relative to it (trained, {depth} layers)")
    return True


def comparison_figures(results):
    """{figure: (value, unit)} that `compare` sets beside a reference run's (tracks/common/compare.py)."""
    figures = {}
    for entry in sorted(results.models, key=lambda m: m.id):
        figures[f"{entry.id} validation loss"] = (entry.val_loss, "nats")
        figures[f"{entry.id} training loss"] = (entry.train_loss, "nats")
    for model_id, values in sorted((results.initialisation or {}).items(), key=lambda item: id_order(item[0])):
        figures[f"{model_id} gradient gain at initialisation"] = (values.get("gradient_gain"), "ratio")
    return figures


def write_samples(run, config, results):
    lines = [f"# Samples: every model continues the prompt {config.prompt!r}\n",
             f"{config.sample_chars} characters, temperature 0.8, seed {config.seed}.\n"]
    for entry in results.models:
        lines.append(f"## {entry.id} (val loss {format_value(entry.val_loss)})\n")
        if entry.sample is None:
            lines.append("_no sample: the model diverged_\n")
        else:
            lines.append("```text\n" + config.prompt + entry.sample + "\n```\n")
    (run.path / "samples.md").write_text("\n".join(lines))


LOOK_FOR = {
    "plain": "- **plain** vs **pre**: the same layers without the residual additions. A deep plain "
             "stack can stall at the loss of predicting character frequencies; the finding above "
             "says what it did here.\n",
    "post": "- **post** vs **pre**: Post-LN normalises the stream after every addition. Xiong et al. "
            "2020 found that it needs learning-rate warm-up and Pre-LN does not; runs that compare "
            "`--warmup-steps 0,N` test that (findings above).\n",
    "rezero": "- **rezero**: no LayerNorm at all, every block starts as the identity (alpha = 0).\n",
}


def what_to_look_for(variants):
    return [text for variant, text in LOOK_FOR.items() if variant in variants]


def _deepest_trained(config, results, key):
    """Entries of the deepest depth with `key`, with the longest warm-up of the run."""
    depth, entries = deepest_with(config, results, key)
    longest = max(config.warmup_steps)
    return depth, [m for m in entries if m.warmup == longest]


def _on(subtitle, sequences):
    return None if subtitle is None else f"{subtitle}; measured on {sequences} validation windows"


def plot_trained_instruments(config, results, directory, banner=None, subtitle=None):
    """dynamics.png; logit_lens.png, lesion.png and block_deletion.png for the deepest depth; the figures drawn."""
    figures = plot_dynamics(directory, results, banner, label_of=series_label, epoch_label=f"evaluation interval ({config.eval_interval} steps)",
                            subtitle=_on(subtitle, config.instrument_sequences))
    depth, entries = _deepest_trained(config, results, "logit_lens")
    if not entries:
        return figures
    labels = [series_label(m) for m in entries]
    unigram = results.unigram_loss
    plots.logit_lens([m.logit_lens for m in entries], labels, path=directory / "logit_lens.png",
                     banner=banner, subtitle=_on(subtitle, config.lesion_sequences), reference=None if unigram is None else
                     (unigram, f"character frequencies only ({unigram:.2f})"),
                     title=f"Logit lens: the stream at each depth read out by the head (trained, {depth} layers)")
    figures.append(("Logit lens: where the prediction forms", "logit_lens.png"))
    plots.sublayer_lesions([m.lesion for m in entries], [m.sublayers for m in entries], labels,
                           path=directory / "lesion.png", banner=banner,
                           subtitle=_on(subtitle, config.lesion_sequences), title=f"Validation loss with one block or one sublayer removed ({depth} layers)")
    figures.append(("Removing a block or a sublayer", "lesion.png"))
    plots.block_deletion([m.deletion for m in entries], None, labels, path=directory / "block_deletion.png",
                         banner=banner, subtitle=_on(subtitle, config.lesion_sequences), title=f"Validation loss with k random blocks removed ({depth} layers)")
    figures.append(("Removing k blocks at once (Veit et al. 2016)", "block_deletion.png"))
    return figures


def results_table(results):
    """(headers, rows): one row per model, for summary.md and the end of the run in the terminal."""
    rows = []
    for entry in sorted(results.models, key=lambda m: (m.depth, m.variant, m.warmup)):
        status = f"diverged by step {entry.diverged_step}" if entry.diverged else "ok"
        rows.append([
            entry.variant, entry.depth, entry.warmup, format_value(entry.params, "int"),
            format_value(entry.train_loss), format_value(entry.val_loss),
            format_value(entry.val_bpc), status, format_value(entry.seconds, "seconds"),
            format_value(entry.tokens_per_second, "int"),
        ])
    headers = ["variant", "layers", "warmup", "parameters", "train loss", "val loss", "val bits/char",
               "status", "time", "tokens/s"]
    return headers, rows


def sample_command_line(run, prompt="ROMEO:"):
    """The `sample` command to suggest: with `prompt` when the run's vocabulary has its characters.

    A run on other text (`--data text:...`) may lack them, and the command would
    refuse the prompt; it is then suggested without one (a newline).
    """
    from tracks.language.vocabulary import CharVocabulary

    command = f"python -m tracks.language sample {run.path}"
    try:
        known = not CharVocabulary.load(run.path / "vocab.json").unknown_characters(prompt)
    except (OSError, ValueError):
        known = False
    return f"{command} --prompt \"{prompt}\"" if known else command


def terminal_ending(run, results):
    """The lines a run ends with in the terminal: the results table, the best model, TensorBoard, the report."""
    best = results.best_model
    extra = ["losses in nats per character; val loss on the whole validation split, at the end"]
    if best:
        extra.append(f"best model: {best['id']} (val loss {best['val_loss']:.3f}); sample from it with "
                     f"{sample_command_line(run)}")
    return run_ending(run, *results_table(results), extra_lines=extra)


def draw_figures(results, ctx):
    """Every figure of a finished run's report, from what the run keeps (results.json, metrics/, dynamics/).

    Returns the (title, file) of summary.md's figures, those at initialisation
    (drawn when they were measured) included. scripts/replot.py calls it too.
    """
    run, config, banner, line = ctx.run, ctx.config, ctx.data.plot_banner, subtitle(ctx)
    figures = [("Validation loss", "loss_curves.png")]
    plot_loss_curves(run, config, results, run.path / "loss_curves.png", banner, line)
    figures += instrument_figures(run.path)
    if plot_stream(config, results, run.path / "stream.png", banner, line):
        figures.append(("The residual stream after training", "stream.png"))
    figures += plot_trained_instruments(config, results, run.path, banner, line)
    return figures


def report(results, ctx):
    """The figures, samples and summary.md of a finished run; returns the lines the run ends with."""
    figures = draw_figures(results, ctx)
    write_samples(ctx.run, ctx.config, results)
    write_summary(ctx.run, ctx.config, results, figures, ctx.data.banner)
    return terminal_ending(ctx.run, results)


def write_summary(run, config, results, figures, banner=None):
    table = markdown_table(*results_table(results))
    best = results.best_model
    lines = [
        f"# Language run: plain vs residual, Pre-LN vs Post-LN ({config.preset} preset)\n",
        banner_markdown(banner),
        f"Data: **{dataset_title(results.dataset)}**, seed {config.seed} (vocabulary of "
        f"{results.vocab_size} characters, {results.unknown_val_chars or 0} validation "
        "characters not in it). "
        f"Device: {results.device}, precision {results.precision}, "
        f"XLA {'on' if results.xla else 'off'}. {config.steps} steps of batch "
        f"{config.batch_size} x {config.sequence_length} characters, width {config.embed_dim}, "
        f"AdamW lr {config.learning_rate}.\n",
        "## Results\n",
        "Losses are in nats per character (cross-entropy); bits/char = nats / ln 2. "
        "Train loss is the last interval's running mean; val loss is measured at the end on the "
        "whole validation split.\n",
        table + "\n",
        (f"Best model: `{best['id']}` (val loss {best['val_loss']:.3f}), saved as `best_model.keras`; "
         f"sample from it with `{sample_command_line(run)}`.\n"
         if best else ""),
        "## What this run shows\n",
        "Each line is computed from this run's numbers and says whether the claim held "
        "(thresholds in `tracks/language/findings.py`).\n",
        "\n".join(finding_lines(language_findings(results))) + "\n",
        "## How to read it\n",
        *what_to_look_for(config.variants),
        "- **The residual stream** (stream.png, logit_lens.png): every sublayer reads the stream "
        "and adds its output to it (Elhage et al. 2021); the logit lens reads the stream at every "
        "depth through the model's own head.\n",
        "- Read the generated text in [samples.md](samples.md).\n",
        "## Instruments at initialisation\n",
        initialisation_table(results.initialisation or {}) + "\n",
        instrument_notes(results.initialisation or {}),
        dynamics_cost_line(results),
    ]
    for title, name in figures:
        lines.append(f"## {title}\n\n![{title}]({name})\n")
    (run.path / "summary.md").write_text("\n".join(lines))


SEED_METRICS = ("train_loss", "val_loss", "val_bpc")


def seeds_table(results):
    """(headers, rows) of a seeds run: each model's losses as mean +- std over the seeds."""
    def number(value):
        return format_value(value)

    rows = []
    for entry in sorted(results.models, key=lambda m: (m.depth, m.variant, m.warmup)):
        diverged = entry.diverged_seeds
        rows.append([
            entry.variant, entry.depth, entry.warmup, format_value(entry.params, "int"),
            *(spread_cell(getattr(entry, metric), entry.std(metric), number) for metric in SEED_METRICS),
            ", ".join(map(str, entry.seeds)),
            "diverged on seed " + ", ".join(map(str, diverged)) if diverged else "ok",
        ])
    return ["variant", "layers", "warmup", "parameters", "train loss", "val loss", "val bits/char", "seeds",
            "status"], rows


def seeds_report(seed_runs, ctx):
    """results.json, loss_curves.png (mean +- std bands) and summary.md of a `--seeds` run; its last lines."""
    run, config, banner, plot_banner = ctx.run, ctx.config, ctx.data.banner, ctx.data.plot_banner
    per_seed = [(seed, LanguageResults.from_json(child.read_results())) for seed, child in seed_runs]
    first = per_seed[0][1]
    results = write_seeds_results(run, "language", config, per_seed, SEED_METRICS,
                                  keys=("variant", "depth", "warmup"),
                                  extra={"vocab_size": first.vocab_size, "unigram_loss": first.unigram_loss})
    subtitle = (f"{dataset_title(first.dataset)}, seeds {','.join(map(str, config.seeds))}: "
                f"{config.steps} steps, width {config.embed_dim} ({config.preset} preset)")
    plot_loss_curves(run, config, results, run.path / "loss_curves.png", plot_banner, subtitle,
                     runs=[child for _, child in seed_runs])
    combined = combine_findings([(seed, language_findings(r)) for seed, r in per_seed])
    write_seeds_summary(
        run, title=f"Language run over {len(config.seeds)} seeds: plain vs residual, Pre-LN vs Post-LN "
                   f"({config.preset} preset)",
        banner=banner,
        description=(f"Data: **{dataset_title(first.dataset)}**, seeds "
                     f"{', '.join(map(str, config.seeds))}: each model trained once per seed (its "
                     f"initialisation, batches and samples). Device: {first.device}. {config.steps} "
                     f"steps of batch {config.batch_size} x {config.sequence_length} characters, width "
                     f"{config.embed_dim}, AdamW lr {config.learning_rate}. Losses in nats per character; "
                     "val loss on the whole validation split, at the end."),
        table=markdown_table(*seeds_table(results)), combined=combined, seeds=config.seeds,
        figures=[("Validation loss: mean ± std over the seeds", "loss_curves.png")],
    )
    return seeds_terminal_ending(run, results)


def seeds_terminal_ending(run, results):
    return run_ending(run, *seeds_table(results), extra_lines=[
        f"mean ± std over the seeds; each seed's own report and best model: {run.path}/seed-N/"])
