"""Character-level text for the language track: sources, vocabulary, batches.

A character language model reads a window of T characters x_1..x_T and is
trained to predict the same window shifted by one, y_t = x_{t+1}, with the
mean cross-entropy  L = -1/(B T) sum_b sum_t log p(y_t | x_1..x_t).
This module turns a text into such (x, y) batches, as nanoGPT's
`data/shakespeare_char/prepare.py` and `train.py:get_batch` do.

Sources (`parse_source` accepts exactly these):

- "tiny_shakespeare": TensorFlow Datasets' copy of Karpathy's 1,115,394
  characters. TFDS stores one string per split (90/5/5); train is nanoGPT's
  train split and validation + test together are exactly nanoGPT's val split
  (train 1,003,854 / val 111,540 characters, 65 distinct characters).
- "text:PATH": any UTF-8 file; the first 90% of its characters train, the
  last 10% validate (nanoGPT's split).
- "pydoc": a corpus every Python install carries, the help topics of
  `pydoc_data.topics` joined in sorted key order (about 465k characters on
  Python 3.11; the exact text depends on the Python version); same 90/10 split.
- "auto": tiny_shakespeare when it is prepared or its download host answers,
  otherwise pydoc, decided within about 10 seconds and announced by a loud
  banner (offline, `tfds.load` would otherwise retry for minutes).

Unknown characters: the vocabulary is built from the TRAINING text only
(sorted unique characters, so ids follow code points as in nanoGPT). A
character outside it (in the validation text or a prompt) is encoded as the
vocabulary's replacement character: "?" when the training text has one, else
" ", else its first character. This keeps the vocabulary exactly nanoGPT's
(65 for Shakespeare, no extra "<unk>" id the model never sees in training),
and every such character is counted: `TextData.unknown_val_chars`,
`CharVocabulary.count_unknown`.
"""

import dataclasses
import hashlib
import json
import os
import time
from typing import Callable, NamedTuple

import numpy as np

from tracks.common import tfds_source

SOURCES = ("auto", "tiny_shakespeare", "pydoc", "text:PATH")
TRAIN_FRACTION = 0.9  # nanoGPT: train_data = data[:int(n * 0.9)]
AUTO_DECISION_SECONDS = 10.0  # "auto" settles on a source within this time
VOCAB_FILENAME = "vocab.json"
TINY_SHAKESPEARE = "tiny_shakespeare"
_REPLACEMENT_PREFERENCE = ("?", " ")
_JSON_KIND = "residual_keras.CharVocabulary"


# --------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------


class CharVocabulary:
    """Characters <-> integer ids; ids are positions in the sorted characters.

    Args:
        characters: str or sequence of single characters, sorted by code point
            and without repeats (as `sorted(set(text))` gives them).
        replacement: the character that stands for every character outside
            the vocabulary; must be one of `characters`. Default: "?" when
            present, else " ", else the first character.

    Example:

    >>> vocab = CharVocabulary.from_text("hello world")
    >>> vocab.size, vocab.decode(vocab.encode("hold"))
    (8, 'hold')
    >>> vocab.decode(vocab.encode("help!")), vocab.count_unknown("help!")
    ('hel  ', 2)
    """

    def __init__(self, characters, replacement=None):
        characters = tuple(characters)
        if not characters:
            raise ValueError("a CharVocabulary needs at least one character, got none")
        for character in characters:
            if not isinstance(character, str) or len(character) != 1:
                raise ValueError(
                    f"vocabulary entries must be single characters, got {character!r}"
                )
        if list(characters) != sorted(set(characters)):
            raise ValueError(
                "vocabulary characters must be sorted and unique (sorted(set(text))), "
                f"got {''.join(characters)[:80]!r}"
            )
        if replacement is None:
            present = [c for c in _REPLACEMENT_PREFERENCE if c in characters]
            replacement = present[0] if present else characters[0]
        if replacement not in characters:
            raise ValueError(
                f"replacement character {replacement!r} is not in the vocabulary "
                f"{''.join(characters)[:80]!r}"
            )
        self.characters = characters
        self.replacement = replacement
        self.replacement_id = characters.index(replacement)
        self._code_points = np.array([ord(c) for c in characters], dtype=np.int64)
        self._character_array = np.array(characters, dtype="<U1")

    @classmethod
    def from_text(cls, text, replacement=None):
        """The vocabulary of `text`: its sorted unique characters."""
        if not isinstance(text, str):
            raise TypeError(f"from_text expects a str, got {type(text).__name__}")
        return cls(sorted(set(text)), replacement=replacement)

    @property
    def size(self):
        """Number of ids (the model's input and output width)."""
        return len(self.characters)

    def __len__(self):
        return self.size

    def __eq__(self, other):
        return (
            isinstance(other, CharVocabulary)
            and self.characters == other.characters
            and self.replacement == other.replacement
        )

    def __repr__(self):
        return f"CharVocabulary(size={self.size}, replacement={self.replacement!r})"

    def _code_points_of(self, text):
        # One int per character, vectorised (1M characters in milliseconds).
        data = text.encode("utf-32-le", errors="surrogatepass")
        return np.frombuffer(data, dtype="<u4").astype(np.int64)

    def _lookup(self, text):
        """(ids, known): ids of `text` with unknowns at the replacement id."""
        codes = self._code_points_of(text)
        ids = np.searchsorted(self._code_points, codes).clip(max=self.size - 1)
        known = self._code_points[ids] == codes
        return np.where(known, ids, self.replacement_id).astype(np.int32), known

    def encode(self, text):
        """int32 ids of `text`, shape (len(text),); unknowns -> replacement id."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        return self._lookup(text)[0]

    def decode(self, ids):
        """The text of a 0-d or 1-d sequence of ids (numpy, list or eager tensor)."""
        ids = np.asarray(ids)
        if ids.ndim > 1:
            raise ValueError(f"decode expects a 1-d sequence of ids, got shape {ids.shape}")
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"decode expects integer ids, got dtype {ids.dtype}")
        ids = ids.reshape(-1).astype(np.int64)
        bad = ids[(ids < 0) | (ids >= self.size)]
        if bad.size:
            raise ValueError(
                f"id {int(bad[0])} is outside the vocabulary (valid ids: 0..{self.size - 1})"
            )
        return "".join(self._character_array[ids].tolist())

    def count_unknown(self, text):
        """How many characters of `text` are outside the vocabulary."""
        return int(np.count_nonzero(~self._lookup(text)[1]))

    def unknown_characters(self, text):
        """The distinct characters of `text` outside the vocabulary, sorted."""
        return "".join(sorted(set(text) - set(self.characters)))

    def to_json(self):
        """A JSON-serialisable dict; `from_json` inverts it."""
        return {
            "kind": _JSON_KIND,
            "version": 1,
            "characters": list(self.characters),
            "replacement": self.replacement,
        }

    @classmethod
    def from_json(cls, d):
        if not isinstance(d, dict) or d.get("kind") != _JSON_KIND:
            raise ValueError(f"not a CharVocabulary JSON dict (expected kind {_JSON_KIND!r})")
        if d.get("version") != 1:
            raise ValueError(f"unsupported CharVocabulary version {d.get('version')!r}, expected 1")
        return cls(d["characters"], replacement=d["replacement"])

    def save(self, path):
        """Writes the JSON to `path` (a directory gets `vocab.json`); returns the file path.

        Atomically: written beside `path`, then renamed over it.
        """
        if os.path.isdir(path):
            path = os.path.join(path, VOCAB_FILENAME)
        partial = f"{path}.tmp"
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, ensure_ascii=False, indent=1)
            f.write("\n")
        os.replace(partial, path)
        return path

    @classmethod
    def load(cls, path):
        """Reads a vocabulary written by `save` (a directory means its `vocab.json`).

        Raises:
            ValueError: the file is not a vocabulary written by `save` (the
                message names the file).
            OSError: the file cannot be read.
        """
        if os.path.isdir(path):
            path = os.path.join(path, VOCAB_FILENAME)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            return cls.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path} is not a valid vocabulary ({type(error).__name__}: {error})") from None


# --------------------------------------------------------------------------
# Text sources
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class TextData:
    """A training and a validation text, their vocabulary and their tokens.

    Attributes:
        name: "tiny_shakespeare", "text:/abs/path" or "pydoc".
        train_text, val_text: the two splits as strings.
        vocab: built from `train_text` only.
        train_tokens, val_tokens: read-only int32 arrays, `vocab.encode` of the texts.
        unknown_val_chars: characters of `val_text` outside the vocabulary
            (encoded as `vocab.replacement`).
        banner: a loud warning when "auto" fell back to pydoc, else None.
    """

    name: str
    train_text: str
    val_text: str
    vocab: CharVocabulary
    train_tokens: np.ndarray
    val_tokens: np.ndarray
    unknown_val_chars: int
    banner: str | None = None

    def describe(self):
        """One line for logs and reports."""
        return (
            f"{self.name}: train {len(self.train_text):,} / val {len(self.val_text):,} "
            f"characters, vocabulary {self.vocab.size}, "
            f"{self.unknown_val_chars:,} unknown val characters"
        )


def make_text_data(name, train_text, val_text, *, banner=None):
    """A `TextData` from two strings (vocabulary from `train_text`)."""
    vocab = CharVocabulary.from_text(train_text)
    train_tokens = vocab.encode(train_text)
    val_tokens = vocab.encode(val_text)
    train_tokens.setflags(write=False)
    val_tokens.setflags(write=False)
    return TextData(
        name=name,
        train_text=train_text,
        val_text=val_text,
        vocab=vocab,
        train_tokens=train_tokens,
        val_tokens=val_tokens,
        unknown_val_chars=vocab.count_unknown(val_text),
        banner=banner,
    )


def split_train_val(text):
    """nanoGPT's split: the first int(0.9 n) characters train, the rest validate."""
    boundary = int(len(text) * TRAIN_FRACTION)
    return text[:boundary], text[boundary:]


def parse_source(source):
    """Normalises a data source: "auto", "tiny_shakespeare", "pydoc" or "text:/abs/path".

    The path of "text:PATH" is made absolute (relative to the working
    directory, "~" expanded); whether the file exists is checked on loading.
    """
    if not isinstance(source, str):
        raise TypeError(f"data source must be a str, got {type(source).__name__}: {source!r}")
    accepted = ", ".join(repr(s) for s in SOURCES)
    stripped = source.strip()
    if stripped.startswith("text:"):
        path = stripped[len("text:"):].strip()
        if not path:
            raise ValueError(f"data source {source!r} names no file: use 'text:PATH'")
        return "text:" + os.path.abspath(os.path.expanduser(path))
    if stripped.lower() in ("auto", TINY_SHAKESPEARE, "pydoc"):
        return stripped.lower()
    raise ValueError(f"unknown data source {source!r}; accepted: {accepted}")


def read_text_file(path):
    """The text of a UTF-8 file, with newlines normalised to "\\n" (as `open()` does)."""
    if not os.path.exists(path):
        raise ValueError(f"text file not found: {path}")
    if not os.path.isfile(path):
        raise ValueError(f"not a regular file: {path}")
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")  # utf-8, minus a leading byte-order mark
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path} is not UTF-8 text: byte {error.start} of {len(data):,} is "
            f"{data[error.start:error.start + 1]!r} ({error.reason})"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def pydoc_text():
    """The pydoc help topics (`pydoc_data.topics.topics`) joined in sorted key order."""
    try:
        from pydoc_data.topics import topics
    except ImportError as error:  # a stripped-down Python
        raise ValueError(f"the pydoc corpus is missing from this Python ({error})") from None
    return "".join(topics[key] for key in sorted(topics))


def _tiny_shakespeare_how_to(directory):
    return (
        f"prefetch it once while online (python -m tracks.language prefetch, "
        f"into {directory}), point --data-dir at a directory that holds it, or use "
        f"the source text:PATH (any UTF-8 file; Karpathy's input.txt gives the same "
        f"split) or pydoc"
    )


def _load_tiny_shakespeare(directory, download):
    """(train, val) texts from TFDS; val = validation + test (nanoGPT's val split)."""
    import tensorflow_datasets as tfds

    splits = tfds.load(
        TINY_SHAKESPEARE,
        split=["train", "validation", "test"],
        data_dir=directory,
        download=download,
    )
    train, validation, test = (
        "".join(example["text"].decode("utf-8") for example in tfds.as_numpy(ds))
        for ds in splits
    )
    return train, validation + test


def _fallback_banner(reason, corpus_chars, directory):
    rule = "!" * 78
    return "\n".join(
        [
            rule,
            f"DATA FALLBACK: {reason}.",
            f"Training on the pydoc corpus instead (Python's help topics, "
            f"{corpus_chars:,} characters).",
            "Its losses are NOT comparable with nanoGPT's shakespeare_char numbers.",
            "To get Shakespeare: " + _tiny_shakespeare_how_to(directory) + ".",
            rule,
        ]
    )


def _check_long_enough(name, train_text, val_text, sequence_length):
    needed = sequence_length + 1  # one window: T inputs and the next character
    if len(train_text) < needed or len(val_text) < needed:
        raise ValueError(
            f"{name} is too short: {len(train_text) + len(val_text):,} characters split "
            f"into train {len(train_text):,} / val {len(val_text):,}, but a window of "
            f"sequence_length {sequence_length} needs {needed:,} characters in each split"
        )


def load_text_data(
    source="auto",
    *,
    data_dir=None,
    log: Callable[[str], None] = print,
    sequence_length=1,
    timeout=5.0,
):
    """Loads a source (see `parse_source`) into a `TextData`.

    Args:
        source: "auto", "tiny_shakespeare", "pydoc" or "text:PATH".
        data_dir: the TFDS data directory (default $TFDS_DATA_DIR or
            ~/tensorflow_datasets).
        log: called with each progress or warning line.
        sequence_length: int, each split must hold at least one window of
            this many characters plus the next one. Default 1.
        timeout: float, seconds to wait for the tiny_shakespeare download
            host before calling it unreachable ("auto" caps the whole
            decision at 10 seconds).

    Raises:
        ValueError: a malformed source, a missing/non-UTF-8/too-short file, or
            an explicit "tiny_shakespeare" that is neither prepared nor
            downloadable (the message says how to get it).
    """
    kind = parse_source(source)
    banner = None
    if kind.startswith("text:"):
        path = kind[len("text:"):]
        name = kind
        text = read_text_file(path)
        train_text, val_text = split_train_val(text)
    elif kind == "pydoc":
        name = "pydoc"
        train_text, val_text = split_train_val(pydoc_text())
    else:
        directory = tfds_source.data_dir(data_dir)
        started = time.monotonic()
        try:
            status = tfds_source.tfds_status(
                TINY_SHAKESPEARE, directory, timeout=min(timeout, AUTO_DECISION_SECONDS)
            )
            reason = (
                f"{TINY_SHAKESPEARE} is not prepared in {directory} and "
                f"{tfds_source.DOWNLOAD_HOSTS[TINY_SHAKESPEARE]} cannot be reached"
            )
        except Exception as error:  # a broken tensorflow_datasets install, say
            status, reason = "unavailable", f"{TINY_SHAKESPEARE} cannot be checked ({error!r})"
        log(f"{TINY_SHAKESPEARE}: {status} (decided in {time.monotonic() - started:.1f} s)")
        if status == "unavailable" and kind == TINY_SHAKESPEARE:
            raise ValueError(f"{reason}: {_tiny_shakespeare_how_to(directory)}")
        train_text = None
        if status != "unavailable":
            try:
                train_text, val_text = _load_tiny_shakespeare(
                    directory, download=(status == "downloadable")
                )
                name = TINY_SHAKESPEARE
            except Exception as error:
                if kind == TINY_SHAKESPEARE:
                    raise ValueError(
                        f"loading {TINY_SHAKESPEARE} from {directory} failed ({error}): "
                        + _tiny_shakespeare_how_to(directory)
                    ) from error
                reason = f"loading {TINY_SHAKESPEARE} from {directory} failed ({error})"
        if train_text is None:  # "auto" falls back
            name = "pydoc"
            corpus = pydoc_text()
            train_text, val_text = split_train_val(corpus)
            banner = _fallback_banner(reason, len(corpus), directory)
            log(banner)
    _check_long_enough(name, train_text, val_text, sequence_length)
    data = make_text_data(name, train_text, val_text, banner=banner)
    log(data.describe())
    if data.unknown_val_chars:
        log(
            f"{data.unknown_val_chars:,} validation characters are not in the training "
            f"vocabulary ({data.vocab.unknown_characters(val_text)[:40]!r}); "
            f"they are encoded as {data.vocab.replacement!r}"
        )
    return data


# --------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------


class ValidationPlan(NamedTuple):
    """How the validation tokens are cut into non-overlapping windows."""

    batch_size: int  # windows per validation batch
    batches: int
    windows: int  # windows used = batches * batch_size
    predicted_tokens: int  # targets scored = windows * sequence_length
    dropped_tokens: int  # targets never scored (the text's tail)


def validation_plan(num_tokens, sequence_length, batch_size, val_batch_size=None):
    """Cuts `num_tokens` into (batches, val batch size) windows, dropping as little as possible.

    A text of n tokens holds W = (n - 1) // T non-overlapping windows (each
    needs T inputs and the next token). With `val_batch_size=None` the batch
    size is the largest one <= `batch_size` that splits W into ceil(W / B)
    equal batches, so fewer than ceil(W / B) windows are dropped (at most
    B - 1 with a fixed batch size B).
    """
    windows_available = (num_tokens - 1) // sequence_length
    if windows_available < 1:
        raise ValueError(
            f"validation text of {num_tokens:,} tokens is shorter than one window of "
            f"sequence_length {sequence_length} (needs {sequence_length + 1:,})"
        )
    if val_batch_size is None:
        batches = -(-windows_available // batch_size)
        val_batch_size = windows_available // batches
    batches = windows_available // val_batch_size
    if batches < 1:
        raise ValueError(
            f"validation text of {num_tokens:,} tokens holds {windows_available} windows "
            f"of {sequence_length}, fewer than val_batch_size {val_batch_size}"
        )
    windows = batches * val_batch_size
    predicted = windows * sequence_length
    return ValidationPlan(val_batch_size, batches, windows, predicted, num_tokens - 1 - predicted)


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def make_lm_datasets(
    data,
    sequence_length,
    batch_size,
    *,
    seed=0,
    val_batch_size=None,
    initial_step=0,
    log=None,
):
    """(train, val) tf.data pipelines of int32 (x, y) batches, y = x shifted by one.

    train: an endless stream of (batch_size, sequence_length) windows at
        uniformly random offsets of the training tokens, as nanoGPT's
        `get_batch`. Batch k depends only on (seed, k) (stateless random
        numbers), so a run is reproducible and `initial_step=k` resumes the
        stream where a run stopped. Call `fit(..., steps_per_epoch=...)`.
    val: finite and deterministic: consecutive non-overlapping windows from
        the start of the validation tokens, in batches of one fixed size
        (`validation_plan`; drop_remainder), so `evaluate` gives the exact
        mean loss over every scored character. Only the tail that does not
        fill a batch is dropped; `log` (if given) reports how much.

    Args:
        data: a `TextData`.
        sequence_length: int, T, characters per window.
        batch_size: int, B, windows per training batch (and the largest
            validation batch).
        seed: int, seed of the training offsets.
        val_batch_size: int or None, fixed validation batch size; None picks
            the size <= batch_size that drops the fewest windows.
        initial_step: int, index of the first training batch.
        log: optional callable for a line describing the validation coverage.
    """
    import tensorflow as tf

    sequence_length = _positive_int("sequence_length", sequence_length)
    batch_size = _positive_int("batch_size", batch_size)
    if val_batch_size is not None:
        val_batch_size = _positive_int("val_batch_size", val_batch_size)

    train = training_windows(data, sequence_length, batch_size, seed=seed, first_step=initial_step)

    # Validation: window k is x = tokens[kT : kT+T], y = tokens[kT+1 : kT+T+1].
    plan = validation_plan(len(data.val_tokens), sequence_length, batch_size, val_batch_size)
    scored = plan.predicted_tokens
    val_x = data.val_tokens[:scored].reshape(plan.windows, sequence_length)
    val_y = data.val_tokens[1 : scored + 1].reshape(plan.windows, sequence_length)
    val = (
        tf.data.Dataset.from_tensor_slices((val_x, val_y))
        .batch(plan.batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    if log is not None:
        log(
            f"validation: {plan.batches} batches of {plan.batch_size} x {sequence_length} "
            f"score {plan.predicted_tokens:,} of {len(data.val_tokens) - 1:,} next-character "
            f"targets ({plan.dropped_tokens:,} dropped at the end)"
        )
    return train, val


def training_windows(data, sequence_length, batch_size, *, seed=0, first_step=0, steps=None):
    """Training batches `first_step`, `first_step + 1`, ... (endless when `steps` is None).

    Batch k holds `batch_size` windows at uniformly random offsets of the
    training tokens, as nanoGPT's `get_batch`: offsets i ~ U[0, n - T),
    x = tokens[i : i+T], y = tokens[i+1 : i+T+1]. The offsets are stateless
    random numbers of (seed, k) alone, so batch k is the same in every model
    of a grid and in a resumed run.
    """
    import tensorflow as tf

    sequence_length = _positive_int("sequence_length", sequence_length)
    batch_size = _positive_int("batch_size", batch_size)
    num_train = len(data.train_tokens)
    if num_train < sequence_length + 1:
        raise ValueError(
            f"{data.name}: {num_train:,} training tokens are shorter than one window of "
            f"sequence_length {sequence_length} (needs {sequence_length + 1:,})"
        )
    train_tokens = tf.constant(data.train_tokens, dtype=tf.int32)
    positions = tf.range(sequence_length + 1, dtype=tf.int32)  # (T+1,)
    seed = tf.constant(seed, dtype=tf.int64)

    def random_windows(step):
        offsets = tf.random.stateless_uniform(
            [batch_size],
            seed=tf.stack([seed, step]),
            minval=0,
            maxval=num_train - sequence_length,
            dtype=tf.int32,
        )  # (B,)
        windows = tf.gather(train_tokens, offsets[:, None] + positions)  # (B, T+1)
        return windows[:, :-1], windows[:, 1:]  # x, y: (B, T)

    steps_dataset = tf.data.Dataset.counter(start=first_step)
    if steps is not None:
        steps_dataset = steps_dataset.take(_positive_int("steps", steps))
    return (
        steps_dataset
        .map(random_windows, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def fingerprint(data):
    """What identifies the text a run trained on: source, sizes and a hash of the text.

    Written to config.json when a run starts; `--resume` refuses a text whose
    fingerprint differs (a file that was edited, another corpus).
    """
    digest = hashlib.sha256()
    for text in (data.train_text, data.val_text):
        digest.update(f"{len(text)}\n".encode())
        digest.update(text.encode("utf-8", errors="surrogatepass"))
    return {
        "source": data.name,
        "train_chars": len(data.train_text),
        "val_chars": len(data.val_text),
        "vocab_size": data.vocab.size,
        "sha256": digest.hexdigest(),
    }
