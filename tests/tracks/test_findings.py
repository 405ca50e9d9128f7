"""The computed findings of summary.md: each tested where its claim holds and where it does not."""

import math

import numpy as np
import pytest

from tracks.common.findings import finding_lines, scientific
from tracks.language import findings as language
from tracks.language.results import LanguageResults
from tracks.vision import findings as vision
from tracks.vision import trained_net_findings as trained_net
from tracks.vision.results import VisionResults


def _vision(errors, init=None, extra=None):
    """Vision results from {(variant, depth): final training error}."""
    extra = extra or {}
    models = [{"id": f"{v}-{d}", "variant": v, "depth": d, "train_error": e, **extra.get((v, d), {})}
              for (v, d), e in errors.items()]
    return VisionResults.from_json({"models": models, "initialisation": init or {}})


def test_degradation_holds_only_for_five_points_or_more():
    found = vision.degradation(_vision({("plain", 14): 0.43, ("plain", 44): 0.68}))
    assert found.holds and "+25.0 points" in found.text and "degradation problem" in found.text
    small = vision.degradation(_vision({("plain", 14): 0.43, ("plain", 44): 0.46}))
    assert not small.holds and "less than the 5 points" in small.text
    assert vision.degradation(_vision({("plain", 14): 0.43})) is None  # one depth: nothing to say


def test_deeper_residual_trains_better_or_the_summary_says_it_did_not():
    assert vision.deeper_residual_trains_better(_vision({("residual", 14): 0.40, ("residual", 44): 0.38})).holds
    worse = vision.deeper_residual_trains_better(_vision({("residual", 14): 0.416, ("residual", 44): 0.556}))
    assert not worse.holds and "trains worse" in worse.text and "55.6%" in worse.text
    assert "already fit" not in worse.text
    # Both near the floor (issue 41's synthetic runs): the summary says why depth did not win.
    fitted = vision.deeper_residual_trains_better(_vision({("residual", 20): 0.029, ("residual", 56): 0.030}))
    assert not fitted.holds and "already fit their training data" in fitted.text and "warm-up" not in fitted.text
    # A shallow net that fits beside a deep one that did not train: that is the deep net's failure.
    stalled = vision.deeper_residual_trains_better(_vision({("residual", 20): 0.03, ("residual", 56): 0.40}))
    assert not stalled.holds and "trains worse" in stalled.text and "already fit" not in stalled.text


def _curves(shallow, deep, *, warmup, depths=(20, 56)):
    """Vision results of two residual nets from their per-epoch training errors."""
    extra = {("residual", depth): {"train_errors": curve, "warmup_steps": warmup, "num_classes": 10}
             for depth, curve in zip(depths, (shallow, deep))}
    return _vision({("residual", depths[0]): shallow[-1], ("residual", depths[1]): deep[-1]}, extra=extra)


def test_deeper_residual_trains_worse_the_verdict_reads_the_curves():
    # Seed 4 of the offline class preset: warm-up on, both nets off chance after epoch 2 (the deep one
    # slower), the deep one never catches up. Not a stall: the verdict must not send the student to warm-up.
    slower = vision.deeper_residual_trains_better(
        _curves([0.863, 0.635, 0.531, 0.45, 0.264], [0.894, 0.831, 0.660, 0.47, 0.291], warmup=186))
    assert not slower.holds and "both left chance after epoch 2" in slower.text
    assert "behind after every epoch, by 19.6 points at the widest (epoch 2) and 2.7 after the last" in slower.text
    assert "not the stall that warm-up prevents" in slower.text and "try" not in slower.text
    # A stall with warm-up on: the deep net at chance two epochs longer.
    stalled_anyway = vision.deeper_residual_trains_better(
        _curves([0.80, 0.60, 0.50, 0.45], [0.90, 0.89, 0.70, 0.55], warmup=92))
    assert "left chance after epoch 3, the shallower after epoch 1" in stalled_anyway.text
    assert "stalled with 92 steps of warm-up" in stalled_anyway.text and "a longer one" in stalled_anyway.text
    # The stall warm-up prevents: no warm-up, the deep net at chance for its first epochs.
    stalled = vision.deeper_residual_trains_better(
        _curves([0.80, 0.60, 0.50, 0.45], [0.90, 0.89, 0.70, 0.55], warmup=0))
    assert "left chance after epoch 3, the shallower after epoch 1" in stalled.text
    assert "no learning-rate warm-up" in stalled.text and "try --warmup-steps" in stalled.text
    never = vision.deeper_residual_trains_better(_curves([0.80, 0.60], [0.90, 0.899], warmup=0))
    assert "never left chance (89.9% after epoch 2)" in never.text and "try --warmup-steps" in never.text
    # No stall: ahead for a while, behind at the end; warm-up is not the advice either way.
    crossed = vision.deeper_residual_trains_better(
        _curves([0.80, 0.60, 0.40, 0.30], [0.80, 0.58, 0.39, 0.31], warmup=0))
    assert "ahead after epochs 1, 2, 3 and behind at the end" in crossed.text
    assert "not the stall that warm-up prevents" in crossed.text and "try --warmup" not in crossed.text


def test_deeper_residual_trains_worse_without_curves_says_where_to_look():
    # A results.json written before 0.3.0 kept no curves: the verdict does not guess at warm-up.
    old = vision.deeper_residual_trains_better(_vision({("residual", 20): 0.26, ("residual", 56): 0.29}))
    assert not old.holds and "training_curves.png" in old.text and "--warmup-steps" in old.text
    assert "from the curves" not in old.text


def test_shortcut_benefit_at_the_deepest_depth():
    results = _vision({("plain", 14): 0.44, ("plain", 44): 0.68, ("residual", 14): 0.42, ("residual", 44): 0.40})
    found = vision.shortcut_benefit(results)
    assert found.holds and "+28.0 points at 44 layers" in found.text
    assert not vision.shortcut_benefit(_vision({("plain", 44): 0.41, ("residual", 44): 0.40})).holds


def test_gradient_at_initialisation_compares_distance_from_one():
    init = {"plain-44": {"gradient_gain": 1.6e3}, "residual-44": {"gradient_gain": 22.0}}
    found = vision.gradient_at_initialisation(VisionResults.from_json({"models": [], "initialisation": init}))
    assert found.holds and "1.6e+03" in found.text
    init = {"plain-44": {"gradient_gain": 0.9}, "residual-44": {"gradient_gain": 31.5}}
    found = vision.gradient_at_initialisation(VisionResults.from_json({"models": [], "initialisation": init}))
    assert not found.holds and "does not explain" in found.text


def _lesion(intact, lesioned):
    return {"lesion": {"intact": intact, "lesioned": lesioned}, "num_classes": 10}


def test_one_block_barely_matters_needs_eighty_percent_above_chance():
    kept = _vision({("residual", 44): 0.3}, extra={("residual", 44): _lesion(0.80, [0.78, 0.77, None, 0.75])})
    assert trained_net.one_block_barely_matters(kept).holds
    broken = _vision({("residual", 14): 0.3}, extra={("residual", 14): _lesion(0.774, [0.374, 0.134, 0.5])})
    found = trained_net.one_block_barely_matters(broken)
    assert not found.holds and "median 37.4%" in found.text and "worst 13.4%" in found.text


def test_the_lesion_lines_give_the_median_the_finding_gives():
    from tracks.vision.report import lesion_lines

    # An even count of removable blocks: the median is the mean of the middle two, in both places.
    runs = _vision({("residual", 44): 0.3}, extra={("residual", 44): _lesion(0.80, [0.78, 0.70, None, 0.75, 0.60])})
    assert "median 72.5%" in trained_net.one_block_barely_matters(runs).text
    assert lesion_lines(runs) == ["- `residual-44`: intact 80.0%; one block removed: median 72.5%, worst 60.0% "
                                  "(4 of 5 blocks removable)"]


def _deletion(intact, means):
    return {"ensemble": {"deletion": {"intact": intact, "num_removed": [1, 2, 4, 8], "mean": means,
                                      "candidates": ["b"] * 19}}, "num_classes": 10}


def test_deletion_contrast_residual_must_keep_more_at_every_k():
    extra = {("residual", 44): _deletion(0.8, [0.75, 0.7, 0.6, 0.4]),
             ("plain", 44): _deletion(0.6, [0.2, 0.12, 0.1, 0.1])}
    found = trained_net.deletion_contrast(_vision({("residual", 44): 0.3, ("plain", 44): 0.5}, extra=extra))
    assert found.holds and "k = 1, 2, 4, 8 of 19" in found.text
    extra[("plain", 44)] = _deletion(0.6, [0.58, 0.57, 0.56, 0.5])
    assert not trained_net.deletion_contrast(_vision({("residual", 44): 0.3, ("plain", 44): 0.5}, extra=extra)).holds


def test_deletion_contrast_makes_no_claim_when_a_net_never_left_chance():
    # The class preset offline, seed 1: plain-56 at 11.6% intact (chance 10%), so its "share kept"
    # at k = 8 (10.6%: 0.375 of 1.6 points) beat the residual net's by noise and the claim failed.
    extra = {("residual", 56): _deletion(0.714, [0.654, 0.525, 0.349, 0.144]),
             ("plain", 56): _deletion(0.116, [0.113, 0.103, 0.106, 0.106])}
    found = trained_net.deletion_contrast(_vision({("residual", 56): 0.26, ("plain", 56): 0.88}, extra=extra))
    assert found.holds is None and "plain-56 never left chance" in found.text and "residual-56 65.4%" in found.text
    # Just above the line (5 points), the comparison is made again.
    extra[("plain", 56)] = _deletion(0.151, [0.11, 0.10, 0.10, 0.10])
    assert trained_net.deletion_contrast(_vision({("residual", 56): 0.26, ("plain", 56): 0.88}, extra=extra)).holds


def test_deletion_contrast_leaves_out_the_k_at_which_both_nets_are_back_at_chance():
    # The offline quick run, seed 0 (docs/reference/vision-offline-s0): at k = 8 both nets are at chance,
    # and plain-32's 10.5% against residual-32's 10.4% is noise, not a plain net that degrades less.
    extra = {("residual", 32): _deletion(0.790, [0.696, 0.413, 0.180, 0.104]),
             ("plain", 32): _deletion(0.306, [0.116, 0.093, 0.118, 0.105])}
    found = trained_net.deletion_contrast(_vision({("residual", 32): 0.22, ("plain", 32): 0.70}, extra=extra))
    assert found.holds and "At k = 8 both nets are back at chance: less than 5.0 points above 10.0%." in found.text
    assert "at every k where one of them is above chance (1, 2, 4)" in found.text
    assert "residual-32 69.6%, 41.3%, 18.0%, 10.4%" in found.text  # every k is still shown
    # One net above chance at a k is a comparison: a residual net broken where its plain twin is not fails.
    extra[("plain", 32)] = _deletion(0.306, [0.116, 0.093, 0.118, 0.2])
    found = trained_net.deletion_contrast(_vision({("residual", 32): 0.22, ("plain", 32): 0.70}, extra=extra))
    assert found.holds is False and "back at chance" not in found.text and "at every k here" in found.text
    # Both at chance at every k: nothing to compare, so no verdict.
    extra = {("residual", 32): _deletion(0.790, [0.12, 0.11, 0.10, 0.10]),
             ("plain", 32): _deletion(0.306, [0.116, 0.093, 0.118, 0.105])}
    found = trained_net.deletion_contrast(_vision({("residual", 32): 0.22, ("plain", 32): 0.70}, extra=extra))
    assert found.holds is None and "At k = 1, 2, 4, 8 both nets are back at chance" in found.text
    # With the number of images recorded, noise is 3 standard errors of chance on them: 4.0 points on 500
    # images at 10%, so 14.8% with blocks removed is above chance (CIFAR-10's reference run at k = 8).
    extra = {("residual", 32): _deletion(0.540, [0.497, 0.375, 0.278, 0.148]),
             ("plain", 32): _deletion(0.400, [0.155, 0.120, 0.097, 0.104])}
    for study in extra.values():
        study["ensemble"]["deletion"].update(chance=0.1, images=500)
    found = trained_net.deletion_contrast(_vision({("residual", 32): 0.45, ("plain", 32): 0.60}, extra=extra))
    assert found.holds and "back at chance" not in found.text and "at every k:" in found.text
    extra[("residual", 32)]["ensemble"]["deletion"]["mean"][-1] = 0.139  # 3.9 points above: noise
    found = trained_net.deletion_contrast(_vision({("residual", 32): 0.45, ("plain", 32): 0.60}, extra=extra))
    assert ("At k = 8 both nets are back at chance: less than 4.0 points above 10.0%, the largest class's share "
            "of these test images (3 standard errors on 500 images)." in found.text), found.text


def test_chance_is_the_best_constant_guess_on_the_lesion_images_when_the_run_recorded_it():
    # 50 test images, one class 16% of them: a net stuck on that class scores 16% intact and after any
    # deletion (the no-normalisation preset on the synthetic set). With chance taken as 1 in 10 it
    # looked like a net that learnt something and keeps all of it.
    stuck = {**_deletion(0.16, [0.16, 0.16, 0.16, 0.14]), "lesion": {"intact": 0.16, "lesioned": [0.16, 0.14],
                                                                     "chance": 0.16}}
    stuck["ensemble"]["deletion"]["chance"] = 0.16
    trained = _deletion(0.38, [0.396, 0.34, 0.276, 0.194])
    trained["ensemble"]["deletion"]["chance"] = 0.16
    runs = _vision({("residual", 56): 0.6, ("plain", 56): 0.9}, extra={("residual", 56): trained, ("plain", 56): stuck})
    found = trained_net.deletion_contrast(runs)
    assert found.holds is None and "plain-56 never left chance (16.0%, the largest class's share" in found.text
    lesioned = trained_net.one_block_barely_matters(runs, variant="plain")
    assert lesioned.holds is None and "plain-56 never left chance (16.0%" in lesioned.text
    assert "median 15.0%" in lesioned.text
    # A run recorded before chance was: one in num_classes, as before.
    del stuck["ensemble"]["deletion"]["chance"], stuck["lesion"]["chance"]
    runs = _vision({("residual", 56): 0.6, ("plain", 56): 0.9}, extra={("residual", 56): trained, ("plain", 56): stuck})
    assert trained_net.one_block_barely_matters(runs, variant="plain").holds


def test_chance_on_labels_is_the_largest_class_share():
    from tracks.vision.experiment import chance_on

    assert chance_on(np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])) == 0.1
    assert chance_on(np.array([[3], [3], [1], [0]])) == 0.5  # labels of shape (n, 1)
    assert chance_on(np.array([7] * 3 + [2])) == 0.75  # classes absent from the images do not count
    assert chance_on(np.array([], dtype=int)) is None


def test_short_paths_from_the_gradient_share():
    n = 10
    lengths = list(range(n + 1))
    short = [0.2, 0.3, 0.3, 0.1, 0.05, 0.05, 0, 0, 0, 0, 0]
    extra = {("residual", 62): {"ensemble": {"paths": {"lengths": lengths, "gradient_share": short}}}}
    found = trained_net.short_paths(_vision({("residual", 62): 0.3}, extra=extra))
    assert found.holds and "90% of the gradient comes through paths of 0-4" in found.text
    binomial = [math.comb(n, k) / 2**n for k in lengths]
    extra[("residual", 62)]["ensemble"]["paths"]["gradient_share"] = binomial[::-1]  # long paths dominate
    assert not trained_net.short_paths(_vision({("residual", 62): 0.3}, extra=extra)).holds


def _language(losses, extra=None):
    """Language results from {(variant, depth, warmup): final validation loss or 'diverged'}."""
    models, extra = [], extra or {}
    for (variant, depth, warmup), loss in losses.items():
        entry = {"id": f"{variant}-{depth}-warmup{warmup}", "variant": variant, "depth": depth, "warmup": warmup,
                 "diverged": loss == "diverged", "val_loss": None if loss == "diverged" else loss}
        entry.update(extra.get((variant, depth, warmup), {}))
        models.append(entry)
    return LanguageResults.from_json({"models": models, "unigram_loss": 3.3})


def test_post_ln_needs_warmup_by_a_tenth_of_a_nat_or_divergence():
    assert language.needs_warmup(_language({("post", 6, 0): 2.05, ("post", 6, 100): 1.90})).holds
    diverged = language.needs_warmup(_language({("post", 6, 0): "diverged", ("post", 6, 100): 1.90}))
    assert diverged.holds and "diverged without warm-up" in diverged.text
    indifferent = language.needs_warmup(_language({("post", 6, 0): 1.678, ("post", 6, 100): 1.671}))
    assert not indifferent.holds and "less than 0.1 nats" in indifferent.text


def test_pre_ln_indifferent_within_three_hundredths():
    assert language.trains_without_warmup(_language({("pre", 6, 0): 1.88, ("pre", 6, 100): 1.87})).holds
    needs = language.trains_without_warmup(_language({("pre", 8, 0): 2.279, ("pre", 8, 200): 1.810}))
    assert not needs.holds and "+0.469" in needs.text


def test_plain_fails_needs_half_a_nat():
    found = language.plain_fails(_language({("plain", 6, 0): 3.348, ("pre", 6, 0): 1.90}))
    assert found.holds and "3.300" in found.text
    assert not language.plain_fails(_language({("plain", 6, 0): 2.1, ("pre", 6, 0): 1.90})).holds


def test_xiong_shape_and_sizes():
    grow = {"post-6": {"block_weight_grad_norms": [1.0, 1.5, 2.5]}, "pre-6": {"block_weight_grad_norms": [1.0, 1.0, 0.9]}}
    assert language.xiong_gradients(LanguageResults.from_json({"models": [], "initialisation": grow})).holds
    level = {"post-6": {"block_weight_grad_norms": [2.3, 2.0, 1.8]}, "pre-6": {"block_weight_grad_norms": [1.2, 1.0, 0.8]}}
    found = language.xiong_gradients(LanguageResults.from_json({"models": [], "initialisation": level}))
    assert not found.holds and "Post-LN's gradients are the larger ones" in found.text


def test_stream_is_a_sum_for_pre_ln_only():
    extra = {("pre", 4, 0): {"decomposition": {"relative_error": 3e-7}},
             ("post", 4, 0): {"decomposition": {"relative_error": 0.42}}}
    found = language.stream_is_a_sum(_language({("pre", 4, 0): 1.9, ("post", 4, 0): 1.9}, extra=extra))
    assert found.holds and "post: 0.42" in found.text
    extra[("pre", 4, 0)]["decomposition"]["relative_error"] = 0.01
    assert not language.stream_is_a_sum(_language({("pre", 4, 0): 1.9, ("post", 4, 0): 1.9}, extra=extra)).holds


def test_measurement_only_findings_make_no_claim_and_markdown_says_which():
    extra = {("pre", 4, 0): {"logit_lens": {"loss": [4.2, 3.0, 2.2, 2.0, 1.9]}}}
    found = language.logit_lens_depth(_language({("pre", 4, 0): 1.9}, extra=extra))
    assert found.holds is None and "half of that drop by block 1 of 4" in found.text
    assert finding_lines([found])[0].startswith("- **Logit lens**: ")
    assert finding_lines([None]) == ["- (no finding applies: the run has no comparable models)"]


def test_scientific_formatting_keeps_tiny_and_huge_numbers_readable():
    assert scientific(1e-27) == "1e-27" and scientific(0.338) == "0.338" and scientific(5.6e8) == "5.6e+08"
    assert scientific(None) == "undefined" and scientific(float("nan")) == "undefined"


def test_diverged_models_are_named_with_when():
    results = _language({("post", 4, 0): "diverged", ("pre", 4, 0): 1.88})
    results.models[0].diverged_at = "step 500"
    found = language.language_findings(results, ("pre", "post"))[0]
    assert found.title == "Diverged" and "post-4-warmup0 (step 500)" in found.text
    vision_results = _vision({("fixup", 44): None}, extra={("fixup", 44): {"diverged": True, "diverged_epoch": 2,
                                                                       "diverged_at": "epoch 3"}})
    assert "fixup-44 (epoch 3)" in vision.vision_findings(vision_results, ("fixup",))[0].text
    assert vision.vision_findings(_vision({("plain", 8): 0.4}), ("plain",))[0] is None


def test_depth_scaling_fits_a_per_layer_factor():
    from tracks.common.findings import depth_scaling

    init = {"plain-nonorm-20": {"gradient_gain": 0.5}, "plain-nonorm-110": {"gradient_gain": 0.5 * 0.9**90},
            "fixup-20": {"gradient_gain": None}, "fixup-110": {"gradient_gain": None}, "lone-20": {"gradient_gain": 2.0}}
    found = depth_scaling(init)
    assert found.holds is None and "x0.9 per layer" in found.text and "fixup" not in found.text and "lone" not in found.text
    assert depth_scaling({"plain-20": {"gradient_gain": 1.0}}) is None


def test_smoother_landscape_compares_the_non_convex_share_of_the_plain_twin():
    def grid(share):
        return {"landscape": {"center_loss": 0.5, "edge_rise": 3.0, "curvature": 10.0, "nonconvex_share": share}}

    smooth = _vision({("plain", 32): 0.3, ("residual", 32): 0.2},
                     extra={("plain", 32): grid(0.4), ("residual", 32): grid(0.05)})
    found = trained_net.smoother_landscape(smooth)
    assert found.holds and "5% of the plane non-convex" in found.text and "40%" in found.text
    rough = _vision({("plain", 32): 0.3, ("residual", 32): 0.2},
                    extra={("plain", 32): grid(0.05), ("residual", 32): grid(0.05)})
    assert not trained_net.smoother_landscape(rough).holds  # equal is not smoother
    assert trained_net.smoother_landscape(_vision({("residual", 32): 0.2}, extra={("residual", 32): grid(0.1)})) is None
    # Convex is not flat: a more convex plane around a sharper minimum is said to be both.
    sharp = {"landscape": {**grid(0.05)["landscape"], "curvature": 23.5}}
    found = trained_net.smoother_landscape(_vision({("plain", 32): 0.3, ("residual", 32): 0.2},
                                              extra={("plain", 32): grid(0.4), ("residual", 32): sharp}))
    assert found.holds and "its minimum is the sharper one" in found.text and "23.5 against 10" in found.text
    flat = {"landscape": {**grid(0.05)["landscape"], "curvature": 4.0}}
    found = trained_net.smoother_landscape(_vision({("plain", 32): 0.3, ("residual", 32): 0.2},
                                              extra={("plain", 32): grid(0.4), ("residual", 32): flat}))
    assert "its minimum is the flatter one" in found.text
    assert "sharper" not in trained_net.smoother_landscape(smooth).text  # equal curvatures: no sharpness claim


def _nonorm(errors, diverged=()):
    models = [{"id": f"{v}-56", "variant": v, "depth": 56, "num_classes": 10, "train_error": e,
               "diverged": v in diverged, "diverged_epoch": 0 if v in diverged else None}
              for v, e in errors.items()]
    return VisionResults.from_json({"models": models})


def test_without_normalisation_needs_the_he_stacks_to_fail_and_the_zero_branch_nets_to_train():
    found = vision.without_normalisation(_nonorm(
        {"plain-nonorm": 0.905, "residual-nonorm": None, "fixup": 0.62, "preact-zero-nonorm": 0.73,
         "residual": 0.54}, diverged=("residual-nonorm",)))
    assert found.holds and "residual-nonorm-56 diverged" in found.text and "plain-nonorm-56 stuck at chance" in found.text
    assert "with BatchNorm residual-56 reaches 54.0%" in found.text
    assert found.margin == pytest.approx(min(0.27 / 0.1 - 2.0, 1.5 - 0.095 / 0.1))
    # A plain stack that trains (accuracy 3 x chance) breaks the claim, and so does a Fixup net at chance.
    assert not vision.without_normalisation(_nonorm({"plain-nonorm": 0.70, "fixup": 0.62})).holds
    assert not vision.without_normalisation(_nonorm({"plain-nonorm": 0.90, "fixup": 0.88})).holds
    assert vision.without_normalisation(_nonorm({"fixup": 0.6})) is None  # nothing that should fail


def _dynamics(first_ratio, first_rank, last_ratio, last_rank):
    return {"first": {"epoch": 0, "branch_ratio": first_ratio, "delta_rank": first_rank},
            "last": {"epoch": 8, "branch_ratio": last_ratio, "delta_rank": last_rank,
                     "delta_effective_rank": float(last_rank)}}


def test_branches_grow_from_zero_only_for_rezeroialised_nets_that_leave_it():
    results = VisionResults.from_json({"models": [
        {"id": "fixup-56", "variant": "fixup", "depth": 56, "dynamics": _dynamics(0.0, 0, 0.11, 32)},
        {"id": "residual-56", "variant": "residual", "depth": 56, "dynamics": _dynamics(1.29, 31, 0.38, 32)},
    ]})
    found = vision.branches_grow_from_zero(results)
    assert found.holds and "fixup-56 branch ratio 0 -> 0.11, rank of x_L - x_0 0 -> 32" in found.text
    assert "residual-56 starts at branch ratio 1.29, rank 31" in found.text
    stuck = VisionResults.from_json(
        {"models": [{"id": "fixup-56", "variant": "fixup", "depth": 56, "dynamics": _dynamics(0.0, 0, 0.0, 0)}]})
    assert not vision.branches_grow_from_zero(stuck).holds
    assert vision.branches_grow_from_zero(VisionResults(models=results.models[1:])) is None


def test_short_paths_of_a_dead_network_is_a_measurement_not_a_crash():
    """A net through which no gradient passes (every path 0) has no path lengths to report."""
    dead = VisionResults.from_json({"models": [{"id": "preact-zero-nonorm-56", "variant": "preact-zero-nonorm",
                                                "depth": 56, "ensemble": {"paths": {"lengths": list(range(28)),
                                                                                   "gradient_share": [0.0] * 28}}}]})
    found = trained_net.short_paths(dead, "preact-zero-nonorm")
    assert found.holds is None and "a dead network" in found.text


def test_the_lesion_figures_draw_the_chance_the_findings_use():
    """lesion.png and block_deletion.png draw chance in test error where the findings read it: the largest
    class's share of the study's images, and the band of 3 standard errors that the deletion finding calls
    back at chance; a run recorded before the studies kept their chance gets no band (its shares are unknown)."""
    import types

    from tracks.vision.report import chance_band

    entry = types.SimpleNamespace(num_classes=10)
    study = {"chance": 0.134, "images": 500}
    keywords, words = chance_band(study, entry)
    noise = trained_net.noise_above_chance(study, 0.134)
    assert keywords == pytest.approx({"chance": 86.6, "chance_noise": 100 * noise})
    assert keywords["chance_noise"] == pytest.approx(4.57, abs=0.01)
    assert words == f"grey band: chance (always the largest class) ± {trained_net.NOISE_ERRORS} standard errors"
    assert chance_band({}, entry) == ({}, None)
    assert chance_band({"chance": 0.134}, entry) == ({}, None)  # no count of images: no standard error
