"""A track as data: what one `python -m tracks.X` is made of; `tracks.common.cli.main(track, argv)` runs it.

A track is a frozen `Track`, built in its track.py, in two halves:

- what the command line needs before anything loads (name, usage, config
  class, presets, `parse_source` for `--data`, `resources` for the cost):
  functions of modules that import the standard library only, so that
  `python -m tracks.X --help` and every refusal answer before TensorFlow
  loads;
- `load_parts`, a function of track.py that imports the track's training
  modules (TensorFlow, Keras) and returns its `TrackParts`: loading,
  training and reporting, each a real function reference an editor can
  follow. `track.parts` calls it once the options are checked.

Every part that needs the run's state takes one `RunContext`, last:
`grid(config)`, `load_data(ctx)`, `train_one(spec, ctx)`, `report(results, ctx)`.

Everything a run does with these parts (options and presets, the run
directory and its lock, resume, the instruments at initialisation, `--seeds`,
`diagnose`, `compare`, `prefetch`) is the same for every track and lives in
tracks/common (run.py trains one run). A new track is one folder with a
track.py that builds its `TRACK`, plus its line in tracks/registry.py.
docs/architecture.md walks through one run.
"""

import dataclasses
import functools
import pathlib
from typing import Any, Callable, Mapping, NamedTuple, Optional

from tracks.common.console import log
from tracks.common.results import RunResults


class GridModel(NamedTuple):
    """One model as the instruments see it: its label, its series (variant, depth), the model.

    `plain` says that no block adds its input back (the instruments draw
    the c^l reference line for plain models only).
    """

    label: str
    variant: str
    depth: int
    model: Any
    plain: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class RunContext:
    """What a run knows, handed to every part that needs it: config, run directory, data, runtime, log.

    Attributes:
        config: the run's frozen config (its `seed` is this run's seed: a
            `--seeds` run makes one context per seed).
        run: the `RunDirectory` written to (None while the data are loaded).
        data: the loaded data (None while they are loaded).
        runtime: what `tracks.common.runtime.setup_runtime` set up (the
            distribution strategy, precision, XLA); None before training.
        log: where progress lines go.
        trains: False for a command that trains nothing (diagnose): the
            checks of training options (a batch size, a warm-up) do not apply.
        given: the config fields typed on the command line: a preset's
            other values may be adapted to the data, a typed one is checked.
    """

    config: Any
    run: Any = None
    data: Any = None
    runtime: Any = None
    log: Callable[[str], None] = log
    trains: bool = True
    given: frozenset = frozenset()
    _shared: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def seed(self):
        return self.config.seed

    def shared(self, name, make):
        """`make()`, made once per run and kept: what every model of the run shares (its epochs' batches)."""
        if name not in self._shared:
            self._shared[name] = make()
        return self._shared[name]

    def replace(self, **changes):
        """A context with `changes` (config, run, data, runtime); what was shared is not carried over."""
        return dataclasses.replace(self, _shared={}, **changes)


def no_check(ctx):
    """The default `check`: every option fits every data set."""


def no_sample_limits(ctx):
    """The default `sample_limits`: no instrument samples from a finite set."""
    return []


def no_fit_defaults(ctx, given):
    """The default `fit_defaults`: every preset value fits every data set."""
    return {}


def no_estimate(config, data=None, accelerator=False):
    """The default `resources`: no estimate (the run is never refused, no time is printed)."""
    return None


def no_run_fields(ctx):
    """The default `run_fields`: nothing besides the fields every results.json has."""
    return {}


def same_source(text):
    """The default `parse_source`: the `--data` value as given."""
    return text


def source_title(name, titles=None, kinds=None):
    """A recorded source name (results.json's `dataset`) as a reader names it, without local paths.

    `titles` gives the track's own sources their titles ({source name: title}); a path keeps its last
    part, with what `kinds` calls its scheme ({"folder": "image folder"}): "folder:/tmp/data/my-set" ->
    "my-set (image folder)". Without them (the default `data_title`), the scheme itself: "my-set (folder)".
    """
    text = str(name)
    if titles and text in titles:
        return titles[text]
    scheme, separator, path = text.partition(":")
    if separator and "/" in path:
        return f"{pathlib.PurePath(path).name} ({(kinds or {}).get(scheme, scheme)})"
    return text


@dataclasses.dataclass(frozen=True)
class TrackParts:
    """What a track loads, trains and reports with: returned by its `load_parts()`, after the options are checked.

    Data (`load_data(ctx)` gives an object with `name`, `title`, `banner`
    (the long warning of a fallback data set, or None), `plot_banner` (its
    short form on figures) and `description` (the line printed before training)):
        fingerprint(data): a dict that identifies the data (`--resume` refuses others).
        check(ctx): raises ValueError for options that do not fit the data.
        fit_defaults(ctx, given): {field: value} for preset values (not in `given`, the options typed)
            that do not fit the data, each said in one line (a prompt whose characters the text lacks).
        sample_limits(ctx): [(field, available, "test images of <data>")]:
            counts the data or the run bound (the instruments' sample sizes, a
            warm-up's steps) and their ceilings, refused when typed and lowered
            when a preset's (resume.fit_samples).
        data_title(name): a recorded source name as a reader names it.
        run_fields(ctx): run-level fields of results.json besides the common ones.

    Models and training (`grid(config)` gives objects with `id`, `variant`,
    `depth`, `plain` (no block adds its input back) and `cost` (relative
    training time)):
        build_model(spec, ctx): the uncompiled Keras model of one grid point.
        instrument_batch(ctx): (x, y), the fixed batch the instruments read.
        train_one(spec, ctx): trains one grid point; its `ModelResult`.

    The report (each gets the track's typed `RunResults`):
        subtitle(ctx): the line under every figure's title that says which run it is.
        report(results, ctx): figures and summary.md of a finished run; returns
            the lines the run ends with in the terminal.
        seeds_report(seed_runs, ctx): the same for a `--seeds` run.
        figures(results): {figure: (value, unit)} that `compare` sets beside a reference's.
        findings(results): the run's `Finding`s.
    """

    load_data: Callable
    fingerprint: Callable
    grid: Callable
    build_model: Callable
    instrument_batch: Callable
    train_one: Callable
    subtitle: Callable
    report: Callable
    seeds_report: Callable
    figures: Callable
    findings: Callable
    check: Callable = no_check
    sample_limits: Callable = no_sample_limits
    fit_defaults: Callable = no_fit_defaults
    data_title: Callable = source_title
    run_fields: Callable = no_run_fields


@functools.cache
def _loaded(load_parts):
    parts = load_parts()
    if not isinstance(parts, TrackParts):
        raise TypeError(f"{load_parts.__qualname__}() must return a TrackParts, got {type(parts).__name__}")
    return parts


@dataclasses.dataclass(frozen=True)
class Track:
    """A track: what its command line needs before anything loads, and `load_parts` for the rest.

    The fields below `load_parts` are read before TensorFlow loads, so their
    functions live in modules that import the standard library only:
        parse_source(text): the `--data` value made absolute where it names a
            path (ValueError for a bad one), before anything loads.
        resources(config, data=None, accelerator=False): the run's
            `limits.Estimate` (memory, time) from its config alone, refined by
            the data once loaded; None: never refused, no estimate printed.
        commands: extra subcommands, name -> f(track, argv) -> exit code.
    """

    name: str  # "X": the command `python -m tracks.X`, runs/X-<timestamp>/
    usage: str  # the --help text (the track's __main__ docstring)
    config_cls: type  # a frozen dataclass (tracks/common/config.py reads its fields)
    presets: Mapping[str, Any]
    load_parts: Callable[[], TrackParts]  # imports the training modules: called once the options are checked
    results: type = RunResults  # the track's typed results.json
    parse_source: Callable = same_source
    resources: Callable = no_estimate
    commands: Mapping[str, Callable] = dataclasses.field(default_factory=dict)
    default_preset: str = "quick"
    diagnose_preset: Optional[str] = None  # the preset `diagnose` starts from (default: default_preset)
    diagnose_title: str = "Networks at initialisation"
    instrument_examples: str = "examples"  # what the instruments' batch holds, as a reader says it
    instrument_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # of at_initialisation
    prefetch: Optional[tuple] = None  # (TFDS name, the host it downloads from): `prefetch` downloads it
    cpu_xla: bool = False  # XLA on for the CPU under --xla auto (measured per track)
    # bfloat16 under --precision auto on a CPU with AVX512_BF16 or AMX (measured per track): off for all three,
    # slower at the CPU presets' widths (benchmarks/NOTES.md, issue 53)
    cpu_bf16: bool = False
    cpu_graph_optimizer: bool = True  # TensorFlow's Grappler on a CPU (measured per track: runtime.py)
    # Its config fields, besides preset, variants and depths, that change what a run measures, per kind of run
    # ("training", "diagnose"): `compare` says when a run and its reference differ in one.
    setup_fields: Mapping[str, tuple] = dataclasses.field(default_factory=dict)

    @property
    def prog(self):
        return f"python -m tracks.{self.name}"

    @property
    def parts(self) -> TrackParts:
        """The track's `TrackParts` (its training modules imported on first use, then kept)."""
        return _loaded(self.load_parts)


__all__ = ["GridModel", "RunContext", "Track", "TrackParts", "source_title"]
