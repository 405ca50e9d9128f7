"""What the trained vision nets show when taken apart, computed from their results (see findings.py).

experiment.py takes the deepest trained nets apart; these sentences read
what it recorded. Thresholds, stated once:
- Veit et al.: with one block removed, a residual net keeps at least
  `KEEPS_SHARE` of its accuracy above chance ("barely changes"); removing
  blocks hurts the plain twin more at every k;
- short paths: the gradient-weighted mean path length is below the mean
  path length n/2;
- the loss landscape (Li et al. 2018): the residual net's plane is the
  smoother one, a smaller share of it non-convex than its plain twin's.

Each claim gives its margin, as findings.py's do.
"""

import numpy as np

from tracks.common.findings import Finding, chance_accuracy, percent, scientific
from tracks.vision.variants import PLAIN_TWIN

KEEPS_SHARE = 0.8

# A net whose accuracy is less than this above chance has learnt nearly nothing ("never left
# chance"): its lesions measure noise (500 lesion images give a standard error of 1.3 points at
# 10% accuracy), and an epoch of its training curve is still at chance.
LEARNT_ABOVE_CHANCE = 0.05


def _deepest_study(results, variant, key):
    entries = [m for m in results.models if m.variant == variant and (m.ensemble or {}).get(key)]
    if not entries:
        return None, None
    entry = max(entries, key=lambda m: m.depth)
    return entry, entry.ensemble[key]


def _kept(accuracy, intact, chance):
    """Share of the intact accuracy above chance that is left."""
    return (accuracy - chance) / max(intact - chance, 0.01)  # a net at chance keeps nothing to lose


def one_block_barely_matters(results, variant="residual"):
    """Veit et al.: removing one block of a trained residual net barely changes its accuracy."""
    entries = [m for m in results.models if m.variant == variant and m.lesion]
    if not entries:
        return None
    entry = max(entries, key=lambda m: m.depth)
    study, chance = entry.lesion, chance_accuracy(entry.num_classes)
    removable = [value for value in study["lesioned"] if value is not None]
    if not removable:
        return None
    median = float(np.median(removable))
    kept = _kept(median, study["intact"], chance)
    holds = kept >= KEEPS_SHARE
    return Finding(
        f"One block removed ({entry.id})", holds,
        f"test accuracy {percent(study['intact'])} intact; with one block removed median {percent(median)}, "
        f"worst {percent(min(removable))}: the median keeps {100 * kept:.0f}% of the accuracy above chance "
        + (f"(at least {100 * KEEPS_SHARE:.0f}%: barely changed, as Veit et al. found)." if holds else
           f"(below {100 * KEEPS_SHARE:.0f}%: this net depends on single blocks more than Veit et al.'s "
           "fully trained ResNet-110 did)."),
        margin=kept - KEEPS_SHARE,
    )


def deletion_contrast(results, variant="residual", ks=(1, 2, 4, 8)):
    """Veit et al.'s k-block deletion: the residual net degrades more gracefully than its plain twin."""
    entry, ours = _deepest_study(results, variant, "deletion")
    plain_entry, theirs = _deepest_study(results, PLAIN_TWIN.get(variant), "deletion")
    if ours is None or theirs is None or entry.depth != plain_entry.depth:
        return None
    chance = chance_accuracy(entry.num_classes)
    shown = [k for k in ks if k in ours["num_removed"] and k in theirs["num_removed"]]
    if not shown:
        return None

    def at(study, k):
        return study["mean"][study["num_removed"].index(k)]

    def row(study, label):
        values = ", ".join(f"{percent(at(study, k))}" for k in shown)
        return f"{label} {values} (intact {percent(study['intact'])})"

    untrained = [e.id for e, study in ((entry, ours), (plain_entry, theirs))
                 if study["intact"] < chance + LEARNT_ABOVE_CHANCE]
    if untrained:  # a net at chance has nothing to lose: its share kept is noise, so no claim
        return Finding(
            f"Removing k blocks at once (depth {entry.depth})", None,
            f"test accuracy with k = {', '.join(map(str, shown))} blocks removed: {row(ours, entry.id)}; "
            f"{row(theirs, plain_entry.id)}. {' and '.join(untrained)} never left chance "
            f"({percent(chance)}), so it has nothing to lose and the two cannot be compared here.",
        )
    holds = all(_kept(at(ours, k), ours["intact"], chance) > _kept(at(theirs, k), theirs["intact"], chance)
                for k in shown)
    return Finding(
        f"Removing k blocks at once (depth {entry.depth})", holds,
        f"test accuracy with k = {', '.join(map(str, shown))} of {len(ours['candidates'])} same-shape blocks "
        f"removed (mean of the draws): {row(ours, entry.id)}; {row(theirs, plain_entry.id)}. "
        + ("The residual net keeps more of its accuracy at every k: it degrades smoothly, the plain net breaks."
           if holds else "The residual net does not keep more of its accuracy at every k here."),
        margin=min(_kept(at(ours, k), ours["intact"], chance) - _kept(at(theirs, k), theirs["intact"], chance)
                   for k in shown),
    )


def short_paths(results, variant="residual"):
    """Veit et al.: the gradient comes mostly from paths shorter than the typical path."""
    entry, paths = _deepest_study(results, variant, "paths")
    if paths is None:
        return None
    lengths = np.asarray(paths["lengths"], dtype=float)
    share = np.asarray(paths["gradient_share"], dtype=float)
    n = int(lengths[-1])
    if not np.all(np.isfinite(share)) or share.sum() <= 0:
        return Finding(
            f"Which paths carry the gradient ({entry.id})", None,
            f"no gradient reached the first block's input through any of its paths (the {n} blocks pass "
            "nothing back: a dead network), so no path length carries it.")
    weighted = float((lengths * share).sum())
    cumulative = np.cumsum(share)
    low, high = int(lengths[np.searchsorted(cumulative, 0.05)]), int(lengths[np.searchsorted(cumulative, 0.95)])
    holds = weighted < n / 2
    return Finding(
        f"Which paths carry the gradient ({entry.id})", holds,
        f"of its {n} blocks a typical path passes {n / 2:.1f} branches; the gradient-weighted mean is "
        f"{weighted:.1f}, and 90% of the gradient comes through paths of {low}-{high} branches"
        + (": the effective paths are shorter than the network is deep." if holds else "."),
        margin=n / 2 - weighted,
    )


def smoother_landscape(results, variant="residual"):
    """Li et al. 2018: around its trained weights, the residual net's loss is smoother than its plain twin's."""
    plain = PLAIN_TWIN.get(variant)
    entry, ours = _deepest_landscape(results, variant)
    plain_entry, theirs = _deepest_landscape(results, plain)
    if ours is None or theirs is None or entry.depth != plain_entry.depth:
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
    # Convexity is the claim; sharpness is the other thing a landscape shows, and it need not agree.
    curvatures = ours.get("curvature"), theirs.get("curvature")
    sharpness = ""
    if None not in curvatures and curvatures[0] != curvatures[1]:
        sharpness = (f" By its curvature at the weights ({scientific(curvatures[0])} against "
                     f"{scientific(curvatures[1])}) its minimum is the "
                     f"{'sharper' if curvatures[0] > curvatures[1] else 'flatter'} one.")
    return Finding(
        f"The loss around the trained weights (depth {entry.depth})", holds,
        f"{described(entry.id, ours)}; {described(plain_entry.id, theirs)}: "
        + ("the residual net's plane is the more convex one." if holds else
           "the residual net's plane is not the more convex one here.") + sharpness,
        margin=shares[1] - shares[0],
    )


def _deepest_landscape(results, variant):
    entries = [m for m in results.models if m.variant == variant and m.landscape]
    if not entries:
        return None, None
    entry = max(entries, key=lambda m: m.depth)
    return entry, entry.landscape
