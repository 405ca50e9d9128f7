"""What `--resume` relies on in the tracks' data: fingerprints, and batches addressed by step or epoch."""

import numpy as np
import pytest

from tracks.language.data import fingerprint as text_fingerprint, make_text_data
from tracks.language.pipeline import make_lm_datasets, training_windows
from tracks.language.vocabulary import CharVocabulary
from tracks.vision.data import fingerprint as image_fingerprint, load_vision_data


def _batches(dataset):
    return [x.numpy() for x, _ in dataset]


def test_an_image_fingerprint_changes_with_one_pixel_or_another_split():
    data = load_vision_data("synthetic", train_size=50, log=lambda line: None, synthetic_examples=(100, 20))
    again = load_vision_data("synthetic", train_size=50, log=lambda line: None, synthetic_examples=(100, 20))
    assert image_fingerprint(data) == image_fingerprint(again)
    assert image_fingerprint(data)["train_images"] == 50 and image_fingerprint(data)["source"] == "synthetic"
    data.x_train[7, 3, 3, 0] ^= 1  # one bit of one pixel
    assert image_fingerprint(data)["sha256"] != image_fingerprint(again)["sha256"]
    other_split = load_vision_data("synthetic", train_size=50, validation_size=10, log=lambda line: None,
                                   synthetic_examples=(100, 20))
    assert image_fingerprint(other_split)["sha256"] != image_fingerprint(again)["sha256"]


def test_a_text_fingerprint_changes_with_one_character():
    text = "To be, or not to be, that is the question.\n" * 20
    first = text_fingerprint(make_text_data("text:/a.txt", text[:700], text[700:]))
    assert first == text_fingerprint(make_text_data("text:/a.txt", text[:700], text[700:]))
    assert first["train_chars"] == 700 and first["vocab_size"] == len(set(text[:700]))
    changed = text_fingerprint(make_text_data("text:/a.txt", text[:699] + "?", text[700:]))
    assert changed["sha256"] != first["sha256"]


def test_training_windows_from_step_k_are_the_stream_from_step_k():
    text = "abcdefghijklmnopqrstuvwxyz .,;\n" * 40
    data = make_text_data("text:/a.txt", text[:1000], text[1000:])
    stream, _ = make_lm_datasets(data, 12, 4, seed=3)
    whole = _batches(stream.take(9))
    for first_step in (0, 3, 6):  # the intervals a resumed language model trains on
        interval = _batches(training_windows(data, 12, 4, seed=3, first_step=first_step, steps=3))
        np.testing.assert_array_equal(np.stack(interval), np.stack(whole[first_step:first_step + 3]))


def test_a_damaged_vocabulary_is_a_value_error_naming_the_file(tmp_path):
    path = CharVocabulary.from_text("hello").save(tmp_path / "vocab.json")
    assert CharVocabulary.load(path) == CharVocabulary.from_text("hello")
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]  # written whole, no .tmp left
    for damage in ("{\"kind\": \"residual_keras.CharVoc", "{\"kind\": \"residual_keras.CharVocabulary\"}"):
        (tmp_path / "vocab.json").write_text(damage)
        with pytest.raises(ValueError, match=f"{path} is not a valid vocabulary"):
            CharVocabulary.load(path)
