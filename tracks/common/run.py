"""What every run does with a track's parts: load its data, measure at initialisation, train the grid, report.

`load(track, config, source)` and `train_one_run(track, ctx)` are the two
steps between the checked options (resume.py) and results.json; `--seeds`
(seeds.py) reuses them, and `diagnose_one_run` is `diagnose`'s step.

The modules that import Keras (training, the instruments, the device setup)
are imported inside the functions that use them: resume.py and seeds.py
import this module before any option is checked, and TensorFlow loads only
after (every refusal answers without it).
"""

import dataclasses
import re

from tracks.common.command import raise_if_interrupted
from tracks.common.console import announce, log
from tracks.common.results import SCHEMA
from tracks.common.track import GridModel, RunContext


def load(track, config, source=None, log=None, trains=True, given=()):
    """The track's data for `config`; `source` (the one a resumed run recorded) replaces `config.data`.

    `given` names the options typed on the command line (`RunContext.given`).
    """
    if source is not None:
        config = dataclasses.replace(config, data=source)
    context = RunContext(config, trains=trains, given=frozenset(given))
    if log is not None:
        context = context.replace(log=log)
    return track.parts.load_data(context)


def initial_models(track, ctx, specs):
    """One `GridModel` per (variant, depth) of `specs`, each from the run's seed.

    Grid points that differ only in training (a warm-up length, say) are the
    same model at initialisation, so each is measured once.
    """
    import keras

    models, seen = [], set()
    for spec in specs:
        if (spec.variant, spec.depth) in seen:
            continue
        seen.add((spec.variant, spec.depth))
        keras.utils.set_random_seed(ctx.seed)
        models.append(GridModel(f"{spec.variant}-{spec.depth}", spec.variant, spec.depth,
                                track.parts.build_model(spec, ctx), spec.plain))
    return models


def instrument_subtitle(track, ctx, x):
    """The subtitle of a training run's plots at initialisation: the run's subtitle and the batch."""
    return f"{track.parts.subtitle(ctx)}; at initialisation, {len(x)} {track.instrument_examples}"


def diagnose_subtitle(track, ctx, x):
    """The subtitle of a `diagnose` run's plots: the data, the seed and the batch measured.

    Nothing is trained, so it names no training set, epochs or steps.
    """
    config = ctx.config
    return (f"{ctx.data.title}, seed {config.seed} ({config.preset} preset): at initialisation, nothing "
            f"trained; measured on a batch of {len(x)} {track.instrument_examples}")


def measure_at_initialisation(track, ctx, specs, *, diagnose=False):
    """The gradient, activation and Jacobian plots of the grid's models at initialisation, in ctx.run.

    `diagnose`: the plots of a `diagnose` run (their subtitle names no training).
    """
    from tracks.common import instruments

    x, y = track.parts.instrument_batch(ctx)
    subtitle = (diagnose_subtitle if diagnose else instrument_subtitle)(track, ctx, x)
    summary = instruments.at_initialisation(
        initial_models(track, ctx, specs), x, ctx.run.path, y=y, banner=ctx.data.plot_banner,
        subtitle=subtitle, log=ctx.log, **track.instrument_options)
    raise_if_interrupted()  # a Ctrl-C that Python swallowed in a finaliser while the instruments ran
    return summary


def estimate_seconds(track, ctx):
    """The time this run (one seed) is expected to take on its device, or None."""
    one_seed = dataclasses.replace(ctx.config, seeds=())  # every config has seeds: seeds.train reads them
    estimate = track.resources(one_seed, ctx.data, accelerator=ctx.runtime.accelerator)
    return None if estimate is None else estimate.cpu_seconds


def train_one_run(track, ctx):
    """Trains the grid of one run (one seed) into ctx.run, then writes its report."""
    from tracks.common.runtime import setup_runtime
    from tracks.common.training import run_grid

    config, run, data = ctx.config, ctx.run, ctx.data
    runtime = setup_runtime(config.precision, config.xla, config.strategy, seed=config.seed,
                            cpu_xla=track.cpu_xla, cpu_graph_optimizer=track.cpu_graph_optimizer,
                            cpu_bf16=track.cpu_bf16)
    ctx = ctx.replace(runtime=runtime)
    specs = track.parts.grid(config)
    announce(run, config, runtime, specs, estimate_seconds(track, ctx), data.description)
    run.update_results(schema=SCHEMA, track=track.name, preset=config.preset, dataset=data.name, dataset_title=data.title,
                       banner=data.banner, **track.parts.run_fields(ctx), **runtime.describe())
    from tracks.common.instrument_report import instrument_figures

    gone = [name for _, name in instrument_figures() if not (run.path / name).exists()]
    measured = "initialisation" in run.read_results()
    if not measured or gone:
        if measured:  # a resumed run whose figures were removed: drawn again
            ctx.log(f"the figures at initialisation are missing ({', '.join(gone)}): measuring them again")
        run.update_results(initialisation=measure_at_initialisation(track, ctx, specs))
    results = run_grid(run, specs, lambda spec: track.parts.train_one(spec, ctx), log=ctx.log,
                       cost=lambda spec: spec.cost, seed=config.seed, results=track.results)
    ctx.log(track.parts.report(results, ctx))
    note_missing_figures(run, ctx.log)


def diagnose_one_run(track, config, run, data):
    """`diagnose`: the grid's models measured at initialisation into `run` (results.json, figures, summary.md)."""
    from tracks.common import instrument_report
    from tracks.common.runtime import setup_runtime

    setup_runtime("fp32", "off", "none", seed=config.seed)
    ctx = RunContext(config, run, data)
    summary = measure_at_initialisation(track, ctx, track.parts.grid(config), diagnose=True)
    run.update_results(schema=SCHEMA, track=f"{track.name}-diagnose", dataset=data.name, dataset_title=data.title,
                       banner=data.banner, initialisation=summary)
    instrument_report.write_diagnose_summary(run, track.diagnose_title, summary, data.banner)
    log(f"done: {run.path / 'summary.md'}")


def note_missing_figures(run, log=print):
    """Says in summary.md (and in one line) which figures it links that are not in the run directory.

    A report draws what it can from results.json; a figure it cannot draw again (its numbers were not kept)
    and that was removed is named, instead of a broken link.
    """
    summary = run.path / "summary.md"
    if not summary.exists():
        return []
    text = summary.read_text()
    linked = dict.fromkeys(re.findall(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", text))
    missing = [name for name in linked if not (run.path / name).exists()]
    if missing:
        summary.write_text(text.rstrip("\n") + "\n\n## Missing figures\n\n" + "These figures are linked above but "
                           "are not in the run directory (removed after they were drawn, and not drawn again on "
                           "--resume): " + ", ".join(f"`{name}`" for name in missing) + ".\n")
        log(f"summary.md links {len(missing)} figures that are not in {run.path}: {', '.join(missing)}")
    return missing


__all__ = ["diagnose_one_run", "diagnose_subtitle", "estimate_seconds", "initial_models", "instrument_subtitle", "load",
           "measure_at_initialisation", "note_missing_figures", "train_one_run"]
