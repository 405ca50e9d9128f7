"""The submission's process: imports the student's file, runs each check's probe, sends back plain values.

Started by tracks/exercises/sandbox.py as `python -I -c BOOTSTRAP REQUEST`:
isolated mode (no PYTHONPATH, no user site, no current folder on sys.path),
limits set before anything else is imported, and one folder put first on
sys.path holding only the two packages this process needs (residual_keras
and tracks), so the repository's solutions/ is not importable. The working
folder is an empty temporary one.

Every record is one JSON line in the results file: {"event": ...} for what
happened (confinement, start, imported, import_error, exit, memory, done) and
{"key": ..., "value": ...} or {"key": ..., "error": {...}} per check. The
grader reads them after the process has ended and decides everything itself;
nothing here says whether a value is right.
"""

import importlib.util
import json
import os
import sys
import traceback

# The first lines of the child: limits, then this package from the grader's own folder.
BOOTSTRAP = """
import resource, sys
request, site, data, output, cpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
resource.setrlimit(resource.RLIMIT_DATA, (data, data))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
sys.path.insert(0, site)
from tracks.exercises.runner import main
main(request, site)
"""


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
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    return module


def run(path, exercise, inputs, send):
    """Imports `path` and runs every probe of `exercise`, sending each record with `send`."""
    from tracks.exercises.exercise import plain

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
    for spec in exercise.checks:
        try:
            record = {"key": spec.key, "value": plain(spec.probe(module, inputs))}
            line = json.dumps(record)
        except BaseException as error:  # noqa: BLE001  (SystemExit, KeyboardInterrupt: a failed check)
            if _out_of_memory(error):
                send({"event": "memory", "error": _error(error, path), "during": spec.key})
            line = json.dumps({"key": spec.key, "error": _error(error, path)})
        send(line)
    send({"event": "done"})


def readable_folders(site):
    """What the submission's process may read: Python's and its packages' folders, the grader's two
    packages, the system's folders and its working folder; never the repository around them."""
    from tracks.exercises.landlock import SYSTEM_READ

    packages = [os.path.realpath(os.path.join(site, name)) for name in ("residual_keras", "tracks")]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return [*sorted(prefixes), site, *packages, os.getcwd(), *SYSTEM_READ]


def confine_self(site):
    """Landlock on this process (landlock.py), before the catalogue or the file is imported: the event to send."""
    from tracks.exercises.landlock import abi_version, confine

    try:
        confined = confine(readable_folders(site), [os.getcwd()])
    except OSError as error:  # Landlock there but refusing: say so, the grader reports it
        return {"event": "confinement", "confined": [], "why": str(error)[:200]}
    why = "" if confined else "Landlock is not available here (an older kernel, or a container's seccomp filter)"
    return {"event": "confinement", "confined": confined, "abi": abi_version(), "why": why}


def main(request_path, site):
    with open(request_path) as handle:
        request = json.load(handle)
    confinement = confine_self(site)
    from tracks.exercises.catalogue import BY_NUMBER

    exercise = BY_NUMBER[request["exercise"]]
    with open(request["results"], "a") as results:

        def send(record):
            results.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
            results.flush()

        send(confinement)
        run(request["file"], exercise, request["inputs"], send)
    # Ends here: a thread the file left running (or TensorFlow's teardown) cannot keep it alive
    # past its last record into a timeout.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(0)


__all__ = ["BOOTSTRAP", "load", "main", "run"]
