"""Range checks of a config's values, with the standard library only (before TensorFlow loads).

Each check raises `ValueError` with one line that names the option, the bad
value and the accepted range; the configs' `__post_init__` call them, so a
preset, the command line and a resumed run's config.json are checked alike.
"""

import ast
import dataclasses
import functools
import importlib.util
import math
import os
import pathlib
import re
import typing

# NumPy's (and so Keras') seeds are unsigned 32-bit integers.
MAX_SEED = 2**32 - 1
# The largest integer option: TensorFlow's and NumPy's integers are 64-bit at most, and below it the
# tracks' estimates of a run (tracks/X/prepare.py) stay far inside a float's range.
MAX_INTEGER = 2**63 - 1
# A whole number as a person types it: ASCII digits ("²".isdigit() is true, int("²") fails), no more than
# an int64 has (int() refuses a text of over 4300 digits).
_WHOLE_NUMBER = re.compile(r"[0-9]{1,19}")


def whole_number(text, *, signed=False):
    """The integer `text` spells in ASCII digits (after a "-" where `signed`), or None for any other text."""
    text = text.strip()
    sign = -1 if signed and text.startswith("-") else 1
    digits = text[1:] if sign == -1 else text
    return sign * int(digits) if _WHOLE_NUMBER.fullmatch(digits) else None


def check_seed(option, seed):
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{option} must be in 0..{MAX_SEED} (NumPy's 32-bit seeds), got {seed}")


def check_seeds(seeds):
    """`ValueError` for a `--seeds` list that is not at least two distinct seeds in 0..2**32-1."""
    if not seeds:
        return
    if len(seeds) < 2:
        raise ValueError(f"--seeds needs at least two seeds, got {','.join(map(str, seeds))} "
                         "(for one seed use --seed)")
    for seed in seeds:
        check_seed("--seeds", seed)
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise ValueError(f"--seeds lists {', '.join(map(str, repeated))} more than once; give each seed once")


def check_counts(config, names, minimum=1):
    """`ValueError` unless each field in `names` of `config` is an integer >= `minimum`."""
    for name in names:
        value = getattr(config, name)
        if value < minimum:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {minimum}, got {value}")


def _shown_integer(value):
    """An integer as an error line shows it: a long one by its first digits and its length."""
    digits = str(value)  # from argparse or JSON, which refuse a text of over 4300 digits
    return digits if len(digits) <= 24 else f"{digits[:8]}... ({len(digits.lstrip('-'))} digits)"


def check_integer_sizes(config):
    """`ValueError` for an integer field (or an integer of a tuple field) above `MAX_INTEGER`."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        values = value if isinstance(value, tuple) else (value,)
        for item in values:
            if isinstance(item, int) and not isinstance(item, bool) and item > MAX_INTEGER:
                raise ValueError(f"--{field.name.replace('_', '-')} must be at most {MAX_INTEGER} (a 64-bit "
                                 f"integer), got {_shown_integer(item)}")


def check_depths(depths, maximum, *, minimum=1, rule=None):
    """`ValueError` unless every depth is in minimum..maximum (and passes `rule`: (test, words))."""
    if not depths:
        raise ValueError(f"--depths needs at least one depth in {minimum}..{maximum}")
    for depth in depths:
        if not minimum <= depth <= maximum:
            raise ValueError(f"--depths {depth} is outside {minimum}..{maximum}")
        if rule is not None and not rule[0](depth):
            raise ValueError(f"--depths {depth}: {rule[1]}")


def check_finite_floats(config):
    """`ValueError` for a float field that is not a finite number (NaN, inf: from a config.json, say)."""
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if hints[field.name] in (float, typing.Optional[float]) and value is not None and not math.isfinite(value):
            raise ValueError(f"--{field.name.replace('_', '-')} must be a finite number, got {value}")


@functools.cache
def min_head_dim():
    """The library's narrowest attention head (residual_keras/attention.py's MIN_HEAD_DIM), read without Keras."""
    origin = pathlib.Path(importlib.util.find_spec("residual_keras").origin).with_name("attention.py")
    for node in ast.parse(origin.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MIN_HEAD_DIM":
            return node.value.value
    raise LookupError(f"{origin} defines no MIN_HEAD_DIM")


# The longest name of one file or folder, and the longest path, that Linux's file systems take (NAME_MAX and
# PATH_MAX; macOS: 255 and 1024, Windows: 255 and 260 unless long paths are on). Past them every call on the
# path fails with "File name too long".
NAME_MAX = 255
PATH_MAX = 4096


def shown_path(path, keep=60):
    """A path as an error line shows it: a long one by its start, its end and its length."""
    text = str(path)
    return text if len(text) <= keep else f"{text[:keep // 2]}...{text[-keep // 2:]} ({len(text):,} characters)"


def path_length_problem(path):
    """Why `path` is too long for the file system, from its text alone, or None: one of its names is longer than
    NAME_MAX bytes, or the whole is longer than PATH_MAX."""
    encoded = os.fsencode(os.path.expanduser(str(path)))
    longest = max(encoded.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        return (f"{shown_path(path)} has a name of {len(longest):,} bytes; a file system takes at most "
                f"{NAME_MAX}")
    if len(encoded) > PATH_MAX:
        return f"{shown_path(path)} is {len(encoded):,} bytes long; a file system takes at most {PATH_MAX}"
    return None


def printable_path(path):
    """A path as an error line can print it: bytes that are not UTF-8 as escapes (b'\\xff' as \\xff)."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def utf8_path_problem(path):
    """Why TensorFlow could not take `path`, or None: its name holds bytes that are not UTF-8 text (Python keeps
    them as surrogates; TensorFlow's file functions and TensorBoard's writer refuse them mid-run)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return f"{printable_path(path)} is not UTF-8 text (TensorFlow takes UTF-8 paths only)"
    return None


def tensorflow_path_problem(path):
    """Why a path a track hands to TensorFlow (a run's folder, its data) would fail there, from its text alone,
    or None: too long for the file system, or not UTF-8 text."""
    return path_length_problem(path) or utf8_path_problem(path)


def nearest_existing(path):
    """The deepest folder (or file) of `path`'s ancestors, `path` itself included, that exists."""
    place = pathlib.Path(path).expanduser().absolute()
    while not place.exists():
        place = place.parent
    return place


def place_problem(path):
    """Why `path` cannot be made, from the file system alone (nothing is written), or None: the place it
    would be made in is a file ("X is a file, not a directory") or not writable ("X is not writable")."""
    place = nearest_existing(path)
    if not place.is_dir():
        return f"{place} is a file, not a directory"
    if not os.access(place, os.W_OK | os.X_OK):
        return f"{place} is not writable"
    return None


def out_problem(out, option="--out"):
    """The one line refusing `out` as the place an `option` names, from `place_problem`, or None."""
    problem = place_problem(out)
    return f"{option} {out}: {problem}; choose another {option}" if problem else None


__all__ = ["MAX_INTEGER", "MAX_SEED", "NAME_MAX", "PATH_MAX", "check_counts", "check_depths", "check_finite_floats",
           "check_integer_sizes", "check_seed", "check_seeds", "min_head_dim", "nearest_existing", "out_problem",
           "path_length_problem", "place_problem", "printable_path", "shown_path", "tensorflow_path_problem",
           "utf8_path_problem", "whole_number"]
