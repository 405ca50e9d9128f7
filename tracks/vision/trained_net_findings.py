"""What the trained vision nets show when taken apart, computed from their results (see findings.py).

experiment.py takes the deepest trained nets apart; these sentences read
what it recorded. Thresholds, stated once:
- Veit et al.: with one block removed, a residual net keeps at least
  `KEEPS_SHARE` of its accuracy above chance ("barely changes"); removing
  blocks hurts the plain twin more at every k where either net is above
  chance. Chance is the best constant guess on the test images the studies
  use (their largest class's share). A trained net less than
  `LEARNT_ABOVE_CHANCE` above it never left chance: no claim about it. A
  net with blocks removed less than `NOISE_ERRORS` standard errors above it
  is back at chance, and a k at which both nets are is not compared;
- short paths: the gradient-weighted mean path length is below the mean
  path length n/2;
- the loss landscape (Li et al. 2018): the residual net's plane is the
  smoother one, a smaller share of it non-convex than its plain twin's.

Each claim gives its margin, as findings.py's do.
"""

import math

import numpy as np

from tracks.common.findings import Finding, chance_accuracy, percent, scientific
from tracks.vision.variants import PLAIN_TWIN

KEEPS_SHARE = 0.8

# A net whose accuracy is less than this above chance has learnt nearly nothing ("never left
# chance"): its lesions measure noise (500 lesion images give a standard error of 1.3 points at
# 10% accuracy), and an epoch of its training curve is still at chance. The same line says when a
# net with blocks removed is back at chance.
LEARNT_ABOVE_CHANCE = 0.05


def chance_of(study, entry):
    """Chance on a study's test images: the best constant guess on them, as the run recorded it
    (experiment.chance_on), or one in `num_classes` for a run recorded before it did."""
    return study.get("chance") or chance_accuracy(entry.num_classes)


# An accuracy less than this many standard errors above chance is noise: a net with blocks removed that
# scores no more is back at chance. The standard error is a chance-level accuracy's on the study's images.
NOISE_ERRORS = 3


def noise_above_chance(study, chance):
    """How far above chance an accuracy on the study's images can lie by noise alone: `NOISE_ERRORS` standard
    errors of a chance-level accuracy on them, or `LEARNT_ABOVE_CHANCE` for a run that did not record how many."""
    images = study.get("images")
    return NOISE_ERRORS * math.sqrt(chance * (1 - chance) / images) if images else LEARNT_ABOVE_CHANCE


def _chance_text(study, chance):
    if study.get("chance"):
        return f"{percent(chance)}, the largest class's share of these test images"
    return percent(chance)


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
    study = entry.lesion
    chance = chance_of(study, entry)
    removable = [value for value in study["lesioned"] if value is not None]
    if not removable:
        return None
    median = float(np.median(removable))
    measured = (f"test accuracy {percent(study['intact'])} intact; with one block removed median {percent(median)}, "
                f"worst {percent(min(removable))}")
    if study["intact"] < chance + LEARNT_ABOVE_CHANCE:  # nothing learnt, nothing to lose: no claim
        return Finding(
            f"One block removed ({entry.id})", None,
            f"{measured}. {entry.id} never left chance ({_chance_text(study, chance)}), so it has nothing "
            "to lose and its lesions say nothing about Veit et al.'s claim.")
    kept = _kept(median, study["intact"], chance)
    holds = kept >= KEEPS_SHARE
    return Finding(
        f"One block removed ({entry.id})", holds,
        f"{measured}: the median keeps {100 * kept:.0f}% of the accuracy above chance "
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
    shown = [k for k in ks if k in ours["num_removed"] and k in theirs["num_removed"]]
    if not shown:
        return None
    nets = [(entry, ours, chance_of(ours, entry)), (plain_entry, theirs, chance_of(theirs, plain_entry))]

    def at(study, k):
        return study["mean"][study["num_removed"].index(k)]

    def row(model, study, _):
        values = ", ".join(f"{percent(at(study, k))}" for k in shown)
        return f"{model.id} {values} (intact {percent(study['intact'])})"

    def kept(k):  # (ours, theirs): the share of each net's accuracy above chance left with k blocks removed
        return [_kept(at(study, k), study["intact"], chance) for _, study, chance in nets]

    title = f"Removing k blocks at once (depth {entry.depth})"
    measured = (f"test accuracy with k = {', '.join(map(str, shown))} of {len(ours['candidates'])} same-shape "
                f"blocks removed (mean of the draws): {'; '.join(row(*net) for net in nets)}.")
    chance_text = _chance_text(ours, nets[0][2])
    untrained = [model.id for model, study, chance in nets if study["intact"] < chance + LEARNT_ABOVE_CHANCE]
    if untrained:  # a net at chance has nothing to lose: its share kept is noise, so no claim
        return Finding(
            title, None,
            f"{measured} {' and '.join(untrained)} never left chance ({chance_text}), so it has nothing to "
            "lose and the two cannot be compared here.",
        )
    # Where both nets are back at chance, what each has left is noise: there is nothing to compare.
    broken = [k for k in shown
              if all(at(study, k) < chance + noise_above_chance(study, chance) for _, study, chance in nets)]
    compared = [k for k in shown if k not in broken]
    if broken:
        errors = f" ({NOISE_ERRORS} standard errors on {ours['images']} images)" if ours.get("images") else ""
        measured += (f" At k = {', '.join(map(str, broken))} both nets are back at chance: less than "
                     f"{100 * noise_above_chance(ours, nets[0][2]):.1f} points above {chance_text}{errors}. "
                     "Nothing is left to compare there.")
    if not compared:
        return Finding(title, None, measured)
    every = f"at every k where one of them is above chance ({', '.join(map(str, compared))})" if broken else \
        "at every k"
    holds = all(residual > plain for residual, plain in map(kept, compared))
    return Finding(
        title, holds,
        f"{measured} "
        + (f"The residual net keeps more of its accuracy {every}: it degrades smoothly, the plain net breaks."
           if holds else f"The residual net does not keep more of its accuracy {every} here."),
        margin=min(residual - plain for residual, plain in map(kept, compared)),
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
