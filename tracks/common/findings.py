"""Sentences about a run's results, computed from its numbers.

A run's summary.md states what the run shows only through findings: small
functions that take the run's results (a `RunResults`,
tracks/common/results.py), test one claim against a stated threshold, and write one sentence that gives the
numbers and says whether the claim held. Nothing in a summary is a static
claim about results: if the numbers do not show something, the sentence says
so. Each track has its finding functions (tracks/<track>/findings.py); this
module has what they share.
"""

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class Finding:
    """One claim tested on a run: its title, whether it held, and the sentence.

    `holds` is None for a finding that only reports measurements (no claim).
    `margin`, for a claim, is by how much it is met (positive when it holds;
    infinite when a divergence decides it): what a run of several seeds
    compares with the spread (tracks/common/seeds_report.py).
    """

    title: str
    holds: bool | None
    text: str
    margin: float | None = None

    def markdown(self):
        mark = "" if self.holds is None else (" (holds)" if self.holds else " (does not hold)")
        return f"- **{self.title}**{mark}: {self.text}"


def finding_lines(findings):
    """Markdown bullet lines of the findings that apply (None = no data for it)."""
    lines = [finding.markdown() for finding in findings if finding is not None]
    return lines or ["- (no finding applies: the run has no comparable models)"]


def entries_by(results, key, *, variant=None, warmup=None):
    """{depth: value of `key`} of the finished entries (optionally one variant / warm-up)."""
    found = {}
    for entry in results.models:
        if variant is not None and entry.variant != variant:
            continue
        if warmup is not None and entry.warmup != warmup:
            continue
        value = getattr(entry, key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            found[entry.depth] = value
    return found


def chance_accuracy(num_classes):
    """A classifier's accuracy by chance: one class in `num_classes` (10 when unknown)."""
    return 1.0 / (num_classes or 10)


def percent(value):
    return f"{100 * value:.1f}%"


def scientific(value):
    """A number spanning orders of magnitude, readable: 0.338, 31.5, 1.2e+04, 3e-27."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undefined"
    if value == 0 or 1e-3 <= abs(value) < 1e4:
        return f"{value:.3g}"
    return f"{value:.2g}"


def diverged_models(results):
    """A measurement-only finding listing the models whose loss stopped being finite, and where."""
    diverged = [m for m in results.models if m.diverged]
    if not diverged:
        return None
    listed = ", ".join(f"{m.id} ({m.diverged_at})" if m.diverged_at else m.id for m in diverged)
    return Finding("Diverged", None, f"the loss of {listed} became NaN or infinite; "
                   "these models have no final error and are left out of the other findings.")


def depth_scaling(initialisation, key="gradient_gain", what="gradient gain"):
    """A measurement-only finding: how one instrument's number at initialisation changes with depth.

    For each variant measured at two or more depths: the values, and the
    per-layer factor of a geometric fit, `(value_deep / value_shallow) ^ (1 / (deep - shallow))`.
    """
    by_variant = {}
    for label, values in initialisation.items():
        variant, _, depth = label.rpartition("-")
        value = values.get(key)
        if depth.isdigit() and value is not None and value > 0 and math.isfinite(value):
            by_variant.setdefault(variant, {})[int(depth)] = value
    sentences = []
    for variant, values in by_variant.items():
        if len(values) < 2:
            continue
        depths = sorted(values)
        listed = " -> ".join(scientific(values[d]) for d in depths)
        shallow, deep = depths[0], depths[-1]
        factor = (values[deep] / values[shallow]) ** (1 / (deep - shallow))
        sentences.append(f"{variant} {listed} at {'/'.join(map(str, depths))} layers "
                         f"(x{factor:.3g} per layer)")
    if not sentences:
        return None
    return Finding(f"{what[0].upper()}{what[1:]} against depth", None, "; ".join(sentences) + ".")
