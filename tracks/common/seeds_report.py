"""What the seeds of a `--seeds` run say together: the spread, the findings' verdicts, the bands, summary.md.

From each seed's typed results (seeds.py trains them): per model the mean,
the standard deviation (n - 1 in the denominator) and the per-seed values
of the track's final numbers (`aggregate_models`); the curves as a mean
with a band of +- one standard deviation (`band_series`); every finding's
verdict under `SEED_RULE` (`combine_findings`); then results.json and
summary.md at the top of the run.
"""

import math

import numpy as np

from tracks.common.config import write_json
from tracks.common.results import SCHEMA

SEED_RULE = (
    "A finding holds across the seeds when it holds for every seed and its margin (by how much the "
    "claim is met on that seed, e.g. the deeper plain net's training error minus the shallower one's, "
    "less the 5-point threshold) has a mean over the seeds larger than its standard deviation across "
    "them (n - 1 in the denominator): the claim is met by more than the seeds move it. Margins are in the claim's own "
    "unit (a fraction of error, nats, a share, decades of a gain); one that a divergence decides is "
    "infinite. A finding without a margin holds when it holds for every seed. A seed on which the "
    "finding does not apply, or makes no claim (a net that never left chance), counts against it: "
    "the claim was not shown there."
)



def mean_std(values):
    """(mean, standard deviation with n - 1, count) of the finite values; (None, None, 0) for none."""
    finite = [float(value) for value in values if value is not None and math.isfinite(value)]
    if not finite:
        return None, None, 0
    std = float(np.std(finite, ddof=1)) if len(finite) > 1 else None
    return float(np.mean(finite)), std, len(finite)


def aggregate_models(per_seed, metrics, keys=("variant", "depth")):
    """One results entry per model id found in any seed: `metrics` as mean, `_std` and `_per_seed`.

    Args:
        per_seed: [(seed, RunResults)].
        metrics: the final numbers to aggregate ("train_error", ...).
        keys: fields copied from the first seed's entry (they do not change with the seed).
    """
    order, entries = [], {}
    for seed, results in per_seed:
        for entry in results.models:
            if entry.id not in entries:
                order.append(entry.id)
                entries[entry.id] = {"id": entry.id, **{key: getattr(entry, key) for key in keys},
                                     "params": entry.params, "seeds": [], "diverged_seeds": []}
            combined = entries[entry.id]
            combined["seeds"].append(seed)
            if entry.diverged:
                combined["diverged_seeds"].append(seed)
            for metric in metrics:
                combined.setdefault(f"{metric}_per_seed", []).append(getattr(entry, metric))
    for combined in entries.values():
        combined["diverged"] = bool(combined["diverged_seeds"])
        for metric in metrics:
            mean, std, _ = mean_std(combined[f"{metric}_per_seed"])
            combined[metric], combined[f"{metric}_std"] = mean, std
    return [entries[model_id] for model_id in order]


def combine_findings(per_seed_findings):
    """[(title, verdict, [(seed, Finding or None)], margin mean, margin std)] in the first seed's order.

    `verdict`: True / False under `SEED_RULE`, None for measurement-only findings.
    """
    titles = []
    for _, findings in per_seed_findings:
        for finding in findings:
            if finding is not None and finding.title not in titles:
                titles.append(finding.title)
    combined = []
    for title in titles:
        found = [(seed, next((f for f in findings if f is not None and f.title == title), None))
                 for seed, findings in per_seed_findings]
        present = [finding for _, finding in found if finding is not None]
        if all(finding.holds is None for finding in present):
            combined.append((title, None, found, None, None))
            continue
        every = len(present) == len(found) and all(finding.holds for finding in present)
        margins = [finding.margin for finding in present if finding.margin is not None]
        mean = std = None
        verdict = every
        if margins and len(margins) == len(present):
            if any(math.isinf(margin) for margin in margins):
                verdict = every and all(margin > 0 for margin in margins)
                mean = float("inf") if verdict else None
            else:
                mean, std, _ = mean_std(margins)
                verdict = every and std is not None and mean > std
        combined.append((title, verdict, found, mean, std))
    return combined


def combined_finding_lines(combined, number=None):
    """Markdown bullets: each finding's verdict across the seeds, its margins, and each seed's sentence."""
    number = number or (lambda margin: f"{margin:.3g}")
    lines = []
    for title, verdict, found, mean, std in combined:
        mark = "" if verdict is None else (" (holds across the seeds)" if verdict else
                                           " (does not hold across the seeds)")
        margins = [f.margin for _, f in found if f is not None and f.margin is not None]
        spread = ""
        if margins and verdict is not None:
            listed = ", ".join("inf" if math.isinf(m) else number(m) for m in margins)
            spread = f" Margins {listed}" + (
                f": mean {number(mean)} against a spread (std) of {number(std)}." if mean is not None
                and std is not None else ".")
        lines.append(f"- **{title}**{mark}.{spread}")
        for seed, finding in found:
            if finding is None:
                lines.append(f"  - seed {seed}: does not apply (no comparable models)")
            else:
                state = "" if finding.holds is None else (" (holds)" if finding.holds else " (does not hold)")
                lines.append(f"  - seed {seed}{state}: {finding.text}")
    return lines or ["- (no finding applies: the runs have no comparable models)"]


def mean_curve(series_per_seed):
    """(x, mean, std) over the x values every seed has; `series_per_seed` = [(x list, y list)].

    A seed whose value is not finite at some x (a diverged model) leaves
    that point out of the mean; std is None where fewer than two seeds remain.
    """
    common = sorted(set.intersection(*(set(x) for x, _ in series_per_seed))) if series_per_seed else []
    means, stds = [], []
    for point in common:
        values = [y[x.index(point)] for x, y in series_per_seed]
        mean, std, _ = mean_std(values)
        means.append(float("nan") if mean is None else mean)
        stds.append(float("nan") if std is None else std)
    return common, means, stds


def band_series(series_per_seed, label, legend, scale=1.0, dashed_per_seed=None):
    """A `plots.curves` series: the mean over the seeds in bold with a +- std band (and the dashed mean)."""
    x, mean, std = mean_curve(series_per_seed)
    series = {
        "label": label, "legend": legend, "x": x,
        "y": [scale * value for value in mean],
        "band": ([scale * (m - s) for m, s in zip(mean, std)], [scale * (m + s) for m, s in zip(mean, std)]),
    }
    if dashed_per_seed:
        dashed_x, dashed_mean, _ = mean_curve(dashed_per_seed)
        if dashed_x == x:
            series["dashed"] = [scale * value for value in dashed_mean]
    return series


def spread_cell(mean, std, kind_format):
    """'45.0% +- 1.2' style table cell: the mean, then the std in the same unit."""
    if mean is None:
        return "—"
    if std is None:
        return kind_format(mean)
    return f"{kind_format(mean)} ± {kind_format(std).rstrip('%')}"


def write_seeds_results(run, track, config, per_seed, metrics, keys, extra=None):
    """The top-level results.json of a seeds run; returns it (a `RunResults` of `SeedSpread`s)."""
    first = per_seed[0][1]
    recorded = first.to_json()
    results = {
        "schema": SCHEMA, "track": track, "preset": config.preset, "seeds": list(config.seeds),
        "dataset": first.dataset, "dataset_title": first.dataset_title, "banner": first.banner,
        **{key: recorded[key] for key in ("device", "precision", "xla", "strategy", "train_images")
           if key in recorded},
        "seed_runs": {str(seed): f"seed-{seed}" for seed, _ in per_seed},
        "models": aggregate_models(per_seed, metrics, keys),
        **(extra or {}),
    }
    write_json(run.results_path, results)
    return type(first).from_json(results)


def write_seeds_summary(run, *, title, banner, description, table, combined, figures, seeds, number=None):
    """The top-level summary.md of a seeds run: the spread table, the findings under `SEED_RULE`, the figures."""
    from tracks.common.report import banner_markdown

    lines = [
        f"# {title}\n",
        banner_markdown(banner),
        description + "\n",
        "Each seed's run is complete on its own: "
        + ", ".join(f"[seed {seed}](seed-{seed}/summary.md)" for seed in seeds)
        + " (its figures, instruments, lesions and dynamics).\n",
        "## Results: mean ± standard deviation over the seeds\n",
        table + "\n",
        "## What the seeds show\n",
        SEED_RULE + "\n",
        "\n".join(combined_finding_lines(combined, number)) + "\n",
    ]
    for figure_title, name in figures:
        lines.append(f"## {figure_title}\n\n![{figure_title}]({name})\n")
    (run.path / "summary.md").write_text("\n".join(lines))


__all__ = ["SEED_RULE", "aggregate_models", "band_series", "combine_findings", "combined_finding_lines", "mean_curve",
           "mean_std", "spread_cell", "write_seeds_results", "write_seeds_summary"]
