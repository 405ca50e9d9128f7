"""What a language run shows, computed from its results (see tracks/common/findings.py).

Thresholds, stated once (losses in nats per character):
- the plain twin fails: its final validation loss is at least `PLAIN_FAILS`
  above Pre-LN's at the same depth;
- a variant needs warm-up: without it the final validation loss is at least
  `NEEDS_WARMUP` higher than with it, or the run diverged;
- a variant does not need it: the two losses differ by at most `INDIFFERENT`;
- Xiong et al.'s picture at initialisation: Post-LN's weight gradient at the
  last block is at least `XIONG_RATIO` times its first block's while Pre-LN's
  last-to-first ratio stays within [1 / XIONG_RATIO, XIONG_RATIO];
- the stream is a sum: x_L = x_0 + sum of sublayer outputs to a relative
  error of at most `SUM_TOLERANCE`.
"""

import numpy as np

from tracks.common.findings import Finding, depth_scaling, diverged_models, scientific

PLAIN_FAILS = 0.5
NEEDS_WARMUP = 0.1
INDIFFERENT = 0.03
XIONG_RATIO = 1.5
SUM_TOLERANCE = 1e-4


def _layers(depth):
    return f"{depth} layer" + ("" if depth == 1 else "s")


def _entries(results, **match):
    return [m for m in results.models if all(getattr(m, key) == value for key, value in match.items())]


def _final(entry):
    """The final validation loss, or inf for a diverged model."""
    return float("inf") if entry.diverged else entry.val_loss


def plain_fails(results):
    """Without the residual additions the deep stack does not train; Pre-LN does."""
    deepest = max((m.depth for m in _entries(results, variant="plain")), default=None)
    if deepest is None:
        return None
    plains = [_final(m) for m in _entries(results, variant="plain", depth=deepest)]
    pres = [_final(m) for m in _entries(results, variant="pre", depth=deepest)]
    if not plains or not pres or None in plains + pres:
        return None
    plain, pre = min(plains), min(pres)
    holds = plain - pre >= PLAIN_FAILS
    unigram = results.unigram_loss
    stuck = (f" (predicting character frequencies alone gives {unigram:.3f})" if unigram is not None else "")
    return Finding(
        f"The plain twin at {deepest} layers", holds,
        f"best validation loss plain {plain:.3f}{stuck}, Pre-LN {pre:.3f}: "
        + ("without the residual additions the deep stack does not learn." if holds else
           f"the plain stack is within {PLAIN_FAILS} nats of Pre-LN here."),
        margin=plain - pre - PLAIN_FAILS,
    )


def warmup_effect(results, variant):
    """How much warm-up changes one variant's final loss, at each depth that has both runs."""
    sentences, verdicts, gaps = [], [], []
    for depth in sorted({m.depth for m in _entries(results, variant=variant)}):
        runs = {m.warmup: _final(m) for m in _entries(results, variant=variant, depth=depth)}
        if 0 not in runs or len(runs) < 2 or None in runs.values():
            continue
        warm = max(runs)
        cold, hot = runs[0], runs[warm]
        gap = cold - hot
        gaps.append(gap)
        if cold == float("inf"):
            sentences.append(f"at {_layers(depth)} it diverged without warm-up and reached {hot:.3f} with {warm} steps")
            verdicts.append("needs")
            continue
        verdict = "needs" if gap >= NEEDS_WARMUP else ("indifferent" if abs(gap) <= INDIFFERENT else "between")
        verdicts.append(verdict)
        sentences.append(f"at {_layers(depth)} {cold:.3f} without warm-up, {hot:.3f} with {warm} steps ({gap:+.3f})")
    if not sentences:
        return None
    return verdicts, "; ".join(sentences), gaps


def needs_warmup(results, variant="post"):
    """Xiong et al.: Post-LN needs learning-rate warm-up (>= NEEDS_WARMUP nats, or divergence, without it)."""
    effect = warmup_effect(results, variant)
    if effect is None:
        return None
    verdicts, text, gaps = effect
    holds = "needs" in verdicts
    return Finding(
        f"{variant} needs warm-up", holds,
        f"final validation loss {text}. " + (
            f"Without warm-up it ends at least {NEEDS_WARMUP} nats worse (or diverges)." if holds else
            f"Warm-up changes it by less than {NEEDS_WARMUP} nats here."),
        margin=max(gaps) - NEEDS_WARMUP,
    )


def trains_without_warmup(results, variant="pre"):
    """Xiong et al.: Pre-LN trains as well without warm-up (within INDIFFERENT nats)."""
    effect = warmup_effect(results, variant)
    if effect is None:
        return None
    verdicts, text, gaps = effect
    holds = all(verdict == "indifferent" for verdict in verdicts)
    return Finding(
        f"{variant} without warm-up", holds,
        f"final validation loss {text}. " + (
            f"Within {INDIFFERENT} nats either way: it does not need warm-up." if holds else
            f"More than {INDIFFERENT} nats apart: warm-up matters for it in this run."),
        margin=INDIFFERENT - max(abs(gap) for gap in gaps),
    )


def xiong_gradients(results):
    """At initialisation: per-block weight gradients, last block over first, Post-LN vs Pre-LN."""
    init = results.initialisation or {}
    ratios, levels = {}, {}
    for label, values in init.items():
        variant, _, depth = label.rpartition("-")
        norms = np.asarray(values.get("block_weight_grad_norms") or [], dtype=float)
        if variant in ("pre", "post") and norms.size > 1 and norms[0] > 0:
            if variant not in ratios or int(depth) > ratios[variant][0]:
                ratios[variant] = (int(depth), norms[-1] / norms[0])
                levels[variant] = float(np.mean(norms))
    if set(ratios) != {"pre", "post"}:
        return None
    post, pre = ratios["post"][1], ratios["pre"][1]
    holds = post >= XIONG_RATIO and 1 / XIONG_RATIO <= pre <= XIONG_RATIO
    return Finding(
        "Xiong et al.'s gradients at initialisation", holds,
        f"last block's weight gradient over the first block's: Post-LN {post:.2f}, Pre-LN {pre:.2f} "
        f"(mean per block: Post-LN {scientific(levels['post'])}, Pre-LN {scientific(levels['pre'])}). "
        + ("Post-LN's gradients grow towards the output while Pre-LN's stay level, as Xiong et al. show."
           if holds else
           f"Xiong et al.'s shape (Post-LN's ratio at least {XIONG_RATIO}, Pre-LN's near 1) is not what this "
           "model measures; compare the sizes: " + (
               "Post-LN's gradients are the larger ones." if levels["post"] > levels["pre"] else
               "Pre-LN's gradients are the larger ones.")),
        margin=min(post - XIONG_RATIO, XIONG_RATIO - max(pre, 1 / pre)),
    )


def stream_is_a_sum(results, variant="pre"):
    """Elhage et al.: the Pre-LN stream is the embedding plus every sublayer's output."""
    entries = [m for m in _entries(results, variant=variant) if m.decomposition]
    if not entries:
        return None
    worst = max(m.decomposition["relative_error"] for m in entries)
    holds = worst <= SUM_TOLERANCE
    others = {m.variant: m.decomposition["relative_error"] for m in results.models
              if m.decomposition and m.variant != variant}
    contrast = "".join(f"; {name}: {scientific(error)}" for name, error in sorted(others.items()))
    return Finding(
        "The residual stream is a sum", holds,
        f"max |x_L - (x_0 + sum of sublayer outputs)| / max |x_L| = {scientific(worst)} for {variant}"
        f"{contrast}. " + ("Every sublayer only adds to the stream." if holds else
                           f"More than {SUM_TOLERANCE}: something else changes the stream."),
        margin=SUM_TOLERANCE - worst,
    )


def _deepest_longest(results, key):
    """Entries with `key` at the deepest depth, trained with the longest warm-up, plain twins left out."""
    entries = [m for m in results.models if getattr(m, key) and m.variant != "plain"]
    if not entries:
        return []
    depth = max(m.depth for m in entries)
    warmup = max(m.warmup or 0 for m in entries if m.depth == depth)
    return [m for m in entries if m.depth == depth and (m.warmup or 0) == warmup]


def logit_lens_depth(results):
    """Where the prediction forms: the depth by which half of the lens's loss drop has happened."""
    sentences = []
    for entry in _deepest_longest(results, "logit_lens"):
        lens = entry.logit_lens
        loss = np.asarray(lens["loss"], dtype=float)
        drop = loss[0] - loss[-1]
        if drop <= 0:
            continue
        half = int(np.argmax(loss <= loss[0] - drop / 2))
        sentences.append(f"{entry.id} {loss[0]:.2f} at the embeddings -> {loss[-1]:.2f} at the output, "
                         f"half of that drop by block {half} of {len(loss) - 1}")
    if not sentences:
        return None
    return Finding("Logit lens", None, "; ".join(sentences) + ".")


def block_lesions(results):
    """Veit et al. for Transformers: the loss with one block removed, per trained residual model."""
    sentences = []
    for entry in _deepest_longest(results, "sublayers"):
        study, sublayers = entry.lesion, entry.sublayers
        if not study:
            continue
        lesioned = np.asarray([v for v in study["lesioned"] if v is not None], dtype=float)
        attention = np.asarray(sublayers["attention"], dtype=float)
        feedforward = np.asarray(sublayers["feedforward"], dtype=float)
        sentences.append(
            f"{entry.id}: intact {study['intact']:.3f}; one block removed: median {np.median(lesioned):.3f}, "
            f"worst {lesioned.max():.3f}; one attention sublayer: median {np.median(attention):.3f}; "
            f"one feed-forward sublayer: median {np.median(feedforward):.3f}")
    if not sentences:
        return None
    return Finding("Removing blocks and sublayers", None, "; ".join(sentences) + ".")


def language_findings(results, variants=None):
    """Every finding that applies to a run with these variants (default: the run's own), in reading order."""
    variants = results.variants if variants is None else variants
    found = [diverged_models(results),
             plain_fails(results) if "plain" in variants else None]
    for variant in ("post", "pre", "rezero"):
        if variant in variants:
            found.append(needs_warmup(results, variant) if variant == "post" else
                         trains_without_warmup(results, variant))
    found += [xiong_gradients(results), stream_is_a_sum(results), logit_lens_depth(results), block_lesions(results),
              depth_scaling(results.initialisation or {})]
    return found
