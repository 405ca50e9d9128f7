"""What a vision run shows, computed from its results (see tracks/common/findings.py): how the nets trained.

What the trained nets show when taken apart (Veit et al.'s lesions and
paths, Li et al.'s loss landscape) is in trained_net_findings.py;
`vision_findings` puts both in reading order. Thresholds, stated once:
- degradation: the deeper plain net's final training error is at least
  `DEGRADATION_POINTS` higher than the shallower one's (He et al.'s Figure 6, left);
- the deeper residual net's final training error is at most the shallower
  one's (Figure 6, right);
- the shortcut's benefit: plain minus residual at the deepest depth is at
  least `DEGRADATION_POINTS`;
- without normalisation: a net "trains" when its final training accuracy is
  at least `TRAINS_FROM` x chance, is "stuck at chance" below `STUCK_BELOW`
  x chance; the claim is that the He-initialised plain and residual stacks
  diverge or stay at chance while Fixup and the zero-initialised
  pre-activation net train;
- branches grow from 0: an identity-initialised net's branches and x_L - x_0
  are exactly 0 at its first record and above 0 at its last.

Findings that make a claim also give its margin: by how much the claim is
met (e.g. the deeper net's error minus the shallower one's, less the
threshold; positive when it holds). A run of several seeds uses the margins
(tracks/common/seeds_report.py).
"""

import math

import numpy as np

from tracks.common.findings import (Finding, chance_accuracy, depth_scaling, diverged_models, entries_by, percent,
                                    scientific)
from tracks.vision.trained_net_findings import (LEARNT_ABOVE_CHANCE, deletion_contrast, one_block_barely_matters,
                                                short_paths, smoother_landscape)
from tracks.vision.variants import PLAIN_TWIN, PLAIN_VARIANTS

DEGRADATION_POINTS = 0.05
TRAINS_FROM = 2.0
STUCK_BELOW = 1.5
# Without normalisation: which variants should train (True) and which fail (False).
EXPECTED_WITHOUT_NORM = {"plain-nonorm": False, "residual-nonorm": False, "fixup": True,
                         "preact-zero-nonorm": True}


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
        margin=gap - DEGRADATION_POINTS,
    )


# A training error at or below this: the net fits its training data; when both nets do, the
# deeper one has little left to win (issue 41: residual-20 at 2.5-2.9% on 0.2.0's synthetic set, which had
# no faint objects (--synthetic-faintest 1), residual-56 level).
FITTED_ERROR = 0.05


def _epoch_left_chance(errors, num_classes):
    """The 1-based epoch after which the error first lay `LEARNT_ABOVE_CHANCE` below chance's, or None."""
    bar = 1.0 - chance_accuracy(num_classes) - LEARNT_ABOVE_CHANCE
    return next((epoch for epoch, error in enumerate(errors, 1) if error <= bar), None)


def _epochs_text(epochs):
    return f"epoch{'s' if len(epochs) > 1 else ''} {', '.join(map(str, epochs))}"


def _why_deeper_trained_worse(shallow, deep):
    """What the two nets' curves (results' `train_errors`) say about a deeper net that ended worse.

    A stall (the deeper net stays at chance longer than the shallower one)
    is what warm-up prevents: the advice is warm-up, or a longer one if the
    net had some. Without a stall the deeper net learnt more slowly, and
    warm-up is not the advice.
    """
    # A run written before the curves were kept, or a --seeds run's means, has none.
    first, second = getattr(shallow, "train_errors", None), getattr(deep, "train_errors", None)
    if not first or not second:
        return ("the deeper residual net trains worse in this run: read both nets' curves in "
                "training_curves.png (did the deeper one stay at chance in its first epochs?) and check "
                "whether it had learning-rate warm-up (--warmup-steps)")
    left_shallow = _epoch_left_chance(first, getattr(shallow, "num_classes", None))
    left_deep = _epoch_left_chance(second, getattr(deep, "num_classes", None))
    gaps = [deeper - shallower for shallower, deeper in zip(first, second)]  # per epoch, > 0: deeper behind
    ahead = [epoch for epoch, gap in enumerate(gaps, 1) if gap <= 0]
    widest = max(range(len(gaps)), key=gaps.__getitem__)
    stalled = left_deep is None or (left_shallow is not None and left_deep > left_shallow)
    parts = []
    if left_deep is None:
        parts.append(f"the deeper net never left chance ({percent(second[-1])} after epoch {len(second)})")
    elif stalled:
        parts.append(f"the deeper net left chance after epoch {left_deep}, the shallower after epoch "
                     f"{left_shallow}")
    elif left_shallow is not None:
        parts.append(f"both left chance after epoch {left_deep}")
    if ahead:
        parts.append(f"the deeper net was ahead after {_epochs_text(ahead)} and behind at the end")
    elif left_deep is not None:
        parts.append(f"the deeper net was behind after every epoch, by {100 * gaps[widest]:.1f} points at the "
                     f"widest (epoch {widest + 1}) and {100 * gaps[-1]:.1f} after the last")
    warmup = getattr(deep, "warmup_steps", None)
    if stalled and warmup == 0:
        parts.append("it had no learning-rate warm-up, and in docs/experiments/vision.md's sweep a deep "
                     "residual net without warm-up stalled in its first steps: try --warmup-steps")
    elif stalled and warmup:
        parts.append(f"it stalled with {warmup} steps of warm-up; in docs/experiments/vision.md's sweep "
                     "warm-up prevented such stalls, so try a longer one (--warmup-steps)")
    elif left_deep is not None and left_shallow is not None:
        parts.append("so not the stall that warm-up prevents: it learnt more slowly")
    return "the deeper residual net trains worse in this run; from the curves: " + "; ".join(parts)


def deeper_residual_trains_better(results, variant="residual"):
    """He et al.'s Figure 6, right: the deeper residual net reaches a lower training error.

    When it does not, the verdict reads both nets' per-epoch curves
    (`_why_deeper_trained_worse`): a deeper net that stayed at chance longer
    (the stall warm-up prevents), or one that left chance with the shallower
    net and learnt more slowly.
    """
    errors = entries_by(results, "train_error", variant=variant)
    if len(errors) < 2:
        return None
    shallow, deep = _shallow_deep(errors)
    holds = errors[deep] <= errors[shallow]
    if holds:
        verdict = "the deeper residual net trains at least as well"
    elif errors[deep] <= FITTED_ERROR:  # both fit their data: a deep net that trained badly is the other case
        verdict = (f"both nets already fit their training data (at most {percent(FITTED_ERROR)} error), "
                   "so depth has little left to win here (the class preset on the synthetic set without "
                   "faint objects, --synthetic-faintest 1: docs/running.md); give both nets more to learn, "
                   "as CIFAR-10 does")
    else:
        models = {model.depth: model for model in results.models
                  if model.variant == variant and not model.diverged}
        verdict = _why_deeper_trained_worse(models[shallow], models[deep])
    return Finding(
        f"Deeper {variant} nets", holds,
        f"final training error {percent(errors[shallow])} at {shallow} layers, {percent(errors[deep])} at "
        f"{deep} layers: {verdict}.",
        margin=errors[shallow] - errors[deep],
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
        margin=gaps[deep] - DEGRADATION_POINTS,
    )


def gradient_at_initialisation(results, variant="residual"):
    """Gradient gains at initialisation of the deepest plain and residual nets (nearer 1 is better)."""
    plain = PLAIN_TWIN.get(variant)
    init = results.initialisation or {}
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
        margin=float(abs(np.log10(theirs)) - abs(np.log10(ours))),
    )


def _outcome(entry):
    """(what happened, training accuracy as a multiple of chance; inf for a diverged net)."""
    chance = chance_accuracy(entry.num_classes)
    if entry.diverged:
        return f"diverged (loss NaN or infinite in epoch {(entry.diverged_epoch or 0) + 1})", float("inf")
    accuracy = 1.0 - entry.train_error
    times = accuracy / chance
    if times < STUCK_BELOW:
        return f"stuck at chance (training error {percent(entry.train_error)})", times
    if times >= TRAINS_FROM:
        return f"trains (training error {percent(entry.train_error)})", times
    return f"barely leaves chance (training error {percent(entry.train_error)})", times


def without_normalisation(results):
    """Which deep nets train without BatchNorm: the identity-initialised ones, not the He-initialised stacks."""
    entries = [m for m in results.models if m.variant in EXPECTED_WITHOUT_NORM
               and (m.diverged or m.train_error is not None)]
    if not entries:
        return None
    deep = max(m.depth for m in entries)
    entries = {m.variant: m for m in entries if m.depth == deep}
    if not any(EXPECTED_WITHOUT_NORM[v] for v in entries) or all(EXPECTED_WITHOUT_NORM[v] for v in entries):
        return None  # the claim compares nets that should train with nets that should not
    margins, parts, against = [], [], []
    for variant, entry in entries.items():
        said, times = _outcome(entry)
        parts.append(f"{entry.id} {said}")
        if EXPECTED_WITHOUT_NORM[variant]:
            margins.append(times - TRAINS_FROM if math.isfinite(times) else -math.inf)
        else:
            margins.append(STUCK_BELOW - times if math.isfinite(times) else math.inf)
        if margins[-1] <= 0:
            against.append(f"{entry.id} (expected to {'train' if EXPECTED_WITHOUT_NORM[variant] else 'fail'})")
    reference = next((m for m in results.models if m.variant == "residual"
                      and m.depth == deep and m.train_error is not None), None)
    if reference is not None:
        parts.append(f"with BatchNorm {reference.id} reaches {percent(reference.train_error)}")
    margin = min(margins)
    holds = margin > 0
    return Finding(
        f"Without normalisation at {deep} layers", holds,
        "; ".join(parts) + ". " + (
            "The He-initialised stacks fail, the nets whose branches start at 0 train." if holds else
            f"Against the claim: {', '.join(against)} (trains: training accuracy at least {TRAINS_FROM:g} x "
            f"chance; stuck: below {STUCK_BELOW:g} x)."),
        margin=margin,
    )


def branches_grow_from_zero(results):
    """An identity-initialised net starts as its shortcut path; as it trains its branches grow from 0."""
    starting, others = [], []
    for entry in results.models:
        dynamics = entry.dynamics or {}
        first, last = dynamics.get("first") or {}, dynamics.get("last") or {}
        if first.get("branch_ratio") is None or entry.diverged:
            continue
        (starting if first["branch_ratio"] == 0 and first.get("delta_rank") == 0 else others).append(
            (entry, first, last))
    if not starting:
        return None

    def grown(entry, first, last):
        return (f"{entry.id} branch ratio {scientific(first['branch_ratio'])} -> "
                f"{scientific(last.get('branch_ratio'))}, rank of x_L - x_0 {first['delta_rank']:.0f} -> "
                f"{last.get('delta_rank') or 0:.0f} (effective {scientific(last.get('delta_effective_rank'))}) "
                f"by epoch {last.get('epoch')}")

    margin = min(min(last.get("branch_ratio") or 0.0, last.get("delta_rank") or 0.0) for _, _, last in starting)
    contrast = "".join(f"; {entry.id} starts at branch ratio {scientific(first['branch_ratio'])}, rank "
                       f"{first.get('delta_rank') or 0:.0f}" for entry, first, _ in others)
    holds = margin > 0
    stayed = [entry.id + (" (its branches stayed at 0)" if not last.get("branch_ratio") else
                             " (its branches left 0, but x_L - x_0 fell back to rank 0: the stream died)")
              for entry, _, last in starting if not (last.get("branch_ratio") and last.get("delta_rank"))]
    return Finding(
        "Branches grow from 0", holds,
        "; ".join(grown(*item) for item in starting) + contrast + ". " + (
            "Each identity-initialised net starts as its shortcut path (x_L - x_0 = 0, rank 0) and its "
            "branches become non-trivial as it trains." if holds else
            f"Against the claim: {', '.join(stayed)}."),
        margin=margin,
    )


# Issue 41: over several seeds, a net expected to train without normalisation "trained" on a seed when
# its final training error is at least this far below the unnormalised plain net's, and it did not diverge.
TRAINED_BELOW_PLAIN = 0.15


def training_rates(per_seed):
    """{model id: [(seed, trained)]} for the nets expected to train without normalisation.

    The bar is that seed's `plain-nonorm` at the same depth (a diverged one
    counts at chance error); a model without that bar in the run is left out.
    """
    rates = {}
    for seed, results in per_seed:
        models = results.models
        plain = {m.depth: m for m in models if m.variant == "plain-nonorm"}
        for entry in models:
            bar = plain.get(entry.depth)
            if not EXPECTED_WITHOUT_NORM.get(entry.variant) or bar is None:
                continue
            chance_error = 1.0 - chance_accuracy(entry.num_classes)
            bar_error = chance_error if bar.train_error is None else bar.train_error
            error = entry.train_error
            trained = (not entry.diverged and error is not None and math.isfinite(error)
                       and bar_error - error >= TRAINED_BELOW_PLAIN)
            rates.setdefault(entry.id, []).append((seed, trained))
    return rates


def training_rate_sentence(per_seed):
    """"fixup-56 trained on 5 of 5 seeds; ..." computed from the seed runs (empty when nothing applies)."""
    parts = []
    for model_id, outcomes in training_rates(per_seed).items():
        failed = [str(seed) for seed, trained in outcomes if not trained]
        parts.append(f"{model_id} trained on {len(outcomes) - len(failed)} of {len(outcomes)} seeds"
                     + (f" (not on seed{'s' if len(failed) > 1 else ''} {', '.join(failed)})" if failed else ""))
    if not parts:
        return ""
    return ("Without normalisation: " + "; ".join(parts) + f". Trained: a final training error at least "
            f"{TRAINED_BELOW_PLAIN * 100:.0f} points below the unnormalised plain net's, no NaN.")


def _all_diverged(results, variant):
    entries = [m for m in results.models if m.variant == variant]
    return bool(entries) and all(m.diverged for m in entries)


def vision_findings(results, variants=None):
    """Every finding that applies to a run with these variants (default: the run's own), in reading order."""
    variants = results.variants if variants is None else variants
    found = [diverged_models(results)]
    for variant in variants:
        if variant in PLAIN_VARIANTS:
            found.append(degradation(results, variant))
    for variant in variants:
        if variant in PLAIN_VARIANTS or _all_diverged(results, variant):
            continue  # a diverged net has no trained numbers; "Diverged" and the findings below name it
        found.append(deeper_residual_trains_better(results, variant))
        if PLAIN_TWIN.get(variant) in variants:
            found += [shortcut_benefit(results, variant), gradient_at_initialisation(results, variant),
                      deletion_contrast(results, variant), smoother_landscape(results, variant)]
        found += [one_block_barely_matters(results, variant), short_paths(results, variant)]
    found += [without_normalisation(results), branches_grow_from_zero(results)]
    found.append(depth_scaling(results.initialisation or {}))
    return found
