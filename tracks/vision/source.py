"""The vision track's `--data` values, checked with the standard library only.

`python -m tracks.vision --data bogus` is refused before TensorFlow loads
(tracks/common/resume.py: check_run); the data package, which needs
TensorFlow, reads the same forms from here.
"""

import os

from tracks.common.option_ranges import tensorflow_path_problem

SOURCE_FORMS = ("auto", "cifar10", "synthetic", "folder:PATH")
CIFAR10_HOST = "www.cs.toronto.edu"  # where TFDS downloads CIFAR-10 from


def parse_source(source):
    """Validate a data source early; returns it normalised.

    Returns "auto", "cifar10", "synthetic" or "folder:/absolute/path" (the
    folder must exist). Raises `ValueError` naming the bad value and the
    accepted forms.
    """
    if not isinstance(source, str):
        raise ValueError(
            f"data source must be a string, one of {', '.join(SOURCE_FORMS)}; got {source!r}."
        )
    text = source.strip()
    if text.lower() in ("auto", "cifar10", "synthetic"):
        return text.lower()
    if text.lower().startswith("folder:"):
        path = text[len("folder:") :].strip()
        if not path:
            raise ValueError(
                f"data source {source!r} has no path: use folder:PATH, PATH holding "
                f"train/ and test/."
            )
        unusable = tensorflow_path_problem(path)
        if unusable:
            raise ValueError(f"data source folder:{unusable}")
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(path):
            raise ValueError(
                f"data source {source!r}: {path} is not a directory (expected "
                f"PATH/train/<class>/ and PATH/test/<class>/)."
            )
        return f"folder:{path}"
    raise ValueError(f"unknown data source {source!r}; accepted: {', '.join(SOURCE_FORMS)}.")


__all__ = ["SOURCE_FORMS", "parse_source"]
