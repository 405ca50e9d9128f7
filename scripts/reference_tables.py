"""The generated tables of the pages, built from the committed reference runs (scripts/reference_runs.py reads them).

`TABLES` maps a table's name, as a page marks it (`<!-- table: NAME -->`), to
the function that writes it; scripts/doc_numbers.py checks each page's table
against it and rewrites it with `--write`.
"""

import json
import statistics

from scripts.reference_runs import REFERENCE, SourceError, formatted, lookup, results


def _model(run, model_id, key, style):
    try:
        return formatted(lookup(run, f"models.{model_id}.{key}"), style)
    except SourceError:
        return "—"


def _band(run, figure, style):
    path = REFERENCE / run / "bands.json"
    bands = json.loads(path.read_text()).get("bands", {}) if path.is_file() else {}
    if figure not in bands:
        return "—"
    low, high = bands[figure]
    if style == "%":
        return f"{100 * low:.0f}-{100 * high:.0f}"
    return f"{low:.2f}-{high:.2f}"


def vision_table(run):
    rows = ["| model | blocks | parameters | training error (%) | band | test error (%) | band | time (s) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for entry in sorted(results(run).models, key=lambda m: (m.variant, m.depth)):
        model_id = entry.id
        rows.append(f"| {model_id} | {(entry.depth - 2) // 2} | {_model(run, model_id, 'params', 'int')} | "
                    f"{_model(run, model_id, 'train_error', '%')} | {_band(run, f'{model_id} training error', '%')} | "
                    f"{_model(run, model_id, 'test_error', '%')} | {_band(run, f'{model_id} test error', '%')} | "
                    f"{_model(run, model_id, 'seconds', 's')} |")
    return "\n".join(rows)


def language_table(run):
    rows = ["| model | final validation loss (nats) | band | training loss | time (s) |",
            "| --- | --- | --- | --- | --- |"]
    for entry in sorted(results(run).models, key=lambda m: m.id):
        model_id = entry.id
        rows.append(f"| {model_id} | {_model(run, model_id, 'val_loss', '.3f')} | "
                    f"{_band(run, f'{model_id} validation loss', '.2f')} | "
                    f"{_model(run, model_id, 'train_loss', '.3f')} | {_model(run, model_id, 'seconds', 's')} |")
    return "\n".join(rows)


def readme_results(_=None):
    rows = ["| reference run (quick preset, seed 0) | plain, 8 → 32 layers | residual, 8 → 32 layers |",
            "| --- | --- | --- |"]
    trained = json.loads((REFERENCE / "vision-cifar10-s0" / "config.json").read_text())["train_size"]
    for run, label in (("vision-cifar10-s0", f"CIFAR-10 ({trained:,}-image subset)"),
                       ("vision-offline-s0", "synthetic images (the offline default)")):
        cells = []
        for variant in ("plain", "residual"):
            shallow = _model(run, f"{variant}-8", "train_error", "%")
            deep = _model(run, f"{variant}-32", "train_error", "%")
            cells.append(f"{shallow}% → **{deep}%**")
        rows.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(rows)


def reference_index(_=None):
    rows = ["| run | data | command | time | summary |", "| --- | --- | --- | --- | --- |"]
    for folder in sorted(path for path in REFERENCE.iterdir() if (path / "reference.json").is_file()):
        about = json.loads((folder / "reference.json").read_text())
        # A run made beside other work says so in its note: its wall time is then no timing.
        duration = f"{about['seconds'] / 60:.1f} min" + (" (not quiet: see its reference.json)" if "no timing" in
                                                           about.get("note", "") else "")
        rows.append(f"| [{folder.name}]({folder.name}/summary.md) | {about['data']} | `{about['command']}` | "
                    f"{duration} | [summary.md]({folder.name}/summary.md) |")
    return "\n".join(rows)


def tracks_table(_=None):
    """The tracks of tracks/registry.py: each one's command, files and first docstring line."""
    from tracks.__main__ import summary
    from tracks.registry import TRACKS

    rows = ["| track | command | its folder | what it shows |", "| --- | --- | --- | --- |"]
    for name in TRACKS:
        rows.append(f"| {name} | `python -m tracks.{name}` | `tracks/{name}/` | {summary(name)} |")
    return "\n".join(rows)


def findings_list(run):
    """The reference run's findings, as its summary.md gives them (the track's own finding functions)."""
    from tracks.registry import track

    data = results(run)
    return "\n".join(finding.markdown() for finding in track(data.track).parts.findings(data) if finding)


def initialisation_table(run):
    rows = ["| model | gradient gain (first block / output) | ‖d x_L / d x_0‖ | stream RMS, x_L / x_0 |",
            "| --- | --- | --- | --- |"]
    for model_id, values in (results(run).initialisation or {}).items():
        jacobian = formatted(values.get("jacobian_norm"), ".3g")
        if values.get("jacobian_converged") is False:
            jacobian = f"≥ {jacobian} (lower bound, {values.get('jacobian_iterations')} power iterations)"
        rows.append(f"| {model_id} | {formatted(values.get('gradient_gain'), '.3g')} | {jacobian} | "
                    f"{formatted(values.get('stream_growth'), '.3g')} |")
    return "\n".join(rows)


def _percent(value):
    return "—" if value is None else f"{100 * value:.1f}"


def vision_lesions(runs):
    rows = ["| model | data | intact | median, one block removed | worst | blocks removable |",
            "| --- | --- | --- | --- | --- | --- |"]
    for run, label in runs:
        for entry in sorted(results(run).models, key=lambda m: (m.variant, m.depth)):
            study = entry.lesion
            if not study:
                continue
            removable = sorted(value for value in study["lesioned"] if value is not None)
            median = _median(removable)
            rows.append(f"| {entry.id} | {label} | {_percent(study['intact'])} | {_percent(median)} | "
                        f"{_percent(removable[0] if removable else None)} | {len(removable)} of "
                        f"{len(study['lesioned'])} |")
    return "\n".join(rows)


def vision_deletions(runs, ks=(1, 2, 4, 8)):
    rows = ["| model | data | intact | " + " | ".join(f"k = {k}" for k in ks) + " | swaps: mean (range) |",
            "| --- | --- | --- | " + " | ".join("---" for _ in ks) + " | --- |"]
    for run, label in runs:
        for entry in sorted(results(run).models, key=lambda m: (m.variant, m.depth)):
            study = (entry.ensemble or {}).get("deletion")
            if not study:
                continue
            by_k = dict(zip(study["num_removed"], study["mean"]))
            swaps = entry.ensemble.get("swaps") or {}
            swapped = swaps.get("swapped") or []
            swap_text = (f"{_percent(sum(swapped) / len(swapped))} ({_percent(min(swapped))}-"
                         f"{_percent(max(swapped))})") if swapped else "—"
            rows.append(f"| {entry.id} | {label} | {_percent(study['intact'])} | "
                        + " | ".join(_percent(by_k.get(k)) for k in ks) + f" | {swap_text} |")
    return "\n".join(rows)


def vision_paths(runs):
    """Veit et al.'s path lengths of every trained residual net: typical, gradient-weighted, the 90% range."""
    rows = ["| model | data | blocks | typical path (n/2) | gradient-weighted mean | 90% of the gradient through |",
            "| --- | --- | --- | --- | --- | --- |"]
    for run, label in runs:
        for entry in sorted(results(run).models, key=lambda m: (m.variant, m.depth)):
            paths = (entry.ensemble or {}).get("paths")
            if not paths:
                continue
            lengths, share = paths["lengths"], paths["gradient_share"]
            weighted = sum(length * part for length, part in zip(lengths, share))
            cumulative, total = [], 0.0
            for part in share:
                total += part
                cumulative.append(total)
            low = next(length for length, value in zip(lengths, cumulative) if value >= 0.05)
            high = next(length for length, value in zip(lengths, cumulative) if value >= 0.95)
            rows.append(f"| {entry.id} | {label} | {lengths[-1]} | {lengths[-1] / 2:.1f} | {weighted:.1f} | "
                        f"{low}-{high} branches |")
    return "\n".join(rows)


def _median(values):
    """The median of the numbers given (None left out), as the findings compute it: the mean of the two
    middle values of an even count."""
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


def language_initialisation(run):
    rows = ["| model | gradient gain (first block / output) | ‖d x_L / d x_0‖ | stream RMS, x_L / x_0 | "
            "weight gradient, first block | last block | mean per block |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for model_id, values in (results(run).initialisation or {}).items():
        norms = values.get("block_weight_grad_norms") or []
        jacobian = formatted(values.get("jacobian_norm"), ".3g")
        if values.get("jacobian_converged") is False:
            jacobian = f"≥ {jacobian}"
        mean = sum(norms) / len(norms) if norms else None
        rows.append(f"| {model_id} | {formatted(values.get('gradient_gain'), '.3g')} | {jacobian} | "
                    f"{formatted(values.get('stream_growth'), '.3g')} | "
                    f"{formatted(norms[0] if norms else None, '.3g')} | "
                    f"{formatted(norms[-1] if norms else None, '.3g')} | {formatted(mean, '.3g')} |")
    return "\n".join(rows)


def _dynamics_rows(run, model_id):
    """The rows of a reference run's committed dynamics CSV for one model ([] where it has none)."""
    import csv

    path = REFERENCE / run / "dynamics" / f"{model_id}.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _dynamics(run, model_id):
    """Per record (epoch): (gain, mean branch ratio over the blocks), from the committed dynamics CSV."""
    by_epoch = {}
    for row in _dynamics_rows(run, model_id):
        entry = by_epoch.setdefault(int(row["epoch"]), {"gain": float(row["gradient_gain"]), "ratios": []})
        if row["branch_ratio"]:
            entry["ratios"].append(float(row["branch_ratio"]))
    return [(by_epoch[epoch]["gain"], sum(by_epoch[epoch]["ratios"]) / len(by_epoch[epoch]["ratios"])
             if by_epoch[epoch]["ratios"] else None) for epoch in sorted(by_epoch)]


def _updates(run, model_id):
    """Per record (epoch) after the first: {block number (from 1): ||dW|| / ||W||}, from the dynamics CSV."""
    by_epoch = {}
    for row in _dynamics_rows(run, model_id):
        if row["update_ratio"]:
            by_epoch.setdefault(int(row["epoch"]), {})[int(row["block"])] = float(row["update_ratio"])
    return [by_epoch[epoch] for epoch in sorted(by_epoch)]


def vision_dynamics(runs):
    """dynamics.png in numbers: the gain, the branches' size and the weights' moves of the trained nets."""
    rows = ["| model | data | gradient gain before training | after epoch 1 | at the end | "
            "mean branch / stream before | at the end | block that moved most in epoch 1 (‖dW‖ / ‖W‖) | "
            "last block, epoch 1 | mean over the blocks, last epoch |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run, label in runs:
        for entry in sorted(results(run).models, key=lambda m: (m.variant, m.depth)):
            records, updates = _dynamics(run, entry.id), _updates(run, entry.id)
            if len(records) < 2 or not updates:
                continue
            first, last = updates[0], updates[-1]
            most = max(first, key=first.get)
            rows.append(f"| {entry.id} | {label} | {formatted(records[0][0], '.3g')} | "
                        f"{formatted(records[1][0], '.3g')} | {formatted(records[-1][0], '.3g')} | "
                        f"{formatted(records[0][1], '.2f')} | {formatted(records[-1][1], '.2f')} | "
                        f"block {most} of {len(first)} ({formatted(first[most], '.3g')}) | "
                        f"{formatted(first[max(first)], '.3g')} | "
                        f"{formatted(sum(last.values()) / len(last), '.3g')} |")
    return "\n".join(rows)


def language_dynamics(run):
    rows = ["| model | gradient gain before training | after the first interval | at the end | "
            "mean branch / stream before | at the end |", "| --- | --- | --- | --- | --- | --- |"]
    for entry in sorted(results(run).models, key=lambda m: m.id):
        records = _dynamics(run, entry.id)
        if len(records) < 2:
            continue
        rows.append(f"| {entry.id} | {formatted(records[0][0], '.3g')} | {formatted(records[1][0], '.3g')} | "
                    f"{formatted(records[-1][0], '.3g')} | {formatted(records[0][1], '.2f')} | "
                    f"{formatted(records[-1][1], '.2f')} |")
    return "\n".join(rows)


def language_trained(run):
    rows = ["| model | stream = x_0 + sum of the writes? (relative error) | intact loss | one block removed: median | "
            "worst | one attention removed: median | one feed-forward removed: median |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for entry in sorted(results(run).models, key=lambda m: m.id):
        lesion, sublayers = entry.lesion, entry.sublayers
        if not lesion:
            continue
        worst = max(value for value in lesion["lesioned"] if value is not None)
        rows.append(f"| {entry.id} | {formatted((entry.decomposition or {}).get('relative_error'), '.2g')} | "
                    f"{formatted(lesion['intact'], '.3f')} | {formatted(_median(lesion['lesioned']), '.3f')} | "
                    f"{formatted(worst, '.3f')} | {formatted(_median(sublayers.get('attention', [])), '.3f')} | "
                    f"{formatted(_median(sublayers.get('feedforward', [])), '.3f')} |")
    return "\n".join(rows)


def language_logit_lens(run):
    entries = [m for m in sorted(results(run).models, key=lambda m: m.id) if m.logit_lens]
    if not entries:
        return ""
    depth = len(entries[0].logit_lens["loss"]) - 1
    rows = ["| model | embeddings | " + " | ".join(str(d) for d in range(1, depth + 1)) + " (output) |",
            "| --- | --- | " + " | ".join("---" for _ in range(depth)) + " |"]
    for entry in entries:
        rows.append(f"| {entry.id} | " + " | ".join(formatted(value, ".2f") for value in entry.logit_lens["loss"])
                    + " |")
    return "\n".join(rows)


def language_deletions(run):
    entries = [m for m in sorted(results(run).models, key=lambda m: m.id) if m.deletion]
    if not entries:
        return ""
    ks = entries[0].deletion["num_removed"]
    rows = ["| model | intact | " + " | ".join(f"k = {k}" for k in ks) + " |",
            "| --- | --- | " + " | ".join("---" for _ in ks) + " |"]
    for entry in entries:
        rows.append(f"| {entry.id} | {formatted(entry.deletion['intact'], '.2f')} | "
                    + " | ".join(formatted(value, ".2f") for value in entry.deletion["mean"]) + " |")
    return "\n".join(rows)


VISION_RUNS = (("vision-cifar10-s0", "CIFAR-10"), ("vision-offline-s0", "synthetic"))

TABLES = {
    "readme-results": readme_results,
    "reference-index": reference_index,
    "tracks": tracks_table,
    "vision-expected-cifar10": lambda _: vision_table("vision-cifar10-s0"),
    "vision-expected-offline": lambda _: vision_table("vision-offline-s0"),
    "language-expected-tinyshakespeare": lambda _: language_table("language-tinyshakespeare-s0"),
    "language-expected-offline": lambda _: language_table("language-offline-s0"),
    "vision-findings-cifar10": lambda _: findings_list("vision-cifar10-s0"),
    "vision-findings-offline": lambda _: findings_list("vision-offline-s0"),
    "language-findings-tinyshakespeare": lambda _: findings_list("language-tinyshakespeare-s0"),
    "language-findings-offline": lambda _: findings_list("language-offline-s0"),
    "vision-initialisation-cifar10": lambda _: initialisation_table("vision-cifar10-s0"),
    "vision-diagnose": lambda _: initialisation_table("vision-diagnose-cifar10-s0"),
    "vision-lesions": lambda _: vision_lesions(VISION_RUNS),
    "vision-deletions": lambda _: vision_deletions(VISION_RUNS),
    "vision-paths": lambda _: vision_paths(VISION_RUNS),
    "vision-dynamics": lambda _: vision_dynamics(VISION_RUNS),
    "language-initialisation": lambda _: language_initialisation("language-tinyshakespeare-s0"),
    "language-initialisation-offline": lambda _: language_initialisation("language-offline-s0"),
    "language-dynamics": lambda _: language_dynamics("language-tinyshakespeare-s0"),
    "language-dynamics-offline": lambda _: language_dynamics("language-offline-s0"),
    "language-trained": lambda _: language_trained("language-tinyshakespeare-s0"),
    "language-trained-offline": lambda _: language_trained("language-offline-s0"),
    "language-logit-lens": lambda _: language_logit_lens("language-tinyshakespeare-s0"),
    "language-deletions": lambda _: language_deletions("language-tinyshakespeare-s0"),
    "language-collapse": lambda _: initialisation_table("language-collapse-s0"),
    "language-collapse-eps12": lambda _: initialisation_table("language-collapse-eps12-s0"),
}
