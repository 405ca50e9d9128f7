"""The character vocabulary of the language track (saved with every run as vocab.json).

Built from the TRAINING text only (sorted unique characters, so ids follow
code points as in nanoGPT). A character outside it (in the validation text
or a prompt) is encoded as the vocabulary's replacement character: "?" when
the training text has one, else " ", else its first character. This keeps the
vocabulary exactly nanoGPT's (65 for Shakespeare, no extra "<unk>" id the
model never sees in training), and every such character is counted
(`CharVocabulary.count_unknown`).
"""

import json
import os

import numpy as np

VOCAB_FILENAME = "vocab.json"
_REPLACEMENT_PREFERENCE = ("?", " ")
_JSON_KIND = "residual_keras.CharVocabulary"


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
