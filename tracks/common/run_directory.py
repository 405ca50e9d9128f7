"""The run directory: everything a run writes, and what `--resume` reads back.

    runs/<track>-<timestamp>/
      .lock                the process that owns the run holds an exclusive lock on it
      config.json          the frozen config, the track's name and the data's fingerprint
      results.json         one entry per finished model, rewritten after each
      metrics/<model>.csv  per-epoch metrics of each model
      backup/<model>/      checkpoints of a model until its results entry is recorded
      *.png, summary.md    the track's report

Nothing is ever overwritten by a new run: a new run needs a new (or empty)
directory; `--resume` continues one written by the same track.

Two promises make a long run safe to interrupt in any way:

- One process at a time. Opening a run takes an exclusive `flock` on
  `.lock`, held until the process ends. The operating system releases it
  when the process dies, however it dies, so a killed run never blocks its
  own `--resume`; a second process is refused before it writes anything.
- No half-written file. Every file is written beside its final name, flushed
  to the disk and renamed over it (`write_json`, `save_model`): a reader
  sees the old file or the new one, never a mix.

A file that is damaged anyway (edited by hand, a broken disk) is a
`RunFileError`: one line naming the file and what to do, never a traceback.
"""

import datetime
import errno
import json
import os
import pathlib
import shutil

from tracks.common.config import ConfigError, config_from_dict, config_to_dict, write_json
from tracks.common.console import fail
from tracks.common.option_ranges import place_problem, shown_path, tensorflow_path_problem

try:
    import fcntl
except ImportError:  # Windows: runs are not locked there
    fcntl = None

LOCK_NAME = ".lock"


class RunFileError(ConfigError):
    """A file of a run directory cannot be read or written (one line for the user)."""


def read_json(path, what_to_do):
    """The JSON in `path`; a `RunFileError` naming the file and `what_to_do` otherwise."""
    try:
        text = pathlib.Path(path).read_bytes().decode("utf-8")
    except OSError as error:
        raise RunFileError(f"cannot read {path} ({error.strerror}); {what_to_do}") from None
    except UnicodeDecodeError as error:
        raise RunFileError(f"{path} is damaged (not UTF-8 text: byte {error.object[error.start]:#04x} at "
                           f"offset {error.start}); {what_to_do}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise RunFileError(
            f"{path} is damaged (not valid JSON: {error.msg} at line {error.lineno}); {what_to_do}"
        ) from None
    except (ValueError, RecursionError) as error:  # a number of over 4300 digits; arrays nested too deep
        raise RunFileError(f"{path} is damaged (not JSON this package reads: {error}); {what_to_do}") from None


def describe_os_error(error, folder=None):
    """'FILE: reason' for an `OSError`: the file first where it is known, else the folder it was being written in
    (a full disk fails a write, which names no file), else "a file"."""
    if error.filename is not None:
        where = shown_path(error.filename, keep=400)  # a path of thousands of characters: its ends and length
    else:
        where = f"a file in {folder}" if folder is not None else "a file"
    return f"{where}: {error.strerror or error}"


def refuse_a_long_path(error):
    """A command's last word on an `OSError` that reached its `main`: `fail`'s one line (exit 2) for a path too
    long for the file system, one no option read (each path option refuses those it reads); any other is
    raised again."""
    if error.errno != errno.ENAMETOOLONG:
        raise error
    return fail(describe_os_error(error))


def _refuse_if_not_empty(path, reuse_hint):
    """`ConfigError` for a directory that holds something: the lock, and a config.json.tmp of a run killed
    while it was being created, do not count; `--resume` (`reuse_hint`) is suggested for a run only."""
    if path.is_dir() and any(entry.name != LOCK_NAME and entry.suffix != ".tmp" for entry in path.iterdir()):
        hint = reuse_hint if (path / "config.json").is_file() else "choose another --out"
        raise ConfigError(f"{path} already exists and is not empty; " + hint.format(path=path))


class RunDirectory:
    """Paths and bookkeeping of one run of a track, locked for one process.

    `create` and `resume` return it locked; use it as a context manager
    (`with run: ...`) so that the lock is released however the work ends.
    """

    def __init__(self, path, track):
        self.path = pathlib.Path(path)
        self.track = track
        self._lock_fd = None
        self._created = False  # create() made this run (rather than resume())
        self._made_directory = False  # create() made the directory (it did not exist)

    # Creating and reopening -------------------------------------------------

    @staticmethod
    def check_new(out, reuse_hint="use --resume {path} to continue it or choose another --out"):
        """`ConfigError` for an `--out` that `create` would refuse, read from the file system only (nothing is
        written): no name, a file, a non-empty directory, or no writable directory to make it in."""
        if out is None:
            return
        if not str(out).strip():
            raise ConfigError(f"--out {str(out)!r} names no directory; give one, or leave --out out for a new one "
                              "under runs/")
        unusable = tensorflow_path_problem(out)
        if unusable:
            raise ConfigError(f"--out {unusable}; choose another --out")
        path = pathlib.Path(out).expanduser()
        if path.exists() and not path.is_dir():
            raise ConfigError(f"--out {path} is a file, not a directory; choose another --out")
        _refuse_if_not_empty(path, reuse_hint)
        problem = place_problem(path)
        if problem:
            raise ConfigError(f"--out {path}: {problem}; choose another --out")

    @classmethod
    def create(cls, track, config, out=None, runs_root="runs", data_fingerprint=None,
               reuse_hint="use --resume {path} to continue it or choose another --out"):
        """A new, locked run directory for `config`; refuses to reuse a non-empty one.

        Args:
            track: the track's name, written to config.json.
            config: the frozen config dataclass.
            out: the directory (default runs/<track>-<timestamp>).
            data_fingerprint: a dict describing the data actually used
                (written to config.json; `--resume` checks the data against it).
            reuse_hint: what the error for a non-empty `out` suggests
                (`{path}` is replaced by the directory).

        Raises:
            ConfigError: `out` is a file, not empty, not writable, or in use.
        """
        if out is None:
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            out = pathlib.Path(runs_root) / f"{track}-{stamp}"
        run = cls(pathlib.Path(out).expanduser(), track)  # the directory check_new checked
        cls.check_new(run.path, reuse_hint)
        run._created, run._made_directory = True, not run.path.exists()
        try:
            run.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(
                f"cannot create the run directory {run.path} ({error.strerror}); choose another --out"
            ) from None
        run.lock()
        try:
            _refuse_if_not_empty(run.path, reuse_hint)  # another process may have been faster
            write_json(run.config_path, {"track": track, **config_to_dict(config),
                                         "data_fingerprint": data_fingerprint})
            write_json(run.results_path, {"models": []})
        except OSError as error:
            run.release()
            raise ConfigError(f"cannot write {describe_os_error(error)}; choose another --out") from None
        except ConfigError:
            run.release()
            raise
        return run

    @classmethod
    def resume(cls, track, path, config_cls):
        """Reopens and locks a run of `track`; returns (run, config, data fingerprint or None)."""
        run = cls(path, track)
        if not run.path.is_dir():
            what = "a file, not a run directory" if run.path.exists() else "no such directory"
            raise ConfigError(f"--resume {run.path}: {what}")
        if not run.config_path.is_file():
            raise ConfigError(f"--resume {run.path}: no config.json there, not a run directory")
        data = run._read_config()
        found = data.get("track")
        if found != track:
            raise ConfigError(
                f"--resume {run.path}: that run belongs to the {found!r} track, not {track!r}"
            )
        run.lock()
        try:
            config = config_from_dict(config_cls, data)
        except ConfigError as error:
            run.release()
            raise RunFileError(f"{run.config_path} does not describe a {track} run ({error}); "
                               f"restore it from a copy, or start a new run") from None
        fingerprint = data.get("data_fingerprint")
        if fingerprint is not None and not isinstance(fingerprint, dict):
            run.release()
            raise RunFileError(f"{run.config_path}: data_fingerprint is damaged (not an object); "
                               f"restore config.json from a copy, or start a new run")
        return run, config, fingerprint

    def _read_config(self):
        data = read_json(self.config_path, "restore it from a copy, or start a new run with --out")
        if not isinstance(data, dict):
            raise RunFileError(
                f"{self.config_path} does not describe a run (a JSON {type(data).__name__}, "
                f"not an object of options); restore it from a copy, or start a new run"
            )
        return data

    def update_config(self, config, data_fingerprint):
        """Rewrites config.json (options applied on resume, a fingerprint recorded late)."""
        write_json(self.config_path, {"track": self.track, **config_to_dict(config),
                                      "data_fingerprint": data_fingerprint})

    # The lock ------------------------------------------------------------------

    def lock(self):
        """Takes the run's exclusive lock, or raises `ConfigError` naming the holder.

        The lock lives as long as this process (or until `release`): the
        operating system drops it when the process ends, even by SIGKILL.
        """
        if fcntl is None or self._lock_fd is not None:
            return
        lock_path = self.path / LOCK_NAME
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise ConfigError(f"cannot write in {self.path} ({error.strerror}); "
                              f"choose a directory you can write to") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(
                f"{self.path} is in use by another process (pid {holder}); wait for it to "
                f"finish, or stop it and then continue with --resume {self.path}"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    @property
    def locked(self):
        """Whether this process holds the run's lock."""
        return self._lock_fd is not None

    def __enter__(self):
        """`with run:` holds the run's lock for the block and releases it however the block ends."""
        return self

    def __exit__(self, *exc_info):
        self.release()
        return False

    def release(self):
        """Gives the lock back (a process that ends releases it anyway)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def discard(self):
        """Removes a run that failed before it finished anything, and releases it.

        Only for a run this process created (it was empty then, so everything
        in it was written by this process); the directory itself goes too
        where `create` made it. A run with a finished model is kept.
        """
        try:
            if not self._created or self.finished_models():
                return
        except ConfigError:
            return
        finally:
            self.release()
        for entry in sorted(self.path.rglob("*"), key=lambda path: len(path.parts), reverse=True):
            if entry.is_dir() and not entry.is_symlink():
                entry.rmdir()
            else:
                entry.unlink(missing_ok=True)
        if self._made_directory:
            self.path.rmdir()

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

    def tensorboard_dir(self, model_id):
        """Where a model's TensorBoard logs go: `tensorboard --logdir <run>/tensorboard` shows them all."""
        return self.path / "tensorboard" / model_id

    def backup_dir(self, model_id):
        return self.path / "backup" / model_id

    def discard_backup(self, model_id):
        """Deletes a model's checkpoints (once its results entry is recorded)."""
        shutil.rmtree(self.backup_dir(model_id), ignore_errors=True)
        backups = self.path / "backup"
        if backups.is_dir() and not any(backups.iterdir()):
            backups.rmdir()

    # Results -------------------------------------------------------------------

    def read_results(self):
        if not self.results_path.exists():
            return {"models": []}
        results = read_json(self.results_path, "restore it from a copy, or delete it to train "
                                               "every model again")
        models = results.get("models") if isinstance(results, dict) else None
        if not isinstance(models, list) or not all(isinstance(m, dict) and "id" in m for m in models):
            raise RunFileError(f"{self.results_path} is damaged (no list of models with ids); "
                               f"restore it from a copy, or delete it to train every model again")
        return results

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

    def save_model(self, model, name):
        """`model.save` to `name` in the run directory, atomically (written, then renamed)."""
        final = self.path / name
        partial = self.path / f"partial-{name}"  # Keras wants the .keras suffix
        model.save(partial)
        os.replace(partial, final)
        return final
