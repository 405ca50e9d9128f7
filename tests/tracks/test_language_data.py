"""Tests of tracks/language/data.py, vocabulary.py and pipeline.py: text sources, vocabulary, (x, y) batches.

None of them touches the network: texts are generated or read from tmp files,
the download host's reachability is monkeypatched, and the tiny_shakespeare
branch runs against `tfds.testing.mock_data`.
"""

import json
import os
import socket
import threading

import numpy as np
import pytest
import tensorflow as tf

from tracks.common import tfds_source
from tracks.language.data import load_text_data, make_text_data
from tracks.language.pipeline import make_lm_datasets, validation_plan
from tracks.language.source import parse_source
from tracks.language.vocabulary import CharVocabulary

SHARED_SHAKESPEARE = "/work/shared/data/tinyshakespeare.txt"


def random_text(length, alphabet="abcdefghij klmnop\n", seed=0):
    rng = np.random.default_rng(seed)
    return "".join(rng.choice(list(alphabet), size=length))


# --------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------


def test_vocabulary_is_sorted_characters_and_round_trips():
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
    vocab = CharVocabulary.from_text(text)
    assert vocab.characters == tuple(sorted(set(text)))
    assert vocab.size == len(vocab) == len(set(text))
    ids = vocab.encode(text)
    assert ids.dtype == np.int32 and ids.shape == (len(text),)
    # ids are positions in the sorted characters (nanoGPT's stoi).
    stoi = {c: i for i, c in enumerate(sorted(set(text)))}
    np.testing.assert_array_equal(ids, [stoi[c] for c in text])
    assert vocab.decode(ids) == text
    assert vocab.decode(ids.tolist()) == text
    assert vocab.decode(tf.constant(ids)) == text
    assert vocab.decode([]) == ""


def test_unknown_characters_become_the_replacement_and_are_counted():
    vocab = CharVocabulary.from_text("to be? or not")
    assert vocab.replacement == "?"
    ids = vocab.encode("toZ be!")
    assert ids[2] == ids[6] == vocab.replacement_id
    assert vocab.decode(ids) == "to? be?"
    assert vocab.count_unknown("toZ be!") == 2
    assert vocab.count_unknown("to be") == 0
    assert vocab.unknown_characters("toZ be! Z") == "!Z"
    # Without "?", a space stands in; without either, the first character.
    assert CharVocabulary.from_text("a b").replacement == " "
    letters = CharVocabulary.from_text("cab")
    assert letters.replacement == "a"
    assert letters.decode(letters.encode("xbz")) == "aba"
    # Characters beyond the Basic Multilingual Plane are single characters too.
    emoji = CharVocabulary.from_text("a\U0001F600b")
    assert emoji.decode(emoji.encode("b\U0001F600a")) == "b\U0001F600a"


def test_vocabulary_json_save_and_load(tmp_path):
    vocab = CharVocabulary.from_text("Ça va?\n\t\"quoted\" \\ é\u00a0")
    assert CharVocabulary.from_json(json.loads(json.dumps(vocab.to_json()))) == vocab
    path = vocab.save(str(tmp_path))  # a directory gets vocab.json
    assert path == os.path.join(str(tmp_path), "vocab.json")
    loaded = CharVocabulary.load(str(tmp_path))
    assert loaded == vocab and loaded.replacement == vocab.replacement
    text = "va?\n\"é\""
    np.testing.assert_array_equal(loaded.encode(text), vocab.encode(text))
    other = tmp_path / "other.json"
    CharVocabulary.from_text("xyz", replacement="z").save(str(other))
    assert CharVocabulary.load(str(other)).replacement == "z"


def test_vocabulary_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one character"):
        CharVocabulary.from_text("")
    with pytest.raises(ValueError, match="sorted and unique"):
        CharVocabulary("ba")
    with pytest.raises(ValueError, match="'q' is not in the vocabulary"):
        CharVocabulary.from_text("abc", replacement="q")
    vocab = CharVocabulary.from_text("abc")
    with pytest.raises(ValueError, match=r"id 3 is outside the vocabulary \(valid ids: 0..2\)"):
        vocab.decode([0, 3])
    with pytest.raises(ValueError, match="not a CharVocabulary"):
        CharVocabulary.from_json({"characters": ["a"]})


# --------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------


def test_parse_source_accepts_the_four_forms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_source("auto") == "auto"
    assert parse_source(" Tiny_Shakespeare ") == "tiny_shakespeare"
    assert parse_source("pydoc") == "pydoc"
    assert parse_source("text:corpus.txt") == "text:" + str(tmp_path / "corpus.txt")
    assert parse_source("text:/abs/x.txt") == "text:/abs/x.txt"
    with pytest.raises(ValueError) as error:
        parse_source("shakespeare")
    message = str(error.value)
    assert "'shakespeare'" in message
    for form in ("auto", "tiny_shakespeare", "pydoc", "text:PATH"):
        assert form in message
    with pytest.raises(ValueError, match="names no file"):
        parse_source("text:")


def test_text_file_is_split_90_10_with_the_vocabulary_of_train_only(tmp_path):
    # The last 10% holds characters ("X", "Y") that the first 90% lacks.
    text = random_text(900, seed=1) + "XXY" + random_text(97, seed=2)
    path = tmp_path / "corpus.txt"
    path.write_text(text.replace("\n", "\r\n"), encoding="utf-8")  # CRLF becomes \n
    lines = []
    data = load_text_data(f"text:{path}", log=lines.append)
    assert data.name == f"text:{path}"
    assert (len(data.train_text), len(data.val_text)) == (900, 100)
    assert data.train_text + data.val_text == text
    assert data.vocab == CharVocabulary.from_text(text[:900])
    assert "X" not in data.vocab.characters
    assert data.unknown_val_chars == 3
    assert data.vocab.replacement == " "  # the text has no "?"
    assert data.vocab.decode(data.val_tokens) == text[900:].replace("X", " ").replace("Y", " ")
    assert data.banner is None
    assert any("3 validation characters are not in the training vocabulary" in l for l in lines)
    assert not data.train_tokens.flags.writeable


@pytest.mark.skipif(
    not os.path.exists(SHARED_SHAKESPEARE),
    reason=f"{SHARED_SHAKESPEARE} (Karpathy's input.txt) is not on this machine",
)
def test_shared_shakespeare_file_gives_nanogpt_split():
    data = load_text_data(f"text:{SHARED_SHAKESPEARE}", log=lambda line: None)
    assert len(data.train_text) == 1_003_854
    assert len(data.val_text) == 111_540
    assert data.vocab.size == 65
    assert data.unknown_val_chars == 0
    assert len(data.train_tokens) == 1_003_854 and data.train_tokens.dtype == np.int32


def test_text_file_errors_name_the_path_and_sizes(tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(ValueError, match=f"text file not found: {missing}"):
        load_text_data(f"text:{missing}")
    with pytest.raises(ValueError, match="not a regular file"):
        load_text_data(f"text:{tmp_path}")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("abc caf\u00e9 ok".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{latin1} is not UTF-8 text: byte 7 of 11"):
        load_text_data(f"text:{latin1}")
    short = tmp_path / "short.txt"
    short.write_text("xy" * 25, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        load_text_data(f"text:{short}", sequence_length=10)
    message = str(error.value)
    assert str(short) in message
    assert "50 characters split into train 45 / val 5" in message
    assert "sequence_length 10 needs 11 characters" in message
    load_text_data(f"text:{short}", sequence_length=4, log=lambda line: None)  # 5 is enough


def test_pydoc_corpus_is_deterministic_and_large():
    first = load_text_data("pydoc", log=lambda line: None)
    second = load_text_data("pydoc", log=lambda line: None)
    assert first.name == "pydoc" and first.banner is None
    assert first.train_text == second.train_text and first.val_text == second.val_text
    total = len(first.train_text) + len(first.val_text)
    assert total > 400_000
    assert len(first.train_text) == int(total * 0.9)
    assert first.train_text.startswith(second.train_text[:1000])


@pytest.fixture
def offline(monkeypatch):
    """No tiny_shakespeare host: name resolution hangs as it does offline.

    `socket.create_connection` blocks until the test ends (at most 30 s), so
    only `host_reachable`'s own timeout can end the wait; `tfds.load` must
    never be reached. Yields an Event set once a connection attempt has
    returned: still unset after a load means the load did not wait for it.
    """
    import tensorflow_datasets as tfds

    release, returned = threading.Event(), threading.Event()

    def hanging_connection(*args, **kwargs):
        release.wait(30)
        returned.set()
        raise OSError("offline")

    def forbidden_load(*args, **kwargs):
        raise AssertionError("tfds.load was called although the dataset is unavailable")

    monkeypatch.setattr(tfds_source.socket, "create_connection", hanging_connection)
    monkeypatch.setattr(tfds, "load", forbidden_load)
    assert socket.create_connection is hanging_connection
    yield returned
    release.set()


def test_auto_falls_back_to_pydoc_without_waiting_for_the_network(tmp_path, offline):
    lines = []
    data = load_text_data("auto", data_dir=str(tmp_path), log=lines.append, timeout=0.5)
    assert not offline.is_set()  # gave up on the hanging connection after its own timeout
    assert data.name == "pydoc"
    assert data.banner is not None and "DATA FALLBACK" in data.banner
    assert str(tmp_path) in data.banner and "raw.githubusercontent.com" in data.banner
    assert "pydoc" in data.banner and "text:PATH" in data.banner
    assert data.banner in lines  # logged, not only returned
    assert len(data.train_text) + len(data.val_text) > 400_000


def test_explicit_tiny_shakespeare_unavailable_fails_fast_with_a_remedy(tmp_path, offline):
    with pytest.raises(ValueError) as error:
        load_text_data("tiny_shakespeare", data_dir=str(tmp_path), log=lambda l: None, timeout=0.5)
    assert not offline.is_set()  # did not wait for the hanging connection
    message = str(error.value)
    assert "\n" not in message
    assert f"not prepared in {tmp_path}" in message
    for remedy in ("prefetch", "--data-dir", "text:PATH", "pydoc"):
        assert remedy in message


SPLITS = {"train": "To be, or not to be", "validation": "that is the ", "test": "question."}


@pytest.mark.parametrize("source", ["tiny_shakespeare", "auto"])
def test_tiny_shakespeare_from_tfds_joins_validation_and_test(tmp_path, monkeypatch, source):
    # mock_data replaces the stored splits: `as_dataset_fn` returns one
    # {"text": ...} example per split, as the real TFDS dataset stores it. Its
    # `is_prepared` is not mocked, so the status check is told "prepared".
    import tensorflow_datasets as tfds

    def as_dataset(builder, split, **kwargs):
        assert builder.name == "tiny_shakespeare"
        return tf.data.Dataset.from_tensors({"text": tf.constant(SPLITS[str(split)])})

    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: "prepared")
    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        data = load_text_data(source, data_dir=str(tmp_path), log=lambda line: None)
    assert data.name == "tiny_shakespeare" and data.banner is None
    assert data.train_text == SPLITS["train"]
    assert data.val_text == SPLITS["validation"] + SPLITS["test"]
    assert data.vocab == CharVocabulary.from_text(SPLITS["train"])
    # "h", "a", "q", "u", "s", "." and "i" are not in the training text.
    expected_unknown = sum(c not in SPLITS["train"] for c in data.val_text)
    assert data.unknown_val_chars == expected_unknown > 0


def test_a_failed_tfds_load_is_an_error_when_explicit_and_a_fallback_for_auto(
    tmp_path, monkeypatch
):
    import tensorflow_datasets as tfds

    def broken_load(*args, **kwargs):
        raise RuntimeError("corrupt files")

    monkeypatch.setattr(tfds_source, "tfds_status", lambda *args, **kwargs: "prepared")
    monkeypatch.setattr(tfds, "load", broken_load)
    with pytest.raises(ValueError, match="corrupt files"):
        load_text_data("tiny_shakespeare", data_dir=str(tmp_path), log=lambda line: None)
    data = load_text_data("auto", data_dir=str(tmp_path), log=lambda line: None)
    assert data.name == "pydoc" and "corrupt files" in data.banner


# --------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------


def small_data(train_length=3000, val_length=500):
    return make_text_data(
        "generated", random_text(train_length, seed=3), random_text(val_length, seed=4)
    )


def take(dataset, count):
    return [(x.numpy(), y.numpy()) for x, y in dataset.take(count)]


def test_train_batches_are_shifted_windows_of_the_token_stream():
    data = small_data()
    T, B = 16, 8
    train, _ = make_lm_datasets(data, T, B, seed=0)
    for spec in train.element_spec:
        assert spec.shape == (B, T) and spec.dtype == tf.int32
    all_windows = np.lib.stride_tricks.sliding_window_view(data.train_tokens, T + 1)
    offsets = []
    for x, y in take(train, 20):
        assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == np.int32
        np.testing.assert_array_equal(y[:, :-1], x[:, 1:])  # y_t = x_{t+1}
        for row_x, row_y in zip(x, y):
            window = np.concatenate([row_x, row_y[-1:]])
            matches = np.flatnonzero((all_windows == window).all(axis=1))
            assert matches.size >= 1, "a training window is not a slice of the tokens"
            offsets.append(matches[0])
    # Random offsets spread over the whole text, not a fixed stride.
    assert len(set(offsets)) > 150
    assert min(offsets) < 300 and max(offsets) > len(data.train_tokens) - 300


def test_train_and_validation_pipelines_have_no_autotuning():
    # Autotuning makes iterator deletion wait (tracks/common/input_pipeline.py).
    train, val = make_lm_datasets(small_data(), 12, 4, seed=0)
    assert train.options().autotune.enabled is False
    assert val.options().autotune.enabled is False


def test_train_stream_is_deterministic_by_seed_and_resumable():
    data = small_data()
    first = take(make_lm_datasets(data, 12, 4, seed=7)[0], 6)
    again = take(make_lm_datasets(data, 12, 4, seed=7)[0], 6)
    other = take(make_lm_datasets(data, 12, 4, seed=8)[0], 6)
    resumed = take(make_lm_datasets(data, 12, 4, seed=7, initial_step=3)[0], 3)
    for (x1, y1), (x2, y2) in zip(first, again):
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, other))
    for (x1, _), (x2, _) in zip(first[3:], resumed):
        np.testing.assert_array_equal(x1, x2)


@pytest.mark.parametrize("val_batch_size", [None, 5])
def test_val_covers_the_text_with_non_overlapping_windows(val_batch_size):
    data = small_data(val_length=500)
    T, B = 16, 8
    logged = []
    _, val = make_lm_datasets(
        data, T, B, val_batch_size=val_batch_size, log=logged.append
    )
    plan = validation_plan(len(data.val_tokens), T, B, val_batch_size)
    batches = take(val, 1000)
    assert len(batches) == plan.batches == int(val.cardinality())
    for x, y in batches:
        assert x.shape == y.shape == (plan.batch_size, T)
    xs = np.concatenate([x for x, _ in batches]).reshape(-1)
    ys = np.concatenate([y for _, y in batches]).reshape(-1)
    # Consecutive windows tile the text from its start: no overlap, no gap.
    np.testing.assert_array_equal(xs, data.val_tokens[: plan.predicted_tokens])
    np.testing.assert_array_equal(ys, data.val_tokens[1 : plan.predicted_tokens + 1])
    assert plan.predicted_tokens + plan.dropped_tokens == len(data.val_tokens) - 1
    # 499 targets hold 31 windows of 16.
    if val_batch_size is None:  # 4 batches of 7 windows, 3 windows dropped
        assert (plan.batch_size, plan.batches, plan.dropped_tokens) == (7, 4, 51)
    else:  # 6 batches of 5 windows, 1 window dropped
        assert (plan.batch_size, plan.batches, plan.dropped_tokens) == (5, 6, 19)
    assert f"({plan.dropped_tokens:,} dropped at the end)" in logged[0]
    # A second pass gives the same batches (the val set is fixed).
    np.testing.assert_array_equal(take(val, 1)[0][0], batches[0][0])


def test_validation_plan_on_nanogpt_val_split():
    # 111,540 characters, block 256, batch 64: 435 windows.
    plan = validation_plan(111_540, 256, 64)
    assert plan == (62, 7, 434, 111_104, 435)
    fixed = validation_plan(111_540, 256, 64, val_batch_size=64)
    assert fixed == (64, 6, 384, 98_304, 13_235)
    with pytest.raises(ValueError, match="shorter than one window"):
        validation_plan(256, 256, 64)
    with pytest.raises(ValueError, match="fewer than val_batch_size 64"):
        validation_plan(1000, 256, 64, val_batch_size=64)


def test_make_lm_datasets_rejects_bad_sizes():
    data = small_data(train_length=100, val_length=50)
    with pytest.raises(ValueError, match="sequence_length must be a positive integer, got 0"):
        make_lm_datasets(data, 0, 4)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got '4'"):
        make_lm_datasets(data, 8, "4")
    with pytest.raises(ValueError, match="100 training tokens are shorter than one window"):
        make_lm_datasets(data, 100, 4)
    with pytest.raises(ValueError, match="validation text of 50 tokens"):
        make_lm_datasets(data, 60, 4)


def test_the_batches_come_from_pipeline_only():
    """data.py reads and splits texts; the (x, y) batches have one home, pipeline.py (no second path)."""
    from tracks.language import data as language_data
    from tracks.language import pipeline

    for name in ("make_lm_datasets", "training_windows", "validation_plan", "ValidationPlan"):
        assert hasattr(pipeline, name)
        assert not hasattr(language_data, name)
