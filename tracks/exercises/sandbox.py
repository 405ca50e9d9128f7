"""The process sandbox: one submission under a supervisor of its own, with limits on time, memory and disk.

For each file the grader starts a supervisor (harness/supervisor.py), a
small process of the standard library only. It becomes a child subreaper,
forks the submission's process into a session of its own with its limits
set before anything is imported, watches the tree, and at the end kills it
and every process it left behind, whatever session and environment they
took: as their subreaper it finds them by parent. Its one line of JSON
says how the file's process ended.

- Time: the whole tree is killed at the limit.
- Memory: `RLIMIT_DATA` in the submission's process (a refused allocation is
  a `MemoryError` at once, instead of swapping the machine), and the tree's
  resident anonymous and shared memory watched by the supervisor (shared
  memory is not counted by RLIMIT_DATA). `RLIMIT_AS` would count the
  address space TensorFlow reserves and never touches (docs/grading.md).
- Output: stdout and stderr go to files (never to the grader's stdout), at
  most `output_mb` each (`RLIMIT_FSIZE`, which also caps any one file).
- Disk: what the tree writes into its working folder plus its logs, at most
  `disk_mb` in all, watched by the supervisor; the folder is removed after.
- CPU: `RLIMIT_CPU` of twice the time limit, inherited by every process.
- Files, network, signals: where the kernel has Landlock, the submission's
  process confines itself before the file is imported (harness/runner.py,
  harness/landlock.py): it reads only Python's, its packages' and the
  system's folders, `residual_keras`, this harness and its working folder,
  never the grader's `tracks` (where the references and judges are); it
  writes only in its working folder, and from the newer ABIs can neither use
  TCP nor signal the grader or another submission.

The harness the submission's process runs is copied out of the grader's
package into the scratch folder (`child_site`): it knows how to call each
exercise's code, and holds no expected value.
"""

import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys
import time

from tracks.exercises.harness.supervisor import BOOTSTRAP

RESULTS_LIMIT = 32 * 2**20  # bytes of results read back
HARNESS = pathlib.Path(__file__).resolve().parent / "harness"


@dataclasses.dataclass(frozen=True)
class Limits:
    seconds: float = 120.0
    memory_gb: float = 4.0
    output_mb: int = 64
    disk_mb: float = 256.0  # its working folder and its two logs, in all
    threads: int = 1  # TensorFlow's thread pools in each child


@dataclasses.dataclass
class ChildRun:
    """What came back from one child: its records, how it ended, and how long it took."""

    results: dict  # probe name -> {"value": ...} or {"error": {...}}
    events: list  # [{"event": ...}, ...] in order
    ended: str  # "finished", "timeout", "memory", "disk", "processes" (the supervisor), "exited" (returncode says how)
    returncode: int
    seconds: float
    left_running: int = 0  # processes the file left behind, killed after it


def hidden_folders():
    """What a submission must not read, even beneath a folder it may: the grader's `tracks` package (its
    exercise modules hold the references) and the repository's solutions/ beside it, where there is one."""
    package = pathlib.Path(__file__).resolve().parents[1]
    return [str(package), str(package.parent / "solutions")]


def child_site(folder):
    """The folder first on the child's sys.path: `residual_keras` (a link) and a copy of this harness."""
    import importlib.util

    site = pathlib.Path(folder) / "site"
    site.mkdir(parents=True, exist_ok=True)
    link = site / "residual_keras"
    if not link.exists():
        origin = pathlib.Path(importlib.util.find_spec("residual_keras").origin).parent
        link.symlink_to(origin, target_is_directory=True)
    if not (site / "harness").exists():
        shutil.copytree(HARNESS, site / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def cpu_seconds(limits):
    """`RLIMIT_CPU` of the child and of every process it starts: twice the time limit, at least a minute."""
    return max(60, int(2 * limits.seconds))


def child_environment(limits, workdir):
    """The grader's environment without PYTHON*, one thread each, and every home and temporary folder in
    `workdir` (the only folder a confined child may write: Keras' config, TensorFlow's autograph files)."""
    import os

    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    threads, workdir = str(limits.threads), str(workdir)
    environment.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                       TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS=threads, OMP_NUM_THREADS=threads,
                       PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", HOME=workdir, TMPDIR=workdir,
                       KERAS_HOME=os.path.join(workdir, ".keras"), MPLCONFIGDIR=os.path.join(workdir, ".matplotlib"))
    return environment


def read_records(path):
    """(results by probe, events) from the results file; a line that is not a JSON object is skipped."""
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
        elif isinstance(record, dict) and isinstance(record.get("probe"), str):
            results[record["probe"]] = record
    return results, events


def _status(text):
    """The supervisor's JSON line, or None when it printed none (it was killed)."""
    for line in reversed(text.splitlines()):
        try:
            status = json.loads(line)
        except ValueError:
            continue
        if isinstance(status, dict) and "ended" in status:
            return status
    return None


def run_submission(source, number, probes, inputs, *, limits, workdir, site, stdout, stderr, name="submission.py"):
    """Runs exercise `number`'s `probes` on the Python `source` (bytes), as the file `name`, under a
    supervisor; returns a `ChildRun`."""
    workdir = pathlib.Path(workdir).resolve()
    files = workdir / "work"  # the child's working folder; the request and results sit in it
    files.mkdir(parents=True, exist_ok=True)
    request, results = files / "request.json", files / "results.jsonl"
    copy = files / pathlib.Path(name).name  # the child reads this copy: the class folder is out of its reach
    copy.write_bytes(source)
    request.write_text(json.dumps({"file": str(copy), "exercise": number, "probes": list(probes), "inputs": inputs,
                                   "results": str(results), "hidden": hidden_folders()}))
    config = {"request": str(request), "workdir": str(files), "stdout": str(stdout), "stderr": str(stderr),
              "seconds": limits.seconds, "memory": int(limits.memory_gb * 2**30),
              "output": int(min(limits.output_mb, limits.disk_mb) * 2**20), "disk": int(limits.disk_mb * 2**20),
              "cpu": cpu_seconds(limits)}
    started = time.monotonic()
    supervisor = subprocess.Popen([sys.executable, "-I", "-c", BOOTSTRAP, str(site), json.dumps(config)],
                                  cwd=files, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=child_environment(limits, files))
    try:
        out, err = supervisor.communicate(timeout=limits.seconds + 60)
    except subprocess.TimeoutExpired:  # never expected: the supervisor ends its child at the time limit
        supervisor.kill()
        out, err = supervisor.communicate()
    status = _status(out.decode("utf-8", errors="replace")) or {
        "ended": "exited", "returncode": supervisor.returncode,
        "supervisor": err.decode("utf-8", errors="replace")[-2000:]}
    records, events = read_records(results)
    ended = status["ended"]
    if ended in ("finished", "interrupted") and not any(event["event"] == "done" for event in events):
        ended = "exited"
    returncode = status.get("returncode")
    return ChildRun(records, events, ended, returncode if isinstance(returncode, int) else -9,
                    time.monotonic() - started, int(status.get("left_running") or 0))


__all__ = ["ChildRun", "Limits", "child_environment", "child_site", "cpu_seconds", "hidden_folders",
           "read_records", "run_submission"]
