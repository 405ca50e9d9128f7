"""The process sandbox: one submission in its own process, with a time limit and a memory limit.

- Time: the child starts a session of its own (its own process group); at the
  limit the whole group is killed with SIGKILL.
- Memory: `RLIMIT_DATA`, set by the child's first lines before anything is
  imported. It counts private writable memory (heap, anonymous mmap), which is
  what an allocation takes, and makes it fail at once (a `MemoryError`) instead
  of swapping the machine. `RLIMIT_AS` would count the address space
  TensorFlow reserves and never touches: 2.05 GiB after a small ResNet and
  an attention layer ran, of which 0.4 GiB private writable (docs/grading.md),
  so a 2 GiB limit would stop TensorFlow itself. A watchdog here also kills
  the group when the child's resident anonymous and shared memory passes the
  limit (shared memory is not counted by RLIMIT_DATA).
- Output: stdout and stderr go to files (never to the grader's stdout), at
  most `output_mb` each (`RLIMIT_FSIZE`).

What it does not do is in docs/grading.md: the child runs as the same user,
can read what the user can read and reach the network, and a process that
starts a session of its own escapes the group kill.
"""

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from tracks.exercises.runner import BOOTSTRAP

POLL_SECONDS = 0.1
RESULTS_LIMIT = 32 * 2**20  # bytes of results read back


@dataclasses.dataclass(frozen=True)
class Limits:
    seconds: float = 120.0
    memory_gb: float = 4.0
    output_mb: int = 64
    threads: int = 1  # TensorFlow's thread pools in each child


@dataclasses.dataclass
class ChildRun:
    """What came back from one child: its records, how it ended, and how long it took."""

    results: dict  # check key -> {"value": ...} or {"error": {...}}
    events: list  # [{"event": ...}, ...] in order
    ended: str  # "finished", "timeout", "memory" (the watchdog), "exited" (returncode says how)
    returncode: int
    seconds: float


def child_site(folder):
    """A folder holding only residual_keras and tracks (links to the grader's own), for the child's sys.path."""
    import importlib.util

    site = pathlib.Path(folder) / "site"
    site.mkdir(parents=True, exist_ok=True)
    for package in ("residual_keras", "tracks"):
        origin = pathlib.Path(importlib.util.find_spec(package).origin).parent
        link = site / package
        if not link.exists():
            link.symlink_to(origin, target_is_directory=True)
    return site


def child_environment(limits):
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    threads = str(limits.threads)
    environment.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                       TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS=threads, OMP_NUM_THREADS=threads,
                       PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    return environment


def _resident_bytes(pid):
    """The child's resident anonymous plus shared memory, from /proc (0 when it is gone)."""
    try:
        fields = dict(line.split(":", 1) for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines())
        return sum(int(fields.get(name, "0 kB").split()[0]) * 1024 for name in ("RssAnon", "RssShmem"))
    except (OSError, ValueError):
        return 0


def _has_ended(pid):
    """True once the child has exited, without reaping it (WNOWAIT)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def read_records(path):
    """(results by key, events) from the results file; a line that is not a JSON object is skipped."""
    results, events = {}, []
    try:
        with open(path, "rb") as handle:
            text = handle.read(RESULTS_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        return results, events
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            continue
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            events.append(record)
        elif isinstance(record, dict) and isinstance(record.get("key"), str):
            results[record["key"]] = record
    return results, events


def run_submission(path, number, inputs, *, limits, workdir, site, stdout, stderr):
    """Runs exercise `number`'s probes on the file `path` in a child process; returns a `ChildRun`."""
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    request, results = workdir / "request.json", workdir / "results.jsonl"
    request.write_text(json.dumps({"file": str(pathlib.Path(path).resolve()), "exercise": number,
                                   "inputs": inputs, "results": str(results)}))
    memory = int(limits.memory_gb * 2**30)
    command = [sys.executable, "-I", "-c", BOOTSTRAP, str(request), str(site), str(memory),
               str(int(limits.output_mb * 2**20))]
    started = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                   env=child_environment(limits), start_new_session=True)
    ended = None
    while ended is None:
        if _has_ended(process.pid):
            ended = "finished"
        elif time.monotonic() - started > limits.seconds:
            ended = "timeout"
        elif _resident_bytes(process.pid) > memory:
            ended = "memory"
        else:
            time.sleep(POLL_SECONDS)
    # The whole group goes, what the file left running included: the child is not reaped yet
    # (a zombie keeps its process id), so the group's id cannot belong to another process.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
    records, events = read_records(results)
    if ended == "finished" and not any(event["event"] == "done" for event in events):
        ended = "exited"
    return ChildRun(records, events, ended, process.returncode, time.monotonic() - started)


__all__ = ["ChildRun", "Limits", "child_environment", "child_site", "read_records", "run_submission"]
