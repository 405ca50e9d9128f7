"""What a vision run shows, computed from its results (see tracks/common/findings.py).

Thresholds, stated once:
- degradation: the deeper plain net's final training error is at least
  `DEGRADATION_POINTS` higher than the shallower one's (He et al.'s Figure 6, left);
- the deeper residual net's final training error is at most the shallower
  one's (Figure 6, right);
- the shortcut's benefit: plain minus residual at the deepest depth is at
  least `DEGRADATION_POINTS`;
- Veit et al.: with one block removed, a residual net keeps at least
  `KEEPS_SHARE` of its accuracy above chance ("barely changes"); removing
  blocks hurts the plain twin more at every k;
- short paths: the gradient-weighted mean path length is below the mean
  path length n/2;
- the loss landscape (Li et al. 2018): the residual net's plane is the
  smoother one, a smaller share of it non-convex than its plain twin's.
"""

import numpy as np

from tracks.common.findings import Finding, depth_scaling, diverged_models, entries_by, percent, scientific
from tracks.vision.variants import PLAIN_VARIANTS, VARIANTS

DEGRADATION_POINTS = 0.05
KEEPS_SHARE = 0.8
# The plain twin each residual variant is compared with (variants.py).
PLAIN_TWIN = {variant.name: variant.plain_twin for variant in VARIANTS.values() if variant.plain_twin}


def _shallow_deep(by_depth):
    return min(by_depth), max(by_depth)


def degradation(results, variant="plain"):
    """He et al.'s degradation problem: the deeper plain net trains worse."""
    errors = entries_by(results, "train_error", variant=variant)
    if len(errors) < 2:
        return None
    shallow, deep = _shallow_deep(errors)
    gap = errors[deep] - errors[shallow]
    holds = gap >= DEGRADATION_POINTS
    verdict = ("the deeper plain net fits its own training data worse: the degradation problem"
               if holds else f"less than the {100 * DEGRADATION_POINTS:.0f} points that count as degradation here")
    return Finding(
        f"Degradation ({variant})", holds,
        f"final training error {percent(errors[shallow])} at {shallow} layers, {percent(errors[deep])} at "
        f"{deep} layers ({100 * gap:+.1f} points): {verdict}.",
    )


def deeper_residual_trains_better(results, variant="residual"):
    """He et al.'s Figure 6, right: the deeper residual net reaches a lower training error."""
    errors = entries_by(results, "train_error", variant=variant)
    if len(errors) < 2:
        return None
    shallow, deep = _shallow_deep(errors)
    holds = errors[deep] <= errors[shallow]
    verdict = ("the deeper residual net trains at least as well" if holds else
               "the deeper residual net trains worse in this run (in docs/experiments/vision.md's sweep a "
               "deep residual net trained without learning-rate warm-up stalled in its first steps: "
               "compare --warmup-steps, and see whether the deep net's first epochs left chance)")
    return Finding(
        f"Deeper {variant} nets", holds,
        f"final training error {percent(errors[shallow])} at {shallow} layers, {percent(errors[deep])} at "
        f"{deep} layers: {verdict}.",
    )


def shortcut_benefit(results, variant="residual"):
    """Plain minus residual training error at the deepest depth both reached."""
    plain = PLAIN_TWIN.get(variant)
    errors = entries_by(results, "train_error", variant=variant)
    plain_errors = entries_by(results, "train_error", variant=plain)
    common = sorted(set(errors) & set(plain_errors))
    if not common:
        return None
    gaps = {depth: plain_errors[depth] - errors[depth] for depth in common}
    deep = common[-1]
    holds = gaps[deep] >= DEGRADATION_POINTS
    listed = ", ".join(f"{100 * gaps[d]:+.1f} points at {d} layers" for d in common)
    return Finding(
        f"The shortcut ({plain} minus {variant})", holds,
        f"training error {listed}" + (
            "; the shortcut's advantage is largest where the nets are deepest." if len(common) > 1 and
            gaps[deep] == max(gaps.values()) else "."),
    )


def gradient_at_initialisation(results, variant="residual"):
    """Gradient gains at initialisation of the deepest plain and residual nets (nearer 1 is better)."""
    plain = PLAIN_TWIN.get(variant)
    init = results.get("initialisation", {})
    gains = {}
    for label, values in init.items():
        name, _, depth = label.rpartition("-")
        if name in (variant, plain) and values.get("gradient_gain"):
            gains[(name, int(depth))] = values["gradient_gain"]
    depths = [depth for (name, depth) in gains if name == variant and (plain, depth) in gains]
    if not depths:
        return None
    deep = max(depths)
    ours, theirs = gains[(variant, deep)], gains[(plain, deep)]
    holds = abs(np.log10(ours)) < abs(np.log10(theirs))
    return Finding(
        "Gradient at initialisation", holds,
        f"the gradient's gain from the output back to the first block is {scientific(ours)} for "
        f"{variant}-{deep} and {scientific(theirs)} for {plain}-{deep} (1 = the gradient arrives unchanged); "
        + ("the residual net's is nearer 1." if holds else
           "the plain net's is nearer 1 here, so gradient size at initialisation does not explain "
           "this run's degradation (with BatchNorm, a plain net's gradient is rescaled at every layer)."),
    )


def _deepest_study(results, variant, key):
    entries = [m for m in results.get("models", []) if m.get("variant") == variant and (m.get("ensemble") or {}).get(key)]
    if not entries:
        return None, None
    entry = max(entries, key=lambda m: m["depth"])
    return entry, entry["ensemble"][key]


def _kept(accuracy, intact, chance):
    """Share of the intact accuracy above chance that is left."""
    return (accuracy - chance) / max(intact - chance, 1e-9)


def one_block_barely_matters(results, variant="residual"):
    """Veit et al.: removing one block of a trained residual net barely changes its accuracy."""
    entries = [m for m in results.get("models", []) if m.get("variant") == variant and m.get("lesion")]
    if not entries:
        return None
    entry = max(entries, key=lambda m: m["depth"])
    study, chance = entry["lesion"], 1.0 / entry.get("num_classes", 10)
    removable = [value for value in study["lesioned"] if value is not None]
    if not removable:
        return None
    median = float(np.median(removable))
    kept = _kept(median, study["intact"], chance)
    holds = kept >= KEEPS_SHARE
    return Finding(
        f"One block removed ({entry['id']})", holds,
        f"test accuracy {percent(study['intact'])} intact; with one block removed median {percent(median)}, "
        f"worst {percent(min(removable))}: the median keeps {100 * kept:.0f}% of the accuracy above chance "
        + (f"(at least {100 * KEEPS_SHARE:.0f}%: barely changed, as Veit et al. found)." if holds else
           f"(below {100 * KEEPS_SHARE:.0f}%: this net depends on single blocks more than Veit et al.'s "
           "fully trained ResNet-110 did)."),
    )


def deletion_contrast(results, variant="residual", ks=(1, 2, 4, 8)):
    """Veit et al.'s k-block deletion: the residual net degrades more gracefully than its plain twin."""
    entry, ours = _deepest_study(results, variant, "deletion")
    plain_entry, theirs = _deepest_study(results, PLAIN_TWIN.get(variant), "deletion")
    if ours is None or theirs is None or entry["depth"] != plain_entry["depth"]:
        return None
    chance = 1.0 / entry.get("num_classes", 10)
    shown = [k for k in ks if k in ours["num_removed"] and k in theirs["num_removed"]]
    if not shown:
        return None

    def at(study, k):
        return study["mean"][study["num_removed"].index(k)]

    holds = all(_kept(at(ours, k), ours["intact"], chance) > _kept(at(theirs, k), theirs["intact"], chance)
                for k in shown)
    def row(study, label):
        values = ", ".join(f"{percent(at(study, k))}" for k in shown)
        return f"{label} {values} (intact {percent(study['intact'])})"
    return Finding(
        f"Removing k blocks at once (depth {entry['depth']})", holds,
        f"test accuracy with k = {', '.join(map(str, shown))} of {len(ours['candidates'])} same-shape blocks "
        f"removed (mean of the draws): {row(ours, entry['id'])}; {row(theirs, plain_entry['id'])}. "
        + ("The residual net keeps more of its accuracy at every k: it degrades smoothly, the plain net breaks."
           if holds else "The residual net does not keep more of its accuracy at every k here."),
    )


def short_paths(results, variant="residual"):
    """Veit et al.: the gradient comes mostly from paths shorter than the typical path."""
    entry, paths = _deepest_study(results, variant, "paths")
    if paths is None:
        return None
    lengths = np.asarray(paths["lengths"], dtype=float)
    share = np.asarray(paths["gradient_share"], dtype=float)
    n = int(lengths[-1])
    weighted = float((lengths * share).sum())
    cumulative = np.cumsum(share)
    low, high = int(lengths[np.searchsorted(cumulative, 0.05)]), int(lengths[np.searchsorted(cumulative, 0.95)])
    holds = weighted < n / 2
    return Finding(
        f"Which paths carry the gradient ({entry['id']})", holds,
        f"of its {n} blocks a typical path passes {n / 2:.1f} branches; the gradient-weighted mean is "
        f"{weighted:.1f}, and 90% of the gradient comes through paths of {low}-{high} branches"
        + (": the effective paths are shorter than the network is deep." if holds else "."),
    )


def smoother_landscape(results, variant="residual"):
    """Li et al. 2018: around its trained weights, the residual net's loss is smoother than its plain twin's."""
    plain = PLAIN_TWIN.get(variant)
    entry, ours = _deepest_landscape(results, variant)
    plain_entry, theirs = _deepest_landscape(results, plain)
    if ours is None or theirs is None or entry["depth"] != plain_entry["depth"]:
        return None
    shares = ours.get("nonconvex_share"), theirs.get("nonconvex_share")
    if any(share is None for share in shares):
        return None

    def described(model_id, grid):
        return (f"{model_id} loss {scientific(grid.get('center_loss'))} at its weights, "
                f"{scientific(grid.get('edge_rise'))} higher at the edge on average, "
                f"curvature {scientific(grid.get('curvature'))}, {100 * grid['nonconvex_share']:.0f}% of the plane "
                "non-convex")

    holds = shares[0] < shares[1]
    return Finding(
        f"The loss around the trained weights (depth {entry['depth']})", holds,
        f"{described(entry['id'], ours)}; {described(plain_entry['id'], theirs)}: "
        + ("the residual net's plane is the more convex one." if holds else
           "the residual net's plane is not the more convex one here."),
    )


def _deepest_landscape(results, variant):
    entries = [m for m in results.get("models", []) if m.get("variant") == variant and m.get("landscape")]
    if not entries:
        return None, None
    entry = max(entries, key=lambda m: m["depth"])
    return entry, entry["landscape"]


def vision_findings(results, variants):
    """Every finding that applies to a run with these variants, in reading order."""
    found = [diverged_models(results)]
    for variant in variants:
        if variant in PLAIN_VARIANTS:
            found.append(degradation(results, variant))
    for variant in variants:
        if variant in PLAIN_VARIANTS:
            continue
        found.append(deeper_residual_trains_better(results, variant))
        if PLAIN_TWIN.get(variant) in variants:
            found += [shortcut_benefit(results, variant), gradient_at_initialisation(results, variant),
                      deletion_contrast(results, variant), smoother_landscape(results, variant)]
        found += [one_block_barely_matters(results, variant), short_paths(results, variant)]
    found.append(depth_scaling(results.get("initialisation", {})))
    return found
