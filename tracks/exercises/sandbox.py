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
- CPU: `RLIMIT_CPU` of twice the time limit (`cpu_seconds`), inherited by
  every process the file starts. A process that escapes the group kill by
  starting a session of its own is killed after the file by the token its
  environment carries (`kill_leftovers`), or, if it cleared its environment,
  when it has spent that much CPU.

- Files, network, signals: where the kernel has Landlock, the child confines
  itself before the file is imported (runner.py, landlock.py): it reads only
  Python's, its packages' and the system's folders and its working folder
  (which holds a copy of the file), writes only there, and from the newer
  ABIs can neither use TCP nor signal the grader or another submission.

What it does not do is in docs/grading.md: without Landlock the child can
read and write what the user can, reach the network and signal the grader,
and a process that starts a session of its own escapes the group kill.
"""

import dataclasses
import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import time

from tracks.exercises.runner import BOOTSTRAP

POLL_SECONDS = 0.1
TOKEN = "RESIDUAL_KERAS_SUBMISSION"  # an environment variable every process of one file inherits
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


def kill_leftovers(token):
    """SIGKILL to every process still carrying the run's `TOKEN`: those the file started in sessions of
    their own, which the group kill misses. One that also cleared its environment is left to `RLIMIT_CPU`."""
    marker = f"{TOKEN}={token}".encode() + b"\0"
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):  # gone, or not ours to read
            pass


def cpu_seconds(limits):
    """`RLIMIT_CPU` of the child and of every process it starts: twice the time limit, at least a minute.

    The time limit kills the child's process group; a process that started a session of its own
    escapes that kill, and this bounds what it can spend (it is killed at the limit, SIGKILL).
    """
    return max(60, int(2 * limits.seconds))


def child_environment(limits, workdir):
    """The grader's environment without PYTHON*, one thread each, and every home and temporary folder in
    `workdir` (the only folder a confined child may write: Keras' config, TensorFlow's autograph files)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    threads, workdir = str(limits.threads), str(workdir)
    environment.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                       TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS=threads, OMP_NUM_THREADS=threads,
                       PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", HOME=workdir, TMPDIR=workdir,
                       KERAS_HOME=os.path.join(workdir, ".keras"), MPLCONFIGDIR=os.path.join(workdir, ".matplotlib"))
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
    workdir = pathlib.Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    request, results = workdir / "request.json", workdir / "results.jsonl"
    copy = workdir / pathlib.Path(path).name  # the child reads this copy: the class folder may be out of its reach
    copy.write_bytes(pathlib.Path(path).read_bytes())
    request.write_text(json.dumps({"file": str(copy), "exercise": number, "inputs": inputs,
                                   "results": str(results)}))
    memory = int(limits.memory_gb * 2**30)
    command = [sys.executable, "-I", "-c", BOOTSTRAP, str(request), str(site), str(memory),
               str(int(limits.output_mb * 2**20)), str(cpu_seconds(limits))]
    environment = child_environment(limits, workdir)
    token = environment[TOKEN] = secrets.token_hex(16)  # marks every process the file starts
    started = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                   env=environment, start_new_session=True)
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
    kill_leftovers(token)
    records, events = read_records(results)
    if ended == "finished" and not any(event["event"] == "done" for event in events):
        ended = "exited"
    return ChildRun(records, events, ended, process.returncode, time.monotonic() - started)


__all__ = ["ChildRun", "Limits", "child_environment", "child_site", "cpu_seconds", "read_records", "run_submission"]
