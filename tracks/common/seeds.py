"""`--seeds 0,1,2`: every model trained once per seed, then the spread.

A run with seeds is one run per seed, each in its own directory inside the
run (`seed-0/`, `seed-1/`, ...) and each exactly the run `--seed N` would
make (its data subset, initialisation and batch order; its own summary.md
and figures), then, at the top of the run, what the seeds say together:

- results.json: per model the mean, the standard deviation (n - 1 in the
  denominator) and the per-seed values of the track's final numbers;
- the curves, each the mean over the seeds with a band of +- one standard
  deviation;
- summary.md: the table of mean +- std, and every finding with its verdict
  under `seeds_report.SEED_RULE`.

Resuming the run resumes the seed it stopped in; finished seeds are kept.
This module trains the seeds; seeds_report.py computes what they say
together and writes it.
"""

import dataclasses

from tracks.common.config import config_to_dict, write_json
from tracks.common.console import log
from tracks.common.resume import refuse_other_data
from tracks.common.run import load, note_missing_figures, train_one_run
from tracks.common.run_directory import RunDirectory, read_json
from tracks.common.track import RunContext


def seed_directory(run, seed):
    return run.path / f"seed-{seed}"


def train_each_seed(track, run, config, data):
    """Trains `config` once per seed in `run`'s seed-N/ directories; returns [(seed, RunDirectory)].

    Args:
        track: the `Track` (its data and its training of one run).
        run: the locked top-level `RunDirectory` (its lock covers the seed runs).
        config: the run's config, `config.seeds` set.
        data: the data loaded for the first seed (`config.seed` is the first seed).
    """
    done = []
    for index, seed in enumerate(config.seeds):
        seed_config = dataclasses.replace(config, seed=seed, seeds=())
        seed_data = data if seed == config.seed else load(track, seed_config)
        actual = {**track.parts.fingerprint(seed_data), "banner": seed_data.banner}
        child = RunDirectory(seed_directory(run, seed), run.track)
        child.path.mkdir(exist_ok=True)
        if child.config_path.exists():
            recorded = read_json(child.config_path, "restore it, or delete the seed's directory to train it again")
            refuse_other_data(child, recorded.get("data_fingerprint") or {}, actual)
        else:
            write_json(child.config_path, {"track": run.track, **config_to_dict(seed_config),
                                           "data_fingerprint": actual})
            write_json(child.results_path, {"models": []})
        log(f"##### seed {seed} ({index + 1} of {len(config.seeds)}): {child.path}")
        train_one_run(track, RunContext(seed_config, child, seed_data))
        done.append((seed, child))
    return done


def train(track, config, run, data):
    """A track's training command: one run, or with `--seeds` one run per seed and then the spread."""
    if not config.seeds:
        return train_one_run(track, RunContext(config, run, data))
    seed_runs = train_each_seed(track, run, config, data)
    log(track.parts.seeds_report(seed_runs, RunContext(config, run, data)))
    note_missing_figures(run, log)
    return None


__all__ = ["seed_directory", "train", "train_each_seed"]
