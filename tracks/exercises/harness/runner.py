"""The submission's process: confines itself, imports the student's file, runs the probes, sends back values.

Started by supervisor.py (in the process it forks) with limits already set,
stdout and stderr in files (or, where that Linux sandbox cannot run, by the
grader as a plain process: `check` on macOS or Windows, sandbox.py), and one folder first on sys.path holding only
what this process may use: `residual_keras` and this harness, copied out
of the grader's package (the grader's exercise modules, with their
references and judges, are not among them and are out of Landlock's read
set). The working folder is an empty temporary one.

Every record is one JSON line in the results file: {"event": ...} for what
happened (confinement, start, imported, import_error, exit, memory, done) and
{"probe": ..., "value": ...} or {"probe": ..., "error": {...}} per probe. The
grader reads them after the process has ended and computes every expected
value itself; nothing here says whether a value is right, so a file that
replaces a probe or writes records of its own changes only the values it
sends back.
"""

import importlib
import json
import os
import sys
import traceback


def _where(error, path):
    """The line of the student's file the error came from, or None."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == path]
    return frames[-1].lineno if frames else None


def _error(error, path):
    message = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
    if isinstance(error, SystemExit):
        message = f"sys.exit({error.code!r})"
    return {"type": type(error).__name__, "message": message, "line": _where(error, path)}


def _out_of_memory(error):
    """numpy's MemoryError, or TensorFlow's ResourceExhaustedError (an allocation refused by RLIMIT_DATA)."""
    return isinstance(error, MemoryError) or type(error).__name__ == "ResourceExhaustedError"


def load(path):
    """The student's file as a module with a name of its own (never on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    return module


def probes_of(number):
    """The probe functions of exercise `number` (this harness's exN module), by name."""
    return importlib.import_module(f"{__package__}.ex{int(number)}").PROBES


def run(path, probes, names, inputs, send):
    """Imports `path` and runs the probes `names` (of `probes`, by name) in order, sending each record with `send`.

    `probes` is looked up before the file runs (main() passes `probes_of(number)`); a file may still change
    the functions in it, which changes only the values it sends back.
    """
    from .values import plain

    send({"event": "start"})
    try:
        module = load(path)
    except SystemExit as error:
        send({"event": "exit", "error": _error(error, path), "during": "import"})
        return
    except BaseException as error:  # noqa: BLE001  (a file may raise anything on import)
        send({"event": "memory" if _out_of_memory(error) else "import_error", "error": _error(error, path),
              "during": "import"})
        return
    send({"event": "imported"})
    for name in names:
        try:
            line = json.dumps({"probe": name, "value": plain(probes[name](module, inputs))})
        except BaseException as error:  # noqa: BLE001  (SystemExit, KeyboardInterrupt: a failed check)
            if _out_of_memory(error):
                send({"event": "memory", "error": _error(error, path), "during": name})
            line = json.dumps({"probe": name, "error": _error(error, path)})
        send(line)
    send({"event": "done"})


def readable_folders(site):
    """What the submission's process may read: Python's and its packages' folders, `residual_keras` and this
    harness (in `site`), the system's folders and its working folder; never the repository around them."""
    from .landlock import SYSTEM_READ

    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return [*sorted(prefixes), site, os.path.realpath(os.path.join(site, "residual_keras")), os.getcwd(),
            *SYSTEM_READ]


def confine_self(site, hidden):
    """Landlock on this process (landlock.py), before the file is imported: the event to send."""
    from .landlock import abi_version, confine

    try:
        confined = confine(readable_folders(site), [os.getcwd()], hidden=hidden)
    except OSError as error:  # Landlock there but refusing: say so, the grader reports it
        return {"event": "confinement", "confined": [], "why": str(error)[:200]}
    why = "" if confined else "Landlock is not available here (an older kernel, or a container's seccomp filter)"
    return {"event": "confinement", "confined": confined, "abi": abi_version(), "why": why}


def main(request_path, site):
    with open(request_path) as handle:
        request = json.load(handle)
    os.unlink(request_path)  # the inputs live on in this process only
    if request["confine"]:
        confinement = confine_self(site, request["hidden"])
    else:  # a plain process (sandbox.py, `run_unconfined`): the grader says why in its own words
        confinement = {"event": "confinement", "confined": [], "why": "a plain process, not confined"}
    with open(request["results"], "a") as results:

        def send(record):
            results.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
            results.flush()

        send(confinement)
        run(request["file"], probes_of(request["exercise"]), request["probes"], request["inputs"], send)
    # Ends here: a thread the file left running (or TensorFlow's teardown) cannot keep it alive
    # past its last record into a timeout.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(0)


__all__ = ["load", "main", "probes_of", "run"]
