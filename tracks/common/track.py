"""A track: what one `python -m tracks.X` declares; `tracks.common.cli.main(track, argv)` runs it.

A track is a subclass of `Track` that fills in what it is:

- its name, its usage text, its config class and presets;
- its data: `parse_source`, `load_data`, `fingerprint` (and `check`, `banner`,
  `data_title`);
- its grid of models: `grid(config)` (objects with `id`, `variant`, `depth`),
  `build_model`, `is_plain`, and the batch the instruments read
  (`instrument_batch`, named by `instrument_examples`);
- training: `trainer(config, run, data, runtime)`, which returns the function
  that trains one grid point and returns its results entry, and `resources`,
  the run's memory and CPU time estimated from its config alone;
- its report: `write_report`, `results_table`, `write_seeds_report`,
  `comparison_figures`, `findings`;
- optional subcommands of its own (`commands`, e.g. a `sample` command).

Everything a run does around these (options and presets, the run directory
and its lock, resume, the instruments at initialisation, `--seeds`,
`diagnose`, `diagnose --model`, `compare`, `prefetch`) is the same for every
track and lives in tracks/common. docs/architecture.md shows how to add one.
"""

import pathlib
from typing import Any, Callable, Mapping, NamedTuple, Optional

from tracks.common.console import announce, log


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


class Track:
    """The declaration of a track; subclasses fill in the attributes and methods below."""

    name: str = ""  # "X": the command `python -m tracks.X`, runs/X-<timestamp>/
    usage: str = ""  # the --help text (the track's __main__ docstring)
    config_cls: type = None  # a frozen dataclass (tracks/common/config.py reads its fields)
    presets: Mapping[str, Any] = {}
    default_preset: str = "quick"
    diagnose_preset: Optional[str] = None  # the preset `diagnose` starts from (default: default_preset)
    diagnose_title: str = "Networks at initialisation"
    prefetch_dataset: Optional[str] = None  # the TFDS name `prefetch` downloads (None: no prefetch)
    download_host: Optional[str] = None  # the host TFDS downloads it from (checked before downloading)
    cpu_xla: bool = False  # XLA on for the CPU under --xla auto (measured per track)
    cpu_graph_optimizer: bool = True  # TensorFlow's Grappler on a CPU (measured per track: tracks/common/runtime.py)
    commands: Mapping[str, Callable[["Track", list], int]] = {}  # extra subcommands: name -> f(track, argv)
    instrument_options: Mapping[str, Any] = {}  # keyword arguments of instruments.at_initialisation
    instrument_examples: str = "examples"  # what the instruments' batch holds, as a reader says it

    @property
    def prog(self):
        return f"python -m tracks.{self.name}"

    # Data ---------------------------------------------------------------------

    def parse_source(self, text):
        """The `--data` value, made absolute where it names a path (ValueError for a bad one)."""
        return text

    def load_data(self, config, source=None):
        """The run's data (with `name`, `title` and `banner`); `source` replaces `config.data` on resume."""
        raise NotImplementedError

    def fingerprint(self, data):
        """A dict that identifies the data (`--resume` refuses other data)."""
        raise NotImplementedError

    def check(self, config, data):
        """Raises `ValueError` for options that do not fit the data (called before anything is written)."""

    def sample_limits(self, config, data):
        """[(field, available, "test images of <data>")]: the instruments' sample sizes and their ceilings.

        A sample size larger than the data have is refused when the user gave
        it and lowered, with a line, when it came from the preset
        (`tracks.common.resume.fit_samples`): a preset's 100 lesion images
        should not stop a run on a folder of 80 test images.
        """
        return []

    def banner(self, data):
        """The figures' data warning (a fallback data set), or None."""
        return None

    def describe_data(self, data):
        """The line `data: ...` printed before training."""
        return data.title

    def data_title(self, name):
        """A recorded source name (results.json's `dataset`) as a reader names it, without local paths.

        The default keeps the last part of a path: "folder:/tmp/data/my-set" -> "my-set (folder)".
        """
        text = str(name)
        scheme, separator, path = text.partition(":")
        if separator and "/" in path:
            return f"{pathlib.PurePath(path).name} ({scheme})"
        return text

    # Models ---------------------------------------------------------------------

    def grid(self, config):
        """The run's models, in training order: objects with `id`, `variant` and `depth`."""
        raise NotImplementedError

    def build_model(self, config, spec, data):
        """The (uncompiled) Keras model of one grid point."""
        raise NotImplementedError

    def is_plain(self, spec):
        """True when the grid point's model has no residual connections (the c^l line of jacobian.png)."""
        raise NotImplementedError

    def instrument_batch(self, config, data):
        """(x, y): the fixed batch the instruments read (y: targets for the loss, or None)."""
        raise NotImplementedError

    def initial_models(self, config, data, specs):
        """The models measured at initialisation: one `GridModel` per grid point, from the run's seed."""
        import keras

        models = []
        for spec in specs:
            keras.utils.set_random_seed(config.seed)
            models.append(GridModel(spec.id, spec.variant, spec.depth, self.build_model(config, spec, data),
                                    self.is_plain(spec)))
        return models

    def instrument_subtitle(self, config, data, x):
        """The subtitle of a training run's plots at initialisation: the run's subtitle and the batch."""
        return f"{self.subtitle(config, data)}; at initialisation, {len(x)} {self.instrument_examples}"

    def diagnose_subtitle(self, config, data, x):
        """The subtitle of a `diagnose` run's plots: the data, the seed and the batch measured.

        Nothing is trained, so it names no training set, epochs or steps.
        """
        return (f"{data.title}, seed {config.seed} ({config.preset} preset): at initialisation, nothing "
                f"trained; measured on a batch of {len(x)} {self.instrument_examples}")

    # Training ---------------------------------------------------------------------

    def estimate_seconds(self, config, data, specs, accelerator):
        """The time the run is expected to take, printed before it starts (None: no estimate)."""
        return None

    def resources(self, config):
        """A new run's `limits.Estimate` from its config alone, before anything loads (None: never refused).

        Set against the machine before TensorFlow loads: a run beyond it is
        refused with the estimate unless `--force` (tracks/common/limits.py).
        """
        return None

    def cost(self, spec):
        """One grid point's training cost relative to the others (for the time left)."""
        return spec.depth

    def run_fields(self, config, data):
        """Run-level fields of results.json besides the common ones (vocabulary size, ...)."""
        return {}

    def trainer(self, config, run, data, runtime):
        """callable(spec) -> the results entry of one trained grid point.

        Called once per run, after the instruments at initialisation: what
        every model shares (the epochs' batches, the evaluation sets) is made here.
        An entry has at least `id`, `variant`, `depth`, `params`, `diverged`,
        `diverged_at` (None, or where: "epoch 3", "step 500") and `seconds`.
        """
        raise NotImplementedError

    # The report ----------------------------------------------------------------------

    def subtitle(self, config, data):
        """The line under every figure's title that says which run it is."""
        return f"{data.title}, seed {config.seed} ({config.preset} preset)"

    def write_report(self, run, config, results, data):
        """The figures and summary.md of a finished run."""
        raise NotImplementedError

    def results_table(self, results):
        """(headers, rows): one row per model, for the terminal and summary.md."""
        raise NotImplementedError

    def terminal_ending(self, run, results):
        """The lines a run ends with in the terminal."""
        from tracks.common.report import run_ending

        return run_ending(run, *self.results_table(results))

    def write_seeds_report(self, run, config, seed_runs, data):
        """results.json, figures and summary.md of a `--seeds` run; returns its results."""
        raise NotImplementedError

    def seeds_terminal_ending(self, run, results):
        raise NotImplementedError

    def comparison_figures(self, results):
        """{figure: (value, unit)} that `compare` sets beside a reference run's."""
        raise NotImplementedError

    def findings(self, results, config):
        """The `Finding`s of a run's results (`config`: the run's config.json as a dict)."""
        return []

    # What a run does with the above (the same for every track) ---------------------

    def measure_at_initialisation(self, config, data, out_dir, specs, *, diagnose=False):
        """The gradient, activation and Jacobian plots of the grid's models at initialisation.

        `diagnose`: the plots of a `diagnose` run (their subtitle names no training).
        """
        from tracks.common import instruments

        x, y = self.instrument_batch(config, data)
        subtitle = (self.diagnose_subtitle if diagnose else self.instrument_subtitle)(config, data, x)
        return instruments.at_initialisation(
            self.initial_models(config, data, specs), x, out_dir, y=y, banner=self.banner(data),
            subtitle=subtitle, log=log, **self.instrument_options)

    def train_one_run(self, config, run, data):
        """Trains the grid of one run (one seed), then writes its report."""
        from tracks.common.runtime import setup_runtime
        from tracks.common.training import run_grid

        runtime = setup_runtime(config.precision, config.xla, config.strategy, seed=config.seed,
                                cpu_xla=self.cpu_xla, cpu_graph_optimizer=self.cpu_graph_optimizer)
        specs = self.grid(config)
        estimate = self.estimate_seconds(config, data, specs, runtime.accelerator)
        announce(run, config, runtime, specs, estimate, self.describe_data(data))
        run.update_results(track=self.name, preset=config.preset, dataset=data.name, dataset_title=data.title,
                           banner=data.banner, **self.run_fields(config, data), **runtime.describe())
        if "initialisation" not in run.read_results():
            run.update_results(initialisation=self.measure_at_initialisation(config, data, run.path, specs))
        results = run_grid(run, specs, self.trainer(config, run, data, runtime), log=log, cost=self.cost,
                           seed=config.seed)
        self.write_report(run, config, results, data)
        log(self.terminal_ending(run, results))


__all__ = ["GridModel", "Track"]
