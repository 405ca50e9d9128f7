"""The language run's report.

- loss_curves.png: validation loss against training step, one panel per
  variant, depth by colour (dashed: with warmup, when both are compared).
- gradient_flow.png, activation_growth.png, jacobian.png: the instruments
  at initialisation (tracks/common/instruments.py).
- stream.png: what each trained model's attention and feed-forward
  sublayers write into the residual stream, relative to the stream.
- samples.md: the same prompt continued by every model.
- summary.md: the results table, the figures and how to read them.
"""

from residual_keras import plots
from tracks.common.instruments import INSTRUMENT_NOTES, initialisation_table
from tracks.common.report import (
    banner_markdown,
    deepest_with,
    depth_colour,
    format_value,
    markdown_table,
    new_figure,
    save_figure,
    title_with_banner,
)
from tracks.common.training import read_metrics_rows
from tracks.language.experiment import grid


def plot_loss_curves(run, config, results, path, banner=None):
    figure, axes = new_figure(len(config.variants))
    depths = sorted(config.depths)
    compare_warmup = len(config.warmup_steps) > 1
    for axis, variant in zip(axes, config.variants):
        for spec in grid(config):
            if spec.variant != variant:
                continue
            rows = read_metrics_rows(run.metrics_path(spec.id))
            if not rows:
                continue
            steps = [(row["epoch"] + 1) * config.eval_interval for row in rows]
            entry = next((m for m in results["models"] if m["id"] == spec.id), {})
            label = f"{spec.depth} layers"
            if compare_warmup:
                label += f", warmup {spec.warmup}"
            if entry.get("diverged"):
                label += " (diverged)"
            axis.plot(
                steps, [row.get("val_loss", float("nan")) for row in rows],
                color=depth_colour(depths.index(spec.depth)), linewidth=2,
                linestyle="--" if compare_warmup and spec.warmup else "-", marker="o", markersize=3,
                label=label,
            )
        axis.set_title(f"{variant}")
        axis.set_xlabel("training step")
        axis.set_ylabel("validation loss (nats/char)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    bottom = min(a.get_ylim()[0] for a in axes)
    top = min(max(a.get_ylim()[1] for a in axes), 5.0)
    top += 0.05 * (top - bottom)  # a curve at the top stays visible above the frame
    for axis in axes:
        axis.set_ylim(bottom, top)
    figure.suptitle(title_with_banner(
        f"Character Transformers on {results.get('dataset', config.data)}: validation loss", banner))
    return save_figure(figure, path)


def plot_stream(config, results, path, banner=None):
    """stream.png for the deepest depth's trained models; False when there is none."""
    depth, entries = deepest_with(config, results, "stream")
    if not entries:
        return False
    plots.stream([m["stream"] for m in entries], [m["id"] for m in entries], path=path, banner=banner,
                 title=f"What each sublayer writes into the stream, relative to it (trained, {depth} layers)")
    return True


def write_samples(run, config, results):
    lines = [f"# Samples: every model continues the prompt {config.prompt!r}\n",
             f"{config.sample_chars} characters, temperature 0.8, seed {config.seed}.\n"]
    for entry in results["models"]:
        lines.append(f"## {entry['id']} (val loss {format_value(entry.get('val_loss'))})\n")
        if entry.get("sample") is None:
            lines.append("_no sample: the model diverged_\n")
        else:
            lines.append("```text\n" + config.prompt + entry["sample"] + "\n```\n")
    (run.path / "samples.md").write_text("\n".join(lines))


LOOK_FOR = {
    "plain": "- **plain** vs **pre**: without the residual additions a deep stack trains far worse "
             "(a plain Pre-LN stack can stall near the loss of guessing character frequencies); "
             "with them, depth helps.\n",
    "post": "- **post** vs **pre**: Post-LN normalises the stream after every addition, which gives "
            "large gradients near the output at initialisation; without warmup it is the one that "
            "can struggle at large learning rates and depths (Xiong et al. 2020). Compare "
            "`--warmup-steps 0,100`.\n",
    "rezero": "- **rezero**: no LayerNorm at all, every block starts as the identity (alpha = 0) "
              "and trains.\n",
}


def what_to_look_for(variants):
    return [text for variant, text in LOOK_FOR.items() if variant in variants]


def findings(results):
    """What this run shows, computed from its results (final validation losses)."""
    losses = {}
    for entry in results["models"]:
        if entry.get("val_loss") is not None:
            key = (entry["depth"], entry["warmup"])
            losses.setdefault(key, {})[entry["variant"]] = entry["val_loss"]
    lines = []
    for (depth, warmup), by_variant in sorted(losses.items()):
        ranked = ", ".join(f"{variant} {loss:.3f}" for variant, loss in
                           sorted(by_variant.items(), key=lambda item: item[1]))
        lines.append(f"- {depth} layers, warmup {warmup}: validation loss {ranked} (best first).")
    for entry in results["models"]:
        if entry.get("diverged"):
            lines.append(f"- {entry['id']} diverged by step {entry['diverged_step']}.")
    return lines


def write_summary(run, config, results, figures, banner=None):
    rows = []
    for entry in sorted(results["models"], key=lambda m: (m["depth"], m["variant"], m["warmup"])):
        status = f"diverged by step {entry['diverged_step']}" if entry.get("diverged") else "ok"
        rows.append([
            entry["variant"], entry["depth"], entry["warmup"], format_value(entry["params"], "int"),
            format_value(entry.get("train_loss")), format_value(entry.get("val_loss")),
            format_value(entry.get("val_bpc")), status, format_value(entry.get("seconds"), "seconds"),
            format_value(entry.get("tokens_per_second"), "int"),
        ])
    table = markdown_table(
        ["variant", "layers", "warmup", "parameters", "train loss", "val loss", "val bits/char",
         "status", "time", "tokens/s"], rows)
    best = results.get("best_model")
    lines = [
        f"# Language run: plain vs residual, Pre-LN vs Post-LN ({config.preset} preset)\n",
        banner_markdown(banner),
        f"Data: **{results.get('dataset')}** (vocabulary of {results.get('vocab_size')} characters, "
        f"{results.get('unknown_val_chars', 0)} validation characters not in it). "
        f"Device: {results.get('device')}, precision {results.get('precision')}, "
        f"XLA {'on' if results.get('xla') else 'off'}. {config.steps} steps of batch "
        f"{config.batch_size} x {config.sequence_length} characters, width {config.embed_dim}, "
        f"AdamW lr {config.learning_rate}.\n",
        "## Results\n",
        "Losses are in nats per character (cross-entropy); bits/char = nats / ln 2. "
        "Train loss is the last interval's running mean; val loss is measured at the end on the "
        "whole validation split.\n",
        table + "\n",
        (f"Best model: `{best['id']}` (val loss {best['val_loss']:.3f}), saved as `best_model.keras`; "
         f"sample from it with `python -m tracks.language sample {run.path} --prompt \"ROMEO:\"`.\n"
         if best else ""),
        "## What this run shows\n",
        "\n".join(findings(results)) + "\n",
        "## What to look for\n",
        *what_to_look_for(config.variants),
        "- **The residual stream** (stream.png): in a trained residual model each sublayer "
        "adds an update to a stream that carries everything before it.\n",
        "- Read the generated text in [samples.md](samples.md).\n",
        "## Instruments at initialisation\n",
        initialisation_table(results.get("initialisation", {})) + "\n",
        INSTRUMENT_NOTES,
    ]
    for title, name in figures:
        lines.append(f"## {title}\n\n![{title}]({name})\n")
    (run.path / "summary.md").write_text("\n".join(lines))
