"""Character-level text for the language track: the sources and the split.

A character language model reads a window of T characters x_1..x_T and is
trained to predict the same window shifted by one, y_t = x_{t+1}, with the
mean cross-entropy  L = -1/(B T) sum_b sum_t log p(y_t | x_1..x_t).
This module reads a text and splits it, as nanoGPT's
`data/shakespeare_char/prepare.py` does; `pipeline.py` cuts it into (x, y)
batches as nanoGPT's `train.py:get_batch` does; `vocabulary.py` maps
characters to ids.

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
import os
import time
from typing import Callable

import numpy as np

from tracks.common import tfds_source
from tracks.language.source import SOURCES, TINY_SHAKESPEARE, TINY_SHAKESPEARE_HOST, parse_source
from tracks.language.vocabulary import CharVocabulary
from tracks.common.track import source_title

TRAIN_FRACTION = 0.9  # nanoGPT: train_data = data[:int(n * 0.9)]
AUTO_DECISION_SECONDS = 10.0  # "auto" settles on a source within this time



TITLES = {TINY_SHAKESPEARE: "Tiny Shakespeare", "pydoc": "Python's documentation"}


def dataset_title(name):
    """A source name ("tiny_shakespeare", "text:/abs/path", "pydoc") as a reader names it, without local paths."""
    return source_title(name, TITLES, {"text": "text file"})


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

    @property
    def title(self):
        """The text as a reader names it, without local paths: "Tiny Shakespeare", "input.txt (text file)"."""
        return dataset_title(self.name)

    @property
    def plot_banner(self):
        """The fallback's warning as the figures show it, or None."""
        return "PYDOC FALLBACK DATA, NOT TINY SHAKESPEARE" if self.banner else None

    @property
    def description(self):
        """The line `data: ...` printed before training."""
        return (f"{self.name}: {len(self.train_tokens):,} training / {len(self.val_tokens):,} "
                f"validation characters, vocabulary {self.vocab.size}")

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
        ValueError: a malformed source, a missing/non-UTF-8/too-short file, a
            training part with fewer than 2 distinct characters, or
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
                TINY_SHAKESPEARE, TINY_SHAKESPEARE_HOST, directory, timeout=min(timeout, AUTO_DECISION_SECONDS)
            )
            reason = (
                f"{TINY_SHAKESPEARE} is not prepared in {directory} and "
                f"{TINY_SHAKESPEARE_HOST} cannot be reached"
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
    if data.vocab.size < 2:  # one character always follows: nothing to predict, and no softmax to train
        raise ValueError(f"{name} has {data.vocab.size} distinct character in its training part "
                         f"({train_text[:1]!r}): a character model needs at least 2 to choose between")
    log(data.describe())
    if data.unknown_val_chars:
        log(
            f"{data.unknown_val_chars:,} validation characters are not in the training "
            f"vocabulary ({data.vocab.unknown_characters(val_text)[:40]!r}); "
            f"they are encoded as {data.vocab.replacement!r}"
        )
    return data


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
