"""What a toy run shows, computed from its results (see tracks/common/findings.py).

Thresholds, stated once:
- degradation: the deepest plain MLP's final training loss is more than
  `DEGRADATION_NATS` above the shallowest plain one's (He et al.'s Figure 6);
- the shortcut's benefit: at the deepest depth the residual MLP's training
  loss is below its plain twin's by more than `DEGRADATION_NATS`;
- Veit et al. 2016, on the deepest trained MLPs: with one layer removed the
  residual MLP keeps at least `KEEPS_SHARE` of its test accuracy above chance
  (the median over its layers); with k layers removed at once it keeps more
  of it than its plain twin at every k up to `DELETED_SHARE` of its layers
  (beyond, both are at chance: nothing left to compare); the
  gradient-weighted mean length of the paths that carry its gradient is
  below the mean path length n/2;
- the stream is a sum: in the residual MLP, x_L = x_0 + the sum of every
  layer's output, to within `SUM_TOLERANCE` of max |x_L|;
- Li et al. 2018: around its trained weights, a smaller share of the
  residual MLP's loss plane is non-convex than of its plain twin's.

Veit et al.'s and Li et al.'s claims are those of the vision track
(tracks/vision/trained_net_findings.py), with its threshold. Each claim
gives its margin: by how much it is met (positive when it holds), which
`--seeds` compares with the spread.
"""

import numpy as np

from tracks.common.findings import Finding, depth_scaling, percent, scientific

DEGRADATION_NATS = 0.1
KEEPS_SHARE = 0.8
DELETED_SHARE = 0.25
SUM_TOLERANCE = 1e-5
CHANCE = 0.5  # two classes


def _losses(results, variant):
    return {m.depth: m.train_loss for m in results.models
            if m.variant == variant and m.train_loss is not None}


def degradation(results):
    """The deepest plain net fits its training points worse than the shallowest (He et al.'s degradation)."""
    losses = _losses(results, "plain")
    if len(losses) < 2:
        return None
    shallow, deep = min(losses), max(losses)
    margin = losses[deep] - losses[shallow] - DEGRADATION_NATS
    return Finding(
        "Degradation", margin > 0,
        f"the plain {deep}-layer MLP ends with training loss {losses[deep]:.3f}, the plain {shallow}-layer one "
        f"with {losses[shallow]:.3f} (degraded: more than {DEGRADATION_NATS} nats higher). More layers can "
        f"only fit better in principle, so a higher training loss is an optimisation failure, not overfitting.",
        margin)


def residual_trains_at_depth(results):
    """At the deepest depth the residual net's training loss is below the plain net's."""
    plain, residual = _losses(results, "plain"), _losses(results, "residual")
    depths = set(plain) & set(residual)
    if not depths:
        return None
    depth = max(depths)
    margin = plain[depth] - residual[depth] - DEGRADATION_NATS
    return Finding(
        "Residual nets train at depth", margin > 0,
        f"at {depth} layers the residual MLP ends with training loss {residual[depth]:.3f}, its plain twin "
        f"(the same layers without the shortcut) with {plain[depth]:.3f} (claim: lower by more than "
        f"{DEGRADATION_NATS} nats).", margin)


def _deepest(results, variant, key):
    """The deepest entry of `variant` that has `key` (a study of the trained net), or None."""
    entries = [m for m in results.models if m.variant == variant and getattr(m, key)]
    return max(entries, key=lambda m: m.depth) if entries else None


def _twins(results, key):
    """(residual entry, plain entry) of the deepest depth both have `key` at, or (None, None)."""
    residual, plain = _deepest(results, "residual", key), _deepest(results, "plain", key)
    if residual is None or plain is None or residual.depth != plain.depth:
        return None, None
    return residual, plain


def _kept(accuracy, intact):
    """The share of the intact accuracy above chance that is left."""
    return (accuracy - CHANCE) / max(intact - CHANCE, 0.01)  # a net at chance keeps nothing to lose


def one_layer_barely_matters(results):
    """Veit et al.: removing one layer of a trained residual net barely changes its accuracy."""
    entry = _deepest(results, "residual", "lesion")
    if entry is None:
        return None
    study = entry.lesion
    removed = [value for value in study["lesioned"] if value is not None]
    median = float(np.median(removed))
    kept = _kept(median, study["intact"])
    plain = _deepest(results, "plain", "lesion")
    contrast = ""
    if plain is not None and plain.depth == entry.depth:
        theirs = [value for value in plain.lesion["lesioned"] if value is not None]
        contrast = (f" Its plain twin: {percent(plain.lesion['intact'])} intact, median "
                    f"{percent(float(np.median(theirs)))} with one layer removed.")
    return Finding(
        f"One layer removed ({entry.id})", kept >= KEEPS_SHARE,
        f"test accuracy {percent(study['intact'])} intact; with one of its {len(removed)} layers removed median "
        f"{percent(median)}, worst {percent(min(removed))}: the median keeps {100 * kept:.0f}% of the accuracy "
        f"above chance (claim: at least {100 * KEEPS_SHARE:.0f}%, as Veit et al. found for ResNets)." + contrast,
        margin=kept - KEEPS_SHARE)


def deletion_contrast(results):
    """Veit et al.'s k-layer deletion: the residual net degrades more gracefully than its plain twin."""
    residual, plain = _twins(results, "deletion")
    if residual is None:
        return None
    ours, theirs = residual.deletion, plain.deletion
    ks = [k for k in ours["num_removed"] if k in theirs["num_removed"] and k <= DELETED_SHARE * residual.depth]
    if not ks:
        return None

    def kept(study, k):
        return _kept(study["mean"][study["num_removed"].index(k)], study["intact"])

    def row(entry, study):
        return (f"{entry.id} {', '.join(percent(study['mean'][study['num_removed'].index(k)]) for k in ks)} "
                f"(intact {percent(study['intact'])})")

    margin = min(kept(ours, k) - kept(theirs, k) for k in ks)
    return Finding(
        f"Removing k layers at once (depth {residual.depth})", margin > 0,
        f"test accuracy with k = {', '.join(map(str, ks))} of {residual.depth} layers removed (mean of "
        f"{len(ours['values'][0])} random sets): {row(residual, ours)}; {row(plain, theirs)}. "
        + ("The residual MLP keeps more of its accuracy above chance at every k: it degrades smoothly "
           "where its plain twin breaks." if margin > 0 else
           "The residual MLP does not keep more of its accuracy above chance at every k here."),
        margin=margin)


def short_paths(results):
    """Veit et al.: the gradient comes mostly from paths shorter than the typical path."""
    entry = _deepest(results, "residual", "paths")
    if entry is None:
        return None
    lengths = np.asarray(entry.paths["lengths"], dtype=float)
    share = np.asarray([np.nan if value is None else value for value in entry.paths["gradient_share"]])
    n = int(lengths[-1])
    if not np.all(np.isfinite(share)) or share.sum() <= 0:
        return Finding(f"Which paths carry the gradient ({entry.id})", None,
                       f"no gradient reached the first layer's input through any of its paths (the {n} layers "
                       "pass nothing back), so no path length carries it.")
    weighted = float((lengths * share).sum())
    cumulative = np.cumsum(share)
    low, high = int(lengths[np.searchsorted(cumulative, 0.05)]), int(lengths[np.searchsorted(cumulative, 0.95)])
    return Finding(
        f"Which paths carry the gradient ({entry.id})", weighted < n / 2,
        f"of its 2^{n} paths a typical one passes {n / 2:.1f} branches; the gradient-weighted mean is "
        f"{weighted:.1f}, and 90% of the gradient comes through paths of {low}-{high} branches"
        + (": the paths that train the net are shorter than the net is deep." if weighted < n / 2 else "."),
        margin=n / 2 - weighted)


def stream_is_a_sum(results):
    """x_L = x_0 + the sum of the layers' outputs: exact for x + f(x), far off for a plain stack."""
    entry = _deepest(results, "residual", "decomposition")
    if entry is None:
        return None
    error = entry.decomposition["relative_error"]
    plain = _deepest(results, "plain", "decomposition")
    contrast = ("" if plain is None else
                f"; for {plain.id}, whose layers replace the stream instead of adding to it, "
                f"{scientific(plain.decomposition['relative_error'])}")
    return Finding(
        "The residual stream is a sum", error <= SUM_TOLERANCE,
        f"max |x_L - (x_0 + sum of the {len(entry.decomposition['names'])} layers' outputs)| / max |x_L| = "
        f"{scientific(error)} for {entry.id} (claim: at most {SUM_TOLERANCE:g}){contrast}.",
        margin=SUM_TOLERANCE - error)


def smoother_landscape(results):
    """Li et al. 2018: around its trained weights, the residual net's loss is smoother than its plain twin's."""
    residual, plain = _twins(results, "landscape")
    if residual is None:
        return None
    ours, theirs = residual.landscape, plain.landscape
    if ours.get("nonconvex_share") is None or theirs.get("nonconvex_share") is None:
        return None

    def described(entry, grid):
        return (f"{entry.id} loss {scientific(grid.get('center_loss'))} at its weights, "
                f"{scientific(grid.get('edge_rise'))} higher at the edge on average, curvature "
                f"{scientific(grid.get('curvature'))}, {100 * grid['nonconvex_share']:.0f}% of the plane non-convex")

    margin = theirs["nonconvex_share"] - ours["nonconvex_share"]
    # Convexity is the claim; sharpness is the other thing a landscape shows, and it need not agree.
    sharpness = ""
    if None not in (ours.get("curvature"), theirs.get("curvature")) and ours["curvature"] != theirs["curvature"]:
        sharpness = (f" By its curvature at the weights its minimum is the "
                     f"{'sharper' if ours['curvature'] > theirs['curvature'] else 'flatter'} one.")
    return Finding(
        f"The loss around the trained weights (depth {residual.depth})", margin > 0,
        f"{described(residual, ours)}; {described(plain, theirs)}: "
        + ("the residual MLP's plane is the more convex one." if margin > 0 else
           "the residual MLP's plane is not the more convex one here.") + sharpness,
        margin=margin)


def toy_findings(results):
    """Every finding of a toy run, in reading order (None where a run lacks the models for one)."""
    return [degradation(results), residual_trains_at_depth(results), one_layer_barely_matters(results),
            deletion_contrast(results), short_paths(results), stream_is_a_sum(results), smoother_landscape(results),
            depth_scaling(results.initialisation or {})]
