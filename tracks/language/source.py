"""The language track's `--data` values, checked with the standard library only.

`python -m tracks.language --data bogus` is refused before TensorFlow loads
(tracks/common/resume.py: check_run); tracks/language/data.py, which needs
NumPy and TensorFlow, reads the same forms from here.
"""

import os

from tracks.common.option_ranges import tensorflow_path_problem

SOURCES = ("auto", "tiny_shakespeare", "pydoc", "text:PATH")
TINY_SHAKESPEARE = "tiny_shakespeare"
TINY_SHAKESPEARE_HOST = "raw.githubusercontent.com"  # where TFDS downloads it from


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
        unusable = tensorflow_path_problem(path)
        if unusable:
            raise ValueError(f"data source text:{unusable}")
        return "text:" + os.path.abspath(os.path.expanduser(path))
    if stripped.lower() in ("auto", TINY_SHAKESPEARE, "pydoc"):
        return stripped.lower()
    raise ValueError(f"unknown data source {source!r}; accepted: {accepted}")


__all__ = ["SOURCES", "TINY_SHAKESPEARE", "parse_source"]
