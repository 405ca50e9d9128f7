"""The run directory: everything a run writes, and what `--resume` reads back.

    runs/<track>-<timestamp>/
      config.json          the frozen config (plus the track's name)
      results.json         one entry per finished model, rewritten after each
      metrics/<model>.csv  per-epoch metrics of each model
      backup/<model>/      Keras BackupAndRestore state of the model in training
      *.png, summary.md    the track's report

Nothing is ever overwritten by a new run: a new run needs a new (or empty)
directory; `--resume` continues one written by the same track.
"""

import datetime
import json
import pathlib

from tracks.common.config import ConfigError, config_from_dict, config_to_dict, write_json


class RunDirectory:
    """Paths and bookkeeping of one run of a track."""

    def __init__(self, path, track):
        self.path = pathlib.Path(path)
        self.track = track

    # Creating and reopening -------------------------------------------------

    @classmethod
    def create(cls, track, config, out=None, runs_root="runs"):
        """A new run directory for `config`; refuses to reuse a non-empty one."""
        if out is None:
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            out = pathlib.Path(runs_root) / f"{track}-{stamp}"
        run = cls(out, track)
        if run.path.exists() and any(run.path.iterdir()):
            raise ConfigError(
                f"{run.path} already exists and is not empty; use --resume "
                f"{run.path} to continue it or choose another --out"
            )
        run.path.mkdir(parents=True, exist_ok=True)
        write_json(run.config_path, {"track": track, **config_to_dict(config)})
        write_json(run.results_path, {"models": []})
        return run

    @classmethod
    def resume(cls, track, path, config_cls):
        """Reopens a run of `track`; returns (run, config)."""
        run = cls(path, track)
        if not run.config_path.is_file():
            raise ConfigError(f"--resume {run.path}: no config.json there, not a run directory")
        try:
            data = json.loads(run.config_path.read_text())
        except json.JSONDecodeError as error:
            raise ConfigError(f"--resume {run.path}: config.json is not valid JSON ({error})") from None
        found = data.pop("track", None)
        if found != track:
            raise ConfigError(
                f"--resume {run.path}: that run belongs to the {found!r} track, not {track!r}"
            )
        return run, config_from_dict(config_cls, data)

    # Paths --------------------------------------------------------------------

    @property
    def config_path(self):
        return self.path / "config.json"

    @property
    def results_path(self):
        return self.path / "results.json"

    def metrics_path(self, model_id):
        path = self.path / "metrics" / f"{model_id}.csv"
        path.parent.mkdir(exist_ok=True)
        return path

    def backup_dir(self, model_id):
        return self.path / "backup" / model_id

    # Results -------------------------------------------------------------------

    def read_results(self):
        if not self.results_path.exists():
            return {"models": []}
        return json.loads(self.results_path.read_text())

    def finished_models(self):
        return {entry["id"]: entry for entry in self.read_results()["models"]}

    def record_model(self, entry):
        """Adds (or replaces) one model's result and rewrites results.json atomically."""
        results = self.read_results()
        results["models"] = [m for m in results["models"] if m["id"] != entry["id"]]
        results["models"].append(entry)
        write_json(self.results_path, results)

    def update_results(self, **fields):
        """Sets run-level fields of results.json (dataset, device, versions, ...)."""
        results = self.read_results()
        results.update(fields)
        write_json(self.results_path, results)
