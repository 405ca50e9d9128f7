"""Issue 41's rate: on how many seeds each identity-initialised net trained without normalisation."""

from tracks.vision.findings import training_rate_sentence, training_rates
from tracks.vision.results import VisionResults


def _model(variant, error, diverged=False, depth=56):
    return {"id": f"{variant}-{depth}", "variant": variant, "depth": depth, "num_classes": 10,
            "train_error": None if diverged else error, "diverged": diverged}


def _seed(plain, fixup, preact, plain_diverged=False, fixup_diverged=False):
    return VisionResults.from_json({"models": [
        _model("plain-nonorm", plain, plain_diverged), _model("fixup", fixup, fixup_diverged),
        _model("preact-zero-nonorm", preact), _model("residual", 0.2)]})


def test_a_net_trained_when_at_least_15_points_below_the_plain_net_and_not_diverged():
    per_seed = [
        (0, _seed(0.90, 0.60, 0.76)),   # 30 points below; 14 points below: not trained
        (1, _seed(0.90, 0.75, 0.75)),   # exactly 15 points below: trained
        (2, _seed(0.90, 0.20, 0.30, fixup_diverged=True)),   # a NaN never counts
        (3, _seed(0.0, 0.5, 0.5, plain_diverged=True)),   # a diverged plain net counts at chance (0.9)
    ]
    rates = training_rates(per_seed)
    assert set(rates) == {"fixup-56", "preact-zero-nonorm-56"}  # BatchNorm's net and the bar itself: no rate
    assert rates["fixup-56"] == [(0, True), (1, True), (2, False), (3, True)]
    assert rates["preact-zero-nonorm-56"] == [(0, False), (1, True), (2, True), (3, True)]
    sentence = training_rate_sentence(per_seed)
    assert "fixup-56 trained on 3 of 4 seeds (not on seed 2)" in sentence
    assert "preact-zero-nonorm-56 trained on 3 of 4 seeds (not on seed 0)" in sentence
    two_failed = training_rate_sentence(per_seed + [(4, _seed(0.90, 0.89, 0.50))])
    assert "fixup-56 trained on 3 of 5 seeds (not on seeds 2, 4)" in two_failed


def test_without_the_plain_bar_no_rate_is_claimed():
    per_seed = [(0, VisionResults.from_json({"models": [_model("fixup", 0.3), _model("residual", 0.2)]}))]
    assert training_rates(per_seed) == {} and training_rate_sentence(per_seed) == ""
