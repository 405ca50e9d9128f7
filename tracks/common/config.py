"""A run's configuration: a frozen dataclass, filled from presets and argparse.

Each track declares one dataclass whose fields carry their help text in
`field(metadata={"help": ...})`. `build_parser` turns the fields into
`--kebab-case` options (every default None, so that "not given" is visible),
and `config_from_args` starts from the chosen preset and overrides only what
the user gave. The config is validated in the dataclass' `__post_init__` and
written to `config.json` in the run directory, which `--resume` reads back.
"""

import argparse
import dataclasses
import functools
import json
import math
import os
import re
import types
import typing

from tracks.common.option_ranges import path_length_problem, tensorflow_path_problem

PRECISIONS = ("auto", "bf16", "fp32")
XLA_CHOICES = ("auto", "on", "off")
STRATEGIES = ("none", "mirrored", "multiworker")


class ConfigError(ValueError):
    """Bad user input: the CLI prints the message and exits with code 2."""


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
    """The options of how a run computes, shared by every track's config (runtime.py applies them)."""

    precision: str = dataclasses.field(
        default="auto", metadata={"help": "auto (bf16 on GPUs that support it) | bf16 | fp32",
                                  "choices": PRECISIONS}
    )
    xla: str = dataclasses.field(
        default="auto", metadata={"help": "auto (on for GPU; the measured faster choice on CPU) | on | off",
                                  "choices": XLA_CHOICES}
    )
    strategy: str = dataclasses.field(
        default="none", metadata={"help": "none | mirrored (all local GPUs) | multiworker (needs TF_CONFIG)",
                                  "choices": STRATEGIES}
    )


def refuse_repeats(option, values):
    """`ValueError` when a grid option lists a value twice (the same model would train twice)."""
    repeated = sorted({value for value in values if values.count(value) > 1}, key=values.index)
    if repeated:
        raise ValueError(f"{option} lists {', '.join(map(str, repeated))} more than once; "
                         f"give each value once")


def _is_tuple(hint):
    return hint is tuple or typing.get_origin(hint) is tuple


def option_name(field_name):
    return "--" + field_name.replace("_", "-")


def finite_float(text):
    """A float option's value: a finite number ('nan', 'inf' and overflowing values such as 1e309 refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


finite_float.__name__ = "float"  # the list options name their items' type by it: "a comma-separated list of float"

# An int option's spelling: ASCII digits, as many as typed (the range checks refuse the too large, and say so).
_ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")


def whole(text):
    """An int option's value, in ASCII digits: int() alone also takes '٨' (an Arabic-Indic eight) and '1_0'."""
    if not _ASCII_INTEGER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (4,300)
        raise argparse.ArgumentTypeError(f"expected a whole number of fewer digits, got {text[:20]}...") from None


whole.__name__ = "int"


def path_option(text, problem=path_length_problem, remedy="name a file or folder"):
    """A path option's value, `~` expanded as the shell does unquoted. An empty text is refused (`pathlib`
    reads it as the current folder, which nobody who typed '' meant), and one that `problem` finds unusable
    from its text alone (by default, one too long for a file system)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path ({text!r}); {remedy}")
    unusable = problem(text)
    if unusable:
        raise argparse.ArgumentTypeError(unusable)
    return os.path.expanduser(text)


# --resume's value: an empty one would read as "no --resume" and start a new run; the run's folder goes to
# TensorFlow's file functions and TensorBoard's writer, which take UTF-8 paths only.
run_directory_option = functools.partial(path_option, problem=tensorflow_path_problem,
                                         remedy="give the folder of the run to continue")


def _parse_tuple(item_type, name):
    def parse(text):
        items = [item.strip() for item in text.split(",")]
        try:
            if "" in items:  # "", "8,,14" or "plain,": nothing given, a comma too many, or an item left out
                raise ValueError("an empty item")
            return tuple(item_type(item) for item in items)
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(
                f"{option_name(name)} expects a comma-separated list of "
                f"{item_type.__name__}, got {text!r}"
            ) from None

    return parse


def _option_kwargs(field, hints):
    """argparse keyword arguments for one dataclass field."""
    hint = hints[field.name]
    kwargs = {"default": None, "help": field.metadata.get("help", "")}
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin is typing.Union and len(args) == 1:  # Optional[X]
        hint, origin = args[0], typing.get_origin(args[0])
    if hint is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif origin is tuple:
        item_type = typing.get_args(hint)[0]
        kwargs["type"] = _parse_tuple({float: finite_float, int: whole}.get(item_type, item_type), field.name)
        kwargs["metavar"] = "A,B,..."
    elif hint is float:
        kwargs["type"] = finite_float
    elif hint is int:
        kwargs["type"] = whole
    elif hint is str:
        kwargs["type"] = hint
    if "choices" in field.metadata:
        kwargs["choices"] = field.metadata["choices"]
    return kwargs


def add_config_options(parser, config_cls, *, skip=()):
    """Adds one `--option` per field of `config_cls` (except those in `skip`)."""
    hints = typing.get_type_hints(config_cls)
    for field in dataclasses.fields(config_cls):
        if field.name in skip or field.metadata.get("cli") is False:
            continue
        parser.add_argument(option_name(field.name), dest=field.name, **_option_kwargs(field, hints))


def given_options(args, config_cls):
    """{field name: value} of every config option given on the command line."""
    return {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(config_cls)
        if field.name != "preset" and getattr(args, field.name, None) is not None
    }


def config_from_args(args, presets, config_cls):
    """The preset named `args.preset`, with every option the user gave applied.

    `args.preset` None means the parser's default preset (`args.default_preset`).
    A config class may adapt its preset to the options given first
    (`adapted_to(given) -> config`: a preset value that names other options'
    values, such as a grid option that defaults to another option's values).

    Raises:
        ConfigError: unknown preset, or a value the dataclass rejects.
    """
    preset = args.preset if args.preset is not None else args.default_preset
    if preset not in presets:
        raise ConfigError(
            f"unknown preset {preset!r}; choose one of: {', '.join(presets)}"
        )
    given = given_options(args, config_cls)
    if given.get("seeds") and "seed" in given:
        raise ConfigError("--seeds replaces --seed (the run's seeds are those listed): give one of them")
    if given.get("seeds"):
        given["seed"] = given["seeds"][0]  # the first seed's data are the run's data (checked on --resume)
    base = presets[preset]
    adapted = getattr(base, "adapted_to", None)  # a preset value that depends on an option given
    try:
        if adapted is not None:
            base = adapted(given)
        return dataclasses.replace(base, preset=preset, **given)
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error)) from None


def config_to_dict(config):
    return dataclasses.asdict(config)


def _has_type(value, hint):
    """True when a JSON value fits a config field's type hint (int is not bool)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if _is_tuple(hint):
        return isinstance(value, (list, tuple)) and all(_has_type(item, args[0]) for item in value)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def config_from_dict(config_cls, data):
    """Rebuilds a config written by `config_to_dict` (tuples come back from lists).

    Raises:
        ConfigError: `data` is not a dict, a value has the wrong type, or the
            dataclass rejects the values. Keys that are not fields are ignored;
            a field missing from `data` takes the config class's default, or its
            value in `config_cls.VALUES_BEFORE_THE_FIELD` (what runs written
            before the field existed ran with).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"expected a JSON object of options, found a {type(data).__name__}")
    hints = typing.get_type_hints(config_cls)
    values = {}
    before_the_field = getattr(config_cls, "VALUES_BEFORE_THE_FIELD", {})
    for field in dataclasses.fields(config_cls):
        if field.name not in data:
            if field.name in before_the_field:  # a run from before the option: what it ran with
                values[field.name] = before_the_field[field.name]
            continue
        value = data[field.name]
        if not _has_type(value, hints[field.name]):
            raise ConfigError(f"{field.name} should be of type {hints[field.name]}, found {value!r}")
        if _is_tuple(hints[field.name]):
            value = tuple(value)
        values[field.name] = value
    try:
        return config_cls(**values)
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error)) from None


def write_json(path, data):
    """Writes JSON atomically: a crash, even a power cut, never leaves half a file.

    The text goes to `path.tmp`, is flushed to the disk, then renamed over `path`
    (a rename is atomic on POSIX file systems).
    """
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as handle:
        handle.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
