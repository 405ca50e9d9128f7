"""The official Fixup code's parameter groups (tracks/vision/optimizer.py), step by step.

Zhang et al.'s cifar_train.py: the classifier's bias (with the scalars) at
lr/10, coupled weight decay 1e-4 on every parameter. Each test applies a known
gradient and checks the update against the closed form.
"""

import dataclasses
import types

import keras
import numpy as np
import pytest

from tracks.vision import experiment
from tracks.common.track import RunContext
from tracks.vision.experiment import VisionSpec
from tracks.vision.optimizer import BIAS_GROUP_RATE, FixupSGD, fixup_groups
from tracks.vision.presets import PRESETS

LR = 0.1
TEN_CLASSES = types.SimpleNamespace(num_classes=10)  # the data a model is built for: 10 classes
CONFIG = dataclasses.replace(PRESETS["smoke"], fixup_groups=True, learning_rate=LR, schedule="step", warmup_steps=0)


def _model(variant="fixup"):
    keras.utils.set_random_seed(0)
    return experiment.build_model(VisionSpec(variant, 8), RunContext(CONFIG, data=TEN_CLASSES))


def _values(model):
    return {variable.path: np.array(variable.numpy()) for variable in model.trainable_variables}


def _step(model, optimizer, gradient_of):
    variables = model.trainable_variables
    optimizer.apply_gradients([(gradient_of(variable), variable) for variable in variables])


def test_the_classifier_bias_moves_at_a_tenth_of_the_rate_and_the_rest_at_the_full_rate():
    model = _model()
    slow, scales = fixup_groups(model)
    assert slow == ("classifier/bias",)
    optimizer = FixupSGD(LR, momentum=0.9, slow_paths=slow, decay_scales=scales)
    before = _values(model)
    ones = lambda variable: keras.ops.ones(variable.shape)  # noqa: E731
    _step(model, optimizer, ones)
    _step(model, optimizer, ones)  # momentum: the second step moves (1 + 0.9) times the first
    after = _values(model)
    for path, value in after.items():
        rate = LR * BIAS_GROUP_RATE if path == "classifier/bias" else LR
        np.testing.assert_allclose(before[path] - value, rate * 2.9, rtol=1e-5, err_msg=path)


def test_coupled_decay_reaches_every_parameter_and_the_scalars_values_at_their_rate():
    model = _model()
    slow, scales = fixup_groups(model)
    # Every Fixup scalar (stem, head, five per block for 3 blocks) is in the decay table at 0.1.
    assert len(scales) == 2 + 5 * 3 and set(scales.values()) == {0.1}
    decay = 1e-2
    optimizer = FixupSGD(LR, momentum=0.0, coupled_weight_decay=decay, slow_paths=slow, decay_scales=scales)
    # Give every parameter a non-zero value first, so that decay shows on all of them.
    for variable in model.trainable_variables:
        variable.assign(keras.ops.ones(variable.shape) * 0.5)
    block = model.get_layer("stage1_block1")
    scale_before = float(block.scale.value)
    _step(model, optimizer, lambda variable: keras.ops.zeros(variable.shape))
    after = _values(model)
    for path, value in after.items():
        if path in scales:  # the stored variable: 0.1 * decay, i.e. decay on the value at lr/10
            expected = 0.5 * (1 - LR * decay * 0.1)
        elif path == "classifier/bias":
            expected = 0.5 * (1 - LR * BIAS_GROUP_RATE * decay)
        else:
            expected = 0.5 * (1 - LR * decay)
        np.testing.assert_allclose(value, expected, rtol=1e-6, err_msg=path)
    # On the scale's value s: s <- s - (lr / 10) * decay * s, the official update of the bias group.
    assert float(block.scale.value) == pytest.approx(scale_before * (1 - LR / 10 * decay), rel=1e-6)


def test_the_groups_apply_to_fixup_only_and_replace_the_models_l2_penalty():
    fixup, residual = _model("fixup"), _model("residual")
    assert not fixup.losses  # decay comes from the optimizer: never twice
    assert residual.losses  # He et al.'s L2 penalty on the kernels, unchanged
    total = 100
    assert isinstance(experiment.build_optimizer(CONFIG, VisionSpec("fixup", 8), fixup, total), FixupSGD)
    assert not isinstance(experiment.build_optimizer(CONFIG, VisionSpec("residual", 8), residual, total), FixupSGD)
    off = dataclasses.replace(CONFIG, fixup_groups=False)
    keras.utils.set_random_seed(0)
    plain_fixup = experiment.build_model(VisionSpec("fixup", 8), RunContext(off, data=TEN_CLASSES))
    assert plain_fixup.losses  # without the groups: kernels decayed through the model, as before
    assert not isinstance(experiment.build_optimizer(off, VisionSpec("fixup", 8), plain_fixup, total), FixupSGD)


def test_a_negative_decay_is_refused():
    with pytest.raises(ValueError, match="coupled_weight_decay must be >= 0, got -1"):
        FixupSGD(LR, coupled_weight_decay=-1.0)


def test_the_summary_states_each_variants_recipe():
    from tracks.vision.report import recipe_line

    grouped = PRESETS["nonorm"]  # the groups and the clip are the preset's (issue 41)
    nonorm = recipe_line(grouped)
    assert "lr 0.1 (cosine, 156 warm-up steps)" in nonorm and "batch 64" in nonorm
    assert "except fixup: the official Fixup code's groups (the classifier's bias at lr/10" in nonorm
    assert nonorm.endswith("every step's gradient clipped to a global norm of 1.")
    # Without the fixup variant (or without the groups: --no-fixup-groups) no run claims them.
    assert "fixup" not in recipe_line(dataclasses.replace(grouped, variants=("plain-nonorm",)))
    assert "fixup" not in recipe_line(dataclasses.replace(grouped, fixup_groups=False))
    assert "clipped" not in recipe_line(PRESETS["quick"])
    assert "lr 0.1 (cosine, 92 warm-up steps)" in recipe_line(PRESETS["quick"])


@pytest.mark.parametrize("variant", ["fixup", "residual"])  # FixupSGD and Keras' SGD
def test_gradient_clip_scales_a_large_step_to_the_global_norm_and_leaves_a_small_one(variant):
    config = dataclasses.replace(CONFIG, gradient_clip=1.0, momentum=0.0, weight_decay=0.0)
    model = _model(variant)
    count = sum(int(np.prod(variable.shape)) for variable in model.trainable_variables)
    for size, factor in ((10.0, 1.0 / 10.0), (0.5, 1.0)):  # global norms above and below the clip
        optimizer = experiment.build_optimizer(config, VisionSpec(variant, 8), model, 100)
        before = _values(model)
        value = size / np.sqrt(count)  # every entry equal: the global norm is `size`
        _step(model, optimizer, lambda variable: keras.ops.full(variable.shape, value))
        for path, after in _values(model).items():
            rate = LR * BIAS_GROUP_RATE if variant == "fixup" and path == "classifier/bias" else LR
            np.testing.assert_allclose(before[path] - after, rate * value * factor, rtol=1e-4, err_msg=path)
    unclipped = experiment.build_optimizer(CONFIG, VisionSpec(variant, 8), model, 100)
    assert unclipped.global_clipnorm is None  # 0, every preset's default: the papers' unclipped SGD


def test_a_negative_gradient_clip_is_refused():
    with pytest.raises(ValueError, match=r"--gradient-clip must be >= 0 \(0 = off\), got -1"):
        dataclasses.replace(PRESETS["nonorm"], gradient_clip=-1.0)


def test_the_class_preset_is_the_quick_recipe_at_hes_depths_trained_longer():
    from tracks.vision.report import recipe_line

    quick, lesson = PRESETS["quick"], PRESETS["class"]
    assert lesson.depths == (20, 56)  # He et al.'s: 9 and 27 blocks
    for field in ("width", "batch_size", "learning_rate", "schedule", "momentum", "weight_decay", "variants",
                  "gradient_clip", "lesion_images", "landscape_steps"):
        assert getattr(lesson, field) == getattr(quick, field), field
    assert lesson.epochs * lesson.train_size > quick.epochs * quick.train_size
    for preset in (quick, lesson):  # both warm every model up over its first 2 epochs
        assert preset.warmup_steps == 2 * (preset.train_size // preset.batch_size) and preset.warmup_from_depth == 0
    assert "lr 0.1 (cosine, 186 warm-up steps)" in recipe_line(lesson)
