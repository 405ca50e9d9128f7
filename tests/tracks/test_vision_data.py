"""Tests for tracks/vision/data/: sources, splits, normalisation, image folders,
the synthetic set (the tf.data pipelines: test_vision_pipeline.py).

Nothing here touches the network: tfds is mocked or its status monkeypatched,
image folders are written with PIL into tmp_path, and the decode cache goes
to tmp_path through $RESIDUAL_KERAS_CACHE.
"""

import hashlib
import os

import numpy as np
import pytest
from PIL import Image

from tracks.common import tfds_source
from tracks.vision import data as vision_data
from tracks.vision.data import SYNTHETIC_CLASS_NAMES, load_vision_data
from tracks.vision.source import parse_source


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RESIDUAL_KERAS_CACHE", str(tmp_path / "cache"))


SMALL = (100, 20)  # synthetic (train, test) sizes that take milliseconds


def quiet(message):
    pass


# --------------------------------------------------------------------------- #
# parse_source
# --------------------------------------------------------------------------- #


def test_parse_source_accepts_the_forms_and_normalises_folder_paths(tmp_path):
    assert parse_source("auto") == "auto"
    assert parse_source(" CIFAR10 ") == "cifar10"
    assert parse_source("synthetic") == "synthetic"
    assert parse_source(f"folder:{tmp_path}/.") == f"folder:{tmp_path}"


@pytest.mark.parametrize(
    "source, words",
    [
        ("imagenet", ["'imagenet'", "auto", "cifar10", "synthetic", "folder:PATH"]),
        ("", ["''", "folder:PATH"]),
        ("folder:", ["no path"]),
        ("folder:/no/such/dir", ["/no/such/dir", "not a directory"]),
        (None, ["None"]),
    ],
)
def test_parse_source_rejects_bad_values_naming_them(source, words):
    with pytest.raises(ValueError) as error:
        parse_source(source)
    for word in words:
        assert word in str(error.value)


def test_load_rejects_bad_sizes():
    with pytest.raises(ValueError, match="train_size must be a positive integer, got 0"):
        load_vision_data("synthetic", train_size=0, log=quiet)
    with pytest.raises(ValueError, match="--validation-size 90 \\+ --train-size 20 is more than the 100"):
        load_vision_data(
            "synthetic", train_size=20, validation_size=90, log=quiet, synthetic_examples=SMALL
        )


# --------------------------------------------------------------------------- #
# synthetic
# --------------------------------------------------------------------------- #


def test_synthetic_is_deterministic_balanced_and_seed_dependent():
    sizes = dict(train_examples=300, test_examples=100)
    x, y, x_test, y_test, names = vision_data.make_synthetic_images(seed=3, **sizes)
    again = vision_data.make_synthetic_images(seed=3, **sizes)
    other = vision_data.make_synthetic_images(seed=4, **sizes)
    assert x.shape == (300, 32, 32, 3) and x.dtype == np.uint8
    assert x_test.shape == (100, 32, 32, 3) and y.dtype == np.int32
    assert names == SYNTHETIC_CLASS_NAMES and len(set(names)) == 10
    np.testing.assert_array_equal(np.bincount(y), [30] * 10)  # exactly balanced
    np.testing.assert_array_equal(np.bincount(y_test), [10] * 10)
    for a, b in zip((x, y, x_test, y_test), again[:4]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(x, other[0])
    assert not np.array_equal(x, x_test[:100].repeat(3, axis=0))  # test is not train
    # Not blank: every image has contrast, and the classes differ on average.
    assert (x.reshape(300, -1).std(axis=1) > 10).all()
    class_means = np.stack([x[y == c].mean() for c in range(10)])
    assert 60 < class_means.min() and class_means.max() < 200


def test_synthetic_objects_fade_with_the_faintest_opacity_and_1_is_the_first_set():
    # Half the objects are faint: the fainter they may be, the less edge the images hold
    # (the background's shading and noise stay). Mean absolute step between neighbouring pixels:
    sizes = dict(seed=2, train_examples=600, test_examples=10)

    def edges(faintest):
        x = vision_data.make_synthetic_images(faintest_object=faintest, **sizes)[0].astype(np.float32)
        return np.abs(np.diff(x, axis=2)).mean()

    faint, middle, full = edges(vision_data.FAINTEST_OBJECT), edges(0.5), edges(1.0)
    assert faint < middle < full
    # 1 paints every object fully and draws nothing more: the set of 0.2.0, image for image (the
    # nonorm preset's references were measured on it). This digest was taken from 0.2.0's generator.
    arrays = vision_data.make_synthetic_images(seed=0, train_examples=40, test_examples=20, faintest_object=1)
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays[:4])).hexdigest()
    assert digest == "9ef8fe0009fda386a988fa3509966dc5f667cbe05b890f0c8c60a0f60c13a4fb"
    for bad in (0, -0.1, 1.01, float("nan")):
        with pytest.raises(ValueError, match="faintest_object must be in"):
            vision_data.make_synthetic_images(faintest_object=bad, train_examples=10, test_examples=10)


def test_distractors_clutter_half_the_images_and_leave_everything_else_as_it_was():
    sizes = dict(seed=4, train_examples=400, test_examples=100, faintest_object=1.0)
    clean = vision_data.make_synthetic_images(**sizes)
    assert all(np.array_equal(a, b) for a, b in zip(clean[:4], vision_data.make_synthetic_images(
        distractors=0, **sizes)[:4]))  # 0 draws nothing
    cluttered = vision_data.make_synthetic_images(distractors=4, **sizes)
    np.testing.assert_array_equal(cluttered[1], clean[1])  # the same labels
    np.testing.assert_array_equal(cluttered[3], clean[3])
    again = vision_data.make_synthetic_images(distractors=4, **sizes)
    assert all(np.array_equal(a, b) for a, b in zip(cluttered[:4], again[:4]))  # deterministic
    for images, reference, count in ((cluttered[0], clean[0], 400), (cluttered[2], clean[2], 100)):
        changed = (images != reference).reshape(count, -1).any(axis=1)
        # Half the images (drawn at random) hold pieces; the others are the clean set's, pixel for pixel.
        assert 0.35 < changed.mean() < 0.65
        # The pieces sit under the object and are small (radius 3-5 of 32): in a cluttered image most
        # pixels are untouched, and where a piece lies the image changes by its contrast.
        touched = (np.abs(images.astype(int) - reference.astype(int)) > 8).reshape(count, -1).mean(axis=1)
        assert 0.02 < np.median(touched[changed]) < 0.4
    # More pieces, more clutter: the cluttered images hold more edges than the clean ones, and 8
    # pieces more than 2.
    def edges(x):
        return np.abs(np.diff(x.astype(np.float32), axis=2)).mean()

    two = vision_data.make_synthetic_images(distractors=2, **sizes)[0]
    eight = vision_data.make_synthetic_images(distractors=8, **sizes)[0]
    assert edges(clean[0]) < edges(two) < edges(cluttered[0]) < edges(eight)
    # The faint objects and the distractors combine: with both, the images differ from either alone.
    both = vision_data.make_synthetic_images(seed=4, train_examples=400, test_examples=100, distractors=4,
                                             faintest_object=0.065)
    faint = vision_data.make_synthetic_images(seed=4, train_examples=400, test_examples=100, faintest_object=0.065)
    assert not np.array_equal(both[0], faint[0]) and not np.array_equal(both[0], cluttered[0])
    for bad in (-1, 17, 2.5, True, "4", None):
        with pytest.raises(ValueError, match="distractors must be an integer in 0..16"):
            vision_data.make_synthetic_images(distractors=bad, train_examples=10, test_examples=10)


def test_a_distractor_is_a_piece_of_another_class_never_of_the_images_own(monkeypatch):
    # Painted on a flat grey scene with no object, each piece shows which class it came from; over many
    # images of one label, no piece may be of that label (it would add the label's own cue).
    from tracks.vision.data import synthetic

    size, n = 32, 300
    grid = (np.arange(size, dtype=np.float32) + 0.5)
    xx, yy = grid[None, None, :], grid[None, :, None]
    base = np.full((n, 1, 1, 3), 0.5, np.float32)
    for label in (0, 6, 9):
        labels = np.full(n, label, np.int32)
        seen = set()

        def spy(piece_label, *args, pattern=synthetic.pattern):
            seen.add(piece_label)
            return pattern(piece_label, *args)

        monkeypatch.setattr(synthetic, "pattern", spy)
        painted = synthetic.paint_distractors(np.random.default_rng(label), labels,
                                               np.full((n, size, size, 3), 0.5, np.float32), base, xx, yy, 3)
        monkeypatch.undo()
        assert seen == set(range(10)) - {label}  # every other class, and never its own
        changed = (np.abs(painted - 0.5) > 0.02).reshape(n, -1).any(axis=1)
        assert 0.35 < changed.mean() < 0.65  # a random half of the images


def test_each_preset_has_the_synthetic_set_chosen_for_it():
    from tracks.vision.presets import PRESETS, VisionConfig

    assert PRESETS["nonorm"].synthetic_faintest == 1.0  # the set its five seeds were measured on (issue 41)
    assert PRESETS["nonorm"].synthetic_distractors == 0
    assert PRESETS["class"].synthetic_faintest == vision_data.FAINTEST_OBJECT  # calibrated for it (issue 53)
    assert PRESETS["class"].synthetic_distractors == 0
    # The quick preset's set (issue 66, screening 8): painted, 4 distractors, the background's clutter doubled.
    assert (PRESETS["quick"].synthetic_faintest, PRESETS["quick"].synthetic_distractors,
            PRESETS["quick"].synthetic_clutter) == (1.0, 4, 2.0)
    assert PRESETS["class"].synthetic_clutter == PRESETS["nonorm"].synthetic_clutter == 1.0
    assert VisionConfig().synthetic_faintest == vision_data.FAINTEST_OBJECT  # one default, in two modules
    assert VisionConfig().synthetic_distractors == 0
    # The summary's data line says which set a synthetic run had.
    from tracks.vision.report import synthetic_note

    assert synthetic_note(PRESETS["class"], "synthetic") == (
        f"; half the objects faint, down to opacity {vision_data.FAINTEST_OBJECT:g}")
    assert synthetic_note(PRESETS["nonorm"], "synthetic") == "; every object fully painted"
    assert synthetic_note(PRESETS["quick"], "cifar10") == ""
    # The limit on distractors is one number in two modules.
    from tracks.vision.presets import MAX_DISTRACTORS

    assert MAX_DISTRACTORS == vision_data.synthetic.MAX_DISTRACTORS
    with pytest.raises(ValueError, match="--synthetic-distractors must be in 0..16"):
        VisionConfig(synthetic_distractors=MAX_DISTRACTORS + 1)
    # And the clutter's, and its default: the background of 0.2.0.
    from tracks.vision.presets import MAX_CLUTTER

    assert MAX_CLUTTER == vision_data.synthetic.MAX_CLUTTER
    assert VisionConfig().synthetic_clutter == 1.0
    for bad in (-0.5, MAX_CLUTTER + 0.5):
        with pytest.raises(ValueError, match=r"--synthetic-clutter must be in \[0, 4\]"):
            VisionConfig(synthetic_clutter=bad)
    assert synthetic_note(VisionConfig(synthetic_faintest=1.0, synthetic_distractors=4, synthetic_clutter=2.0),
                          "synthetic") == ("; every object fully painted; 4 distractors in half the images; "
                                           "background clutter x2")


def test_the_option_reaches_the_images_and_old_runs_keep_their_set(monkeypatch):
    from tracks.common.config import config_from_dict, config_to_dict
    from tracks.common.track import RunContext
    from tracks.vision import prepare
    from tracks.vision.presets import VisionConfig

    # load_vision_data makes the set the option asks for (the test images are not split or subset).
    loaded = load_vision_data("synthetic", log=quiet, synthetic_examples=SMALL, synthetic_faintest=1.0)
    made = vision_data.make_synthetic_images(seed=0, train_examples=SMALL[0], test_examples=SMALL[1],
                                             faintest_object=1.0)
    np.testing.assert_array_equal(loaded.x_test, made[2])
    default = load_vision_data("synthetic", log=quiet, synthetic_examples=SMALL)
    assert not np.array_equal(default.x_test, made[2])
    # The track passes the config's value on.
    seen = {}
    monkeypatch.setattr(vision_data, "load_vision_data", lambda *args, **kwargs: seen.update(kwargs))
    prepare.load_data(RunContext(VisionConfig(data="synthetic", synthetic_faintest=0.5, synthetic_distractors=3),
                                 log=quiet))
    assert seen["synthetic_faintest"] == 0.5 and seen["synthetic_distractors"] == 3
    # A config.json from before the option (0.2.0) ran on fully painted objects: --resume and compare
    # read it so; one written now keeps its value.
    written = config_to_dict(VisionConfig(synthetic_faintest=0.3))
    assert config_from_dict(VisionConfig, written).synthetic_faintest == 0.3
    del written["synthetic_faintest"]
    assert config_from_dict(VisionConfig, written).synthetic_faintest == 1.0
    # One written before the distractors had none.
    written = config_to_dict(VisionConfig(synthetic_distractors=5))
    assert config_from_dict(VisionConfig, written).synthetic_distractors == 5
    del written["synthetic_distractors"]
    assert config_from_dict(VisionConfig, written).synthetic_distractors == 0
    # load_vision_data passes the option on to the images.
    loaded = load_vision_data("synthetic", log=quiet, synthetic_examples=SMALL, synthetic_faintest=1.0,
                              synthetic_distractors=2)
    made = vision_data.make_synthetic_images(seed=0, train_examples=SMALL[0], test_examples=SMALL[1],
                                             faintest_object=1.0, distractors=2)
    np.testing.assert_array_equal(loaded.x_test, made[2])
    # And the clutter: the config's value reaches the images, and a config.json from before it had 1.
    seen.clear()
    monkeypatch.setattr(vision_data, "load_vision_data", lambda *args, **kwargs: seen.update(kwargs))
    prepare.load_data(RunContext(VisionConfig(data="synthetic", synthetic_clutter=2.5), log=quiet))
    assert seen["synthetic_clutter"] == 2.5
    monkeypatch.undo()
    written = config_to_dict(VisionConfig(synthetic_clutter=3.0))
    assert config_from_dict(VisionConfig, written).synthetic_clutter == 3.0
    del written["synthetic_clutter"]
    assert config_from_dict(VisionConfig, written).synthetic_clutter == 1.0
    loaded = load_vision_data("synthetic", log=quiet, synthetic_examples=SMALL, synthetic_clutter=2.0)
    made = vision_data.make_synthetic_images(seed=0, train_examples=SMALL[0], test_examples=SMALL[1], clutter=2.0)
    np.testing.assert_array_equal(loaded.x_test, made[2])


def test_clutter_scales_the_label_free_background_and_nothing_else():
    sizes = dict(seed=5, train_examples=300, test_examples=60, faintest_object=1.0, distractors=4)
    plain = vision_data.make_synthetic_images(**sizes)
    # 1 is the set as it was, bit for bit (the presets without the option keep their images).
    assert all(np.array_equal(a, b) for a, b in zip(plain[:4], vision_data.make_synthetic_images(clutter=1.0,
                                                                                                  **sizes)[:4]))
    assert all(np.array_equal(a, b) for a, b in zip(plain[:4], vision_data.make_synthetic_images(clutter=1,
                                                                                                  **sizes)[:4]))

    def coarse_variation(images):  # the spread of 8 x 8-pixel means within an image: shading and blobs
        blocks = images.astype(np.float32).mean(axis=3).reshape(len(images), 4, 8, 4, 8).mean(axis=(2, 4))
        return blocks.reshape(len(images), -1).std(axis=1).mean()

    flat, double = (vision_data.make_synthetic_images(clutter=c, **sizes) for c in (0.0, 2.0))
    for images in (flat, double):
        np.testing.assert_array_equal(images[1], plain[1])  # the same labels: the same draws
        np.testing.assert_array_equal(images[3], plain[3])
    assert coarse_variation(flat[0]) < coarse_variation(plain[0]) < coarse_variation(double[0])
    assert coarse_variation(double[0]) > 1.5 * coarse_variation(plain[0])
    # The object is painted over the background: where the clutter is 0 an image's fine detail (its
    # object, distractors and pixel noise) is still there.
    def fine_detail(images):
        return np.abs(np.diff(images.astype(np.float32), axis=2)).mean()

    assert fine_detail(flat[0]) > 0.5 * fine_detail(plain[0])
    for bad in (-0.1, 4.01, float("nan"), float("inf"), True, "2", None):
        with pytest.raises(ValueError, match=r"clutter must be a number in \[0, 4\]"):
            vision_data.make_synthetic_images(clutter=bad, train_examples=10, test_examples=10)


def test_synthetic_load_defaults_split_and_normalisation_statistics():
    data = load_vision_data(
        "synthetic",
        seed=1,
        validation_size=200,
        train_size=500,
        log=quiet,
        synthetic_examples=(1000, 300),
    )
    assert data.name == "synthetic" and data.banner is None
    assert data.x_train.shape == (500, 32, 32, 3) and data.x_val.shape == (200, 32, 32, 3)
    assert data.x_test.shape == (300, 32, 32, 3)
    np.testing.assert_array_equal(np.bincount(data.y_train), [50] * 10)  # stratified
    np.testing.assert_array_equal(np.bincount(data.y_val), [20] * 10)
    assert data.mean.shape == (32, 32, 3) and data.mean.dtype == np.float32
    np.testing.assert_allclose(data.mean, data.x_train.mean(axis=0), atol=1e-3)
    residual = data.x_train.astype(np.float64) - data.mean
    np.testing.assert_allclose(data.std, residual.std(axis=(0, 1, 2)), rtol=1e-4)
    normalised = data.normalize(data.x_train)
    np.testing.assert_allclose(normalised.astype(np.float64).mean(axis=(0, 1, 2)), 0, atol=1e-4)
    np.testing.assert_allclose(normalised.astype(np.float64).std(axis=(0, 1, 2)), 1, atol=1e-4)


def test_synthetic_statistics_resemble_natural_images():
    # CIFAR-10 (normalised as the track does): an image's flat colour carries 37% of its
    # energy and the RGB channels correlate at 0.8-0.9. The first synthetic set had 84% and
    # uncorrelated channels, and a deep ResNet's stream died on it (docs/experiments/vision.md).
    data = load_vision_data("synthetic", log=quiet, synthetic_examples=(2000, 100))
    x = data.normalize(data.x_train).astype(np.float64)
    flat_colour_share = (x.mean(axis=(1, 2)) ** 2).mean() / (x**2).mean()
    assert 0.25 < flat_colour_share < 0.5
    correlation = np.corrcoef(x.reshape(-1, 3).T)
    assert correlation[np.triu_indices(3, 1)].min() > 0.7


def test_synthetic_other_image_size():
    x, *_ = vision_data.make_synthetic_images(
        seed=0, image_size=16, train_examples=20, test_examples=10
    )
    assert x.shape == (20, 16, 16, 3)


# --------------------------------------------------------------------------- #
# splits
# --------------------------------------------------------------------------- #


def test_validation_is_disjoint_from_train_and_fixed_when_train_size_changes():
    x, y, *_ = vision_data.make_synthetic_images(seed=0, train_examples=400, test_examples=10)
    ids = np.arange(400)  # split the ids the same way as the images
    x_train, y_train, x_val, y_val = vision_data.loading.split_train_validation(ids, y, 7, None, 100)
    assert len(x_train) == 300 and len(x_val) == 100
    assert not set(x_train) & set(x_val) and set(x_train) | set(x_val) == set(range(400))
    np.testing.assert_array_equal(y_val, y[x_val])
    np.testing.assert_array_equal(np.bincount(y_val), [10] * 10)
    subset, y_subset, same_val, _ = vision_data.loading.split_train_validation(ids, y, 7, 50, 100)
    np.testing.assert_array_equal(same_val, x_val)  # hold-out independent of train_size
    assert set(subset) <= set(x_train) and len(subset) == 50
    np.testing.assert_array_equal(np.bincount(y_subset), [5] * 10)
    again, *_ = vision_data.loading.split_train_validation(ids, y, 7, 50, 100)
    other, *_ = vision_data.loading.split_train_validation(ids, y, 8, 50, 100)
    np.testing.assert_array_equal(again, subset)
    assert not np.array_equal(other, subset)


def test_stratified_choice_keeps_class_proportions():
    labels = np.array([0] * 60 + [1] * 30 + [2] * 10)
    chosen = vision_data.stratified_choice(labels, 20, np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(labels[chosen]), [12, 6, 2])
    assert len(set(chosen)) == 20


# --------------------------------------------------------------------------- #
# auto and cifar10 (tfds), offline
# --------------------------------------------------------------------------- #


def test_auto_falls_back_to_synthetic_fast_with_a_banner_when_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(tfds_source, "host_reachable", lambda *args, **kwargs: False)
    lines = []  # the full default synthetic set is made here (its speed: benchmarks/data_speed.py)
    data = load_vision_data("auto", data_dir=str(tmp_path / "tfds"), log=lines.append)
    assert data.name == "synthetic" and data.x_train.shape == (10_000, 32, 32, 3)
    assert "SYNTHETIC" in data.banner and "NOT CIFAR-10" in data.banner
    assert str(tmp_path / "tfds") in data.banner
    assert any(data.banner in line and "!!!!" in line for line in lines)


def test_a_data_set_not_prepared_is_said_without_tensorflow_datasets_own_warning(tmp_path, capfd, caplog):
    # Its "Variant folder ... has no dataset_info.json" made a refusal after TensorFlow loads two lines.
    assert tfds_source.is_prepared("cifar10", str(tmp_path / "tfds")) is False
    assert "dataset_info" not in capfd.readouterr().err
    assert not [record for record in caplog.records if "dataset_info" in record.getMessage()]


def test_prefetch_offline_says_so_in_one_line_on_stderr_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: "unavailable")
    assert tfds_source.prefetch("cifar10", "example.org", str(tmp_path), log=print) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: cannot download cifar10: example.org")
    assert list(tmp_path.iterdir()) == []  # nothing downloaded, nothing written


def test_cifar10_requested_but_unavailable_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: "unavailable")
    with pytest.raises(ValueError) as error:
        load_vision_data("cifar10", data_dir=str(tmp_path), log=quiet)
    message = str(error.value)
    assert "\n" not in message
    for words in (str(tmp_path), "python -m tracks.vision prefetch", "--data-dir", "folder:PATH", "synthetic"):
        assert words in message


def test_data_dir_comes_from_tfds_data_dir_when_not_given(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "env"))

    def status(name, host, directory, timeout):
        asked.append(directory)
        return "unavailable"

    monkeypatch.setattr(tfds_source, "tfds_status", status)
    data = load_vision_data("auto", log=quiet, synthetic_examples=SMALL)
    assert asked == [str(tmp_path / "env")] and data.banner is not None
    load_vision_data("auto", data_dir=str(tmp_path / "flag"), log=quiet, synthetic_examples=SMALL)
    assert asked[-1] == str(tmp_path / "flag")


def test_cifar10_through_tfds_mock_data(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds

    # mock_data replaces the reading of prepared files with random examples
    # made from the builder's features; "prepared" skips the host check.
    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: "prepared")
    with tfds.testing.mock_data(num_examples=40, policy=tfds.testing.MockPolicy.USE_CODE):
        data = load_vision_data("auto", data_dir=str(tmp_path), validation_size=10, log=quiet)
    assert data.name == "cifar10" and data.banner is None
    assert data.x_train.shape == (30, 32, 32, 3) and data.x_train.dtype == np.uint8
    assert data.x_val.shape == (10, 32, 32, 3) and data.x_test.shape == (40, 32, 32, 3)
    assert data.y_train.dtype == np.int32 and data.y_test.dtype == np.int32
    assert data.class_names[0] == "airplane" and len(data.class_names) == 10
    assert 0 <= data.y_train.min() and data.y_train.max() < 10


def test_cifar10_load_failure_in_auto_falls_back_and_in_cifar10_raises(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: "prepared")
    monkeypatch.setattr(vision_data.loading, "_load_cifar10", broken)
    data = load_vision_data("auto", data_dir=str(tmp_path), log=quiet, synthetic_examples=SMALL)
    assert data.name == "synthetic" and "disk on fire" in data.banner
    with pytest.raises(ValueError, match="cifar10 could not be loaded.*disk on fire"):
        load_vision_data("cifar10", data_dir=str(tmp_path), log=quiet)


# --------------------------------------------------------------------------- #
# folder:PATH
# --------------------------------------------------------------------------- #

CLASSES = ("cat", "dog", "emu")


def write_tree(root, per_class=4, size=(32, 32), classes=CLASSES):
    """root/{train,test}/<class>/ with PNG and JPEG images; each class one colour."""
    for split in ("train", "test"):
        for label, name in enumerate(classes):
            folder = root / split / name
            folder.mkdir(parents=True)
            for index in range(per_class):
                colour = (80 * label + 20, 10 * index, 200 - 60 * label)
                image = Image.new("RGB", size, colour)
                suffix = ".png" if index % 2 else ".jpg"
                image.save(folder / f"{index}{suffix}", quality=95)
    return root


def test_folder_loads_labels_sizes_and_uses_the_cache(tmp_path):
    root = write_tree(tmp_path / "images")
    (root / "train" / "cat" / "notes.txt").write_text("not an image")  # ignored
    lines = []
    data = load_vision_data(f"folder:{root}", log=lines.append)
    assert data.name == f"folder:{root}" and data.class_names == CLASSES
    assert data.x_train.shape == (12, 32, 32, 3) and data.x_test.shape == (12, 32, 32, 3)
    np.testing.assert_array_equal(data.y_train, np.repeat([0, 1, 2], 4))
    # Each class was painted one colour (JPEG is lossy: a few levels off).
    for label in range(3):
        red = data.x_train[data.y_train == label][..., 0]
        assert np.abs(red.astype(int) - (80 * label + 20)).max() <= 3
    assert any("decoding 24 images" in line for line in lines)

    lines.clear()
    cached = load_vision_data(f"folder:{root}", log=lines.append)
    assert any("from the cache" in line for line in lines)
    np.testing.assert_array_equal(cached.x_train, data.x_train)
    np.testing.assert_array_equal(cached.y_test, data.y_test)

    # A damaged cache file is ignored and rewritten.
    (cache_file,) = (tmp_path / "cache").glob("folder-*.npz")
    cache_file.write_bytes(b"PK\x03\x04 truncated")
    lines.clear()
    rebuilt = load_vision_data(f"folder:{root}", log=lines.append)
    assert any("ignoring the unreadable cache" in line for line in lines)
    np.testing.assert_array_equal(rebuilt.x_train, data.x_train)
    assert np.load(cache_file)["x_train"].shape == (12, 32, 32, 3)

    # Touching the tree (a new image) invalidates the cache.
    Image.new("RGB", (32, 32), (0, 0, 0)).save(root / "train" / "dog" / "9.png")
    lines.clear()
    grown = load_vision_data(f"folder:{root}", log=lines.append)
    assert len(grown.x_train) == 13 and any("decoding 25 images" in line for line in lines)


def test_folder_resizes_other_sizes_and_reads_formats_tf_cannot(tmp_path):
    root = write_tree(tmp_path / "images", per_class=2, size=(48, 40))
    Image.new("RGB", (20, 20), (250, 0, 0)).save(root / "train" / "emu" / "x.tiff")
    data = load_vision_data(f"folder:{root}", image_size=16, log=quiet)
    assert data.x_train.shape == (7, 16, 16, 3) and data.x_test.shape == (6, 16, 16, 3)
    assert tuple(data.x_train[-1, 8, 8]) == (250, 0, 0)  # the TIFF, decoded by PIL


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda root: os.rename(root / "test", root / "tests"), ["has no test/ directory"]),
        (
            lambda root: [p.unlink() for p in (root / "train" / "dog").iterdir()],
            ["train/dog has no images"],
        ),
        (
            lambda root: (root / "train" / "dog" / "1.png").write_bytes(b""),
            ["train/dog/1.png is empty (0 bytes)"],
        ),
        (
            lambda root: (root / "test" / "emu" / "2.jpg").write_bytes(b"\xff\xd8\xff garbage"),
            ["test/emu/2.jpg cannot be decoded"],
        ),
        (
            lambda root: os.rename(root / "test" / "emu", root / "test" / "owl"),
            ["different classes", "only in train: ['emu']", "only in test: ['owl']"],
        ),
        (
            lambda root: [os.rename(root / "train" / c, root / f"moved_{c}") for c in CLASSES],
            ["train has no class folders"],
        ),
    ],
    ids=["missing-test", "empty-class", "zero-byte", "corrupt", "class-sets", "no-classes"],
)
def test_folder_errors_name_the_problem(tmp_path, damage, words):
    root = write_tree(tmp_path / "images", per_class=3)
    damage(root)
    with pytest.raises(ValueError) as error:
        load_vision_data(f"folder:{root}", log=quiet)
    message = str(error.value)
    assert "\n" not in message and str(root) in message
    for word in words:
        assert word in message


def test_an_image_whose_name_is_not_utf8_is_named_before_anything_is_decoded(tmp_path):
    """TensorFlow's decoders take UTF-8 paths only: such a name is refused with the file shown, escaped."""
    root = write_tree(tmp_path / "images", per_class=3)
    os.rename(root / "train" / "dog" / "1.png", os.fsdecode(os.fsencode(root / "train" / "dog") + b"/\xff.png"))
    with pytest.raises(ValueError, match=r"train/dog/\\xff\.png is not UTF-8 text \(TensorFlow takes UTF-8 paths "
                                         r"only\); rename it"):
        load_vision_data(f"folder:{root}", log=quiet)


def test_a_truncated_jpeg_is_named_in_one_line_without_the_c_librarys_own(tmp_path, capfd):
    """libjpeg writes its complaint to the process's stderr from C and names no file; the refusal names it."""
    root = write_tree(tmp_path / "images", per_class=3)
    broken = root / "test" / "emu" / "2.jpg"
    broken.write_bytes(broken.read_bytes()[:300])
    capfd.readouterr()
    with pytest.raises(ValueError, match="test/emu/2.jpg cannot be decoded"):
        load_vision_data(f"folder:{root}", log=quiet)
    assert "JPEG" not in capfd.readouterr().err


def test_what_the_decoders_say_of_a_file_they_read_is_kept(tmp_path, capfd, monkeypatch):
    """A file TensorFlow still decodes: what was written to stderr meanwhile reaches it, after the decoding."""
    from tracks.vision.data import folder

    root = write_tree(tmp_path / "images", per_class=1)
    paths = sorted(str(path) for path in root.rglob("*.jpg"))

    def decode_saying(paths, size):  # as libjpeg does: on file descriptor 2, from outside Python's sys.stderr
        os.write(2, b"Corrupt JPEG data: 3 extraneous bytes before marker 0xd9\n")
        return np.zeros((len(paths), size, size, 3), np.uint8)

    monkeypatch.setattr(folder, "_decode_with_tf", decode_saying)
    capfd.readouterr()
    images = folder.decode_images(paths, 8, log=quiet)
    assert images.shape == (len(paths), 8, 8, 3)
    assert "Corrupt JPEG data: 3 extraneous bytes" in capfd.readouterr().err


def test_a_folder_refused_on_its_counts_is_not_decoded_or_cached(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "images")  # 12 training images
    monkeypatch.setenv("RESIDUAL_KERAS_CACHE", str(tmp_path / "cache"))
    lines = []
    with pytest.raises(ValueError, match="--validation-size 10 \\+ --train-size 5 is more than the 12"):
        load_vision_data(f"folder:{root}", train_size=5, validation_size=10, log=lines.append)
    refused = []

    def accept(train_count, test_count):
        refused.append((train_count, test_count))
        raise ValueError("--batch-size 128 is more than the 12 training images")

    with pytest.raises(ValueError, match="--batch-size 128"):
        load_vision_data(f"folder:{root}", log=lines.append, accept=accept)
    assert refused == [(12, 12)] and not any("decoding" in line for line in lines)
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())
