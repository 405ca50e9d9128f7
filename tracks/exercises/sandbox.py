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

Where the supervisor cannot run (macOS, Windows, a Linux without /proc or
without `prctl(PR_SET_CHILD_SUBREAPER)`: `sandbox_problem` says why),
`run_unconfined` runs the same harness as a plain process: the same probes,
inputs and verdicts, a time limit (its process group killed at the limit),
and where POSIX's `resource` module exists the CPU, output and memory
limits; no disk limit, no confinement, nothing to catch a process it leaves
behind outside its group. `check` uses it for a student's own file and says
so; `grade`, which runs other people's files, refuses it unless told
(`--unconfined`).

A grading can be stopped (Ctrl-C, SIGTERM: cli.py) through the `stop` event
of `run_submission`: the supervisor is told to end the file's tree, and
says how it ended. The supervisors run in sessions of their own, so that a
Ctrl-C at the terminal reaches the grader only, which stops them in order.
"""

import ctypes
import dataclasses
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

from tracks.exercises.harness.supervisor import BOOTSTRAP, over_hard_limit, rlimits

RESULTS_LIMIT = 32 * 2**20  # bytes of results read back
# The largest limits `check` and `grade` take (docs/grading.md): a day, a TiB of memory, a TiB of disk; each
# fits the kernel's 64-bit rlimits with room to spare (RLIMIT_CPU is twice the time).
MAX_SECONDS = 86_400.0
MAX_MEMORY_GB = 1024.0
MAX_DISK_MB = 2.0**20
# The smallest: below them every file fails, the right ones too. Measured with the solutions (seed 38, two cores
# shared with other work): a file that imports TensorFlow crashes under 0.3 GiB and passes under 0.4 (its tree's
# resident memory peaks near 0.28 GiB); each takes 4 to 5 s; each writes well under 1 MiB.
MIN_SECONDS = 10.0
MIN_MEMORY_GB = 0.5
MIN_DISK_MB = 1.0
HARNESS = pathlib.Path(__file__).resolve().parent / "harness"


@dataclasses.dataclass(frozen=True)
class SubmissionLimits:
    """What the process that runs one submission may take (tracks/common/limits.py is about a run's machine)."""

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
    # "finished", "timeout", "memory", "disk", "processes" (the supervisor), "exited" (returncode says how),
    # "interrupted" (the grader was stopped), "grader_gone" (the supervisor found its grader gone)
    ended: str
    returncode: int
    seconds: float
    left_running: int = 0  # processes the file left behind, killed after it
    # The memory it took (the supervisor's line; 0 where none said): its tree's resident anonymous and shared
    # memory at the largest poll, and the largest process's peak resident set, its libraries' pages included.
    peak_memory: int = 0
    peak_rss: int = 0


# How the grader starts a plain process (run_unconfined): the harness from the copy in SITE, not confined.
UNCONFINED_BOOTSTRAP = """
import sys
sys.path.insert(0, sys.argv[1])
from harness.runner import main
main(sys.argv[2], sys.argv[1])
"""
POLL_SECONDS = 0.1  # how often a waiting grader thread looks at its `stop` event
_PR_GET_CHILD_SUBREAPER = 37
_PLATFORMS = {"darwin": "macOS", "win32": "Windows", "cygwin": "Cygwin"}


def sandbox_problem():
    """None where the process sandbox (harness/supervisor.py) can run here, else why not, in a few words."""
    if sys.platform != "linux":
        return f"{_PLATFORMS.get(sys.platform, sys.platform)} has no Linux process sandbox"
    if not hasattr(os, "fork"):
        return "this Python has no os.fork"
    try:
        import resource  # noqa: F401  (the supervisor sets the file's limits with it)
    except ImportError:
        return "this Python has no resource module"
    if not os.path.isfile("/proc/self/stat"):
        return "/proc is not mounted"
    try:
        state = ctypes.c_int()
        if ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(state), 0, 0, 0) != 0:
            return "the kernel has no child subreapers (Linux before 3.4)"
    except (OSError, AttributeError):
        return "prctl is not available"
    return None


def hidden_folders():
    """What a submission must not read, even beneath a folder it may: the grader's `tracks` package (its
    exercise modules hold the references) and the repository's solutions/ beside it, where there is one."""
    package = pathlib.Path(__file__).resolve().parents[1]
    return [str(package), str(package.parent / "solutions")]


def child_site(folder):
    """The folder first on the child's sys.path: `residual_keras` (a link) and a copy of this harness."""
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


def _output_bytes(limits):
    return int(min(limits.output_mb, limits.disk_mb) * 2**20)


def limit_config(limits):
    """The supervisor's limits of one file (harness/supervisor.py): seconds, bytes and CPU seconds."""
    return {"seconds": limits.seconds, "memory": int(limits.memory_gb * 2**30), "output": _output_bytes(limits),
            "disk": int(limits.disk_mb * 2**20), "cpu": cpu_seconds(limits)}


# Each of the file's rlimits (supervisor.rlimits): the option behind it, its unit, and the shell's hard limit.
_LIMIT_OPTIONS = {"memory": ("--memory-gb", 2**30, "GiB of memory", "ulimit -Hd"),
                  "cpu": ("--timeout", 1, "CPU seconds (twice --timeout, at least 60)", "ulimit -Ht"),
                  "output": ("--disk-mb", 2**20, "MiB of output", "ulimit -Hf")}


def limits_problem(limits):
    """Why the file's process could not be given `limits` here, in one line, or None: one of its rlimits above
    the hard limit this process was started with (`ulimit -H`), which only CAP_SYS_RESOURCE may raise."""
    try:
        over = over_hard_limit(limit_config(limits))
    except ImportError:  # no resource module (Windows): only the time limit is kept
        return None
    if over is None:
        return None
    name, value, hard = over
    option, scale, unit, shell = _LIMIT_OPTIONS[name]
    return (f"{option}: a file would get {value / scale:.3g} {unit}, above the hard limit of {hard / scale:.3g} this "
            f"process was started with ({shell}); lower {option}, or raise the hard limit")


def _communicate(process, deadline, stop):
    """(stdout, stderr) of `process` once it ends. Past `deadline` (time.monotonic()) it is killed; when the
    event `stop` is set, it is sent SIGTERM (a supervisor then ends the file's tree and says so)."""
    stopped = False
    while True:
        try:
            return process.communicate(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > deadline:  # never expected of a supervisor: it ends its child at the limit
            process.kill()
        elif stop is not None and stop.is_set() and not stopped:
            process.terminate()
            stopped = True


def run_submission(source, number, probes, inputs, *, limits, workdir, site, stdout, stderr, name="submission.py",
                   confined=True, stop=None):
    """Runs exercise `number`'s `probes` on the Python `source` (bytes), as the file `name`, under a
    supervisor (`confined=False`: as a plain process, `run_unconfined`); returns a `ChildRun`.

    `stop`: a `threading.Event`; once set, the file's processes are ended and the run comes back as
    "interrupted".
    """
    workdir = pathlib.Path(workdir).resolve()
    files = workdir / "work"  # the child's working folder; the request and results sit in it
    files.mkdir(parents=True, exist_ok=True)
    request, results = files / "request.json", files / "results.jsonl"
    copy = files / pathlib.Path(name).name  # the child reads this copy: the class folder is out of its reach
    copy.write_bytes(source)
    request.write_text(json.dumps({"file": str(copy), "exercise": number, "probes": list(probes), "inputs": inputs,
                                   "results": str(results), "hidden": hidden_folders(), "confine": confined}))
    if not confined:
        return run_unconfined(request, results, limits=limits, files=files, site=site, stdout=stdout,
                              stderr=stderr, stop=stop)
    config = {"request": str(request), "results": str(results), "workdir": str(files), "stdout": str(stdout),
              "stderr": str(stderr), "grader": os.getpid(), **limit_config(limits)}
    started = time.monotonic()
    # A session of its own: a Ctrl-C at the terminal reaches the grader, which stops each supervisor in order.
    supervisor = subprocess.Popen([sys.executable, "-I", "-c", BOOTSTRAP, str(site), json.dumps(config)],
                                  cwd=files, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=child_environment(limits, files),
                                  start_new_session=True)
    out, err = _communicate(supervisor, started + limits.seconds + 60, stop)
    status = _status(out.decode("utf-8", errors="replace")) or {
        "ended": "exited", "returncode": supervisor.returncode,
        "supervisor": err.decode("utf-8", errors="replace")[-2000:]}
    records, events = read_records(results)
    ended = status["ended"]
    if ended in ("finished", "interrupted") and not any(event["event"] == "done" for event in events):
        ended = "exited"
    returncode = status.get("returncode")
    if stop is not None and stop.is_set() and ended != "finished":
        ended = "interrupted"
    return ChildRun(records, events, ended, returncode if isinstance(returncode, int) else -9,
                    time.monotonic() - started, int(status.get("left_running") or 0),
                    int(status.get("peak_memory") or 0), int(status.get("peak_rss") or 0))


def _plain_limits(limits):
    """A function for `preexec_fn` that sets the file's CPU, output and memory limits where POSIX's `resource`
    exists, else None; and the limits it sets, in words."""
    try:
        import resource
    except ImportError:  # Windows
        return None, ["time"]
    wanted = rlimits(limit_config(limits))

    def set_limits():
        for _, limit, value in wanted:
            try:
                resource.setrlimit(limit, (value, value))
            except (ValueError, OSError):  # a platform that refuses one (macOS and RLIMIT_DATA, at times)
                pass

    return set_limits, ["time", "CPU", "output", "memory"]


def unconfined_words():
    """What a plain process is held to here, in words, for `check`'s one line."""
    return ", ".join(_plain_limits(SubmissionLimits())[1])


def _end_group(process):
    """Kills `process` and, where it can, its process group (POSIX) or tree (Windows)."""
    if sys.platform == "win32":
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True, check=False)
    else:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    process.kill()


def run_unconfined(request, results, *, limits, files, site, stdout, stderr, stop=None):
    """The harness on `request` as a plain process of the grader's user (no supervisor, no Landlock): a
    `ChildRun` from the same records; its group is killed at the time limit or when `stop` is set."""
    set_limits, _ = _plain_limits(limits)
    started = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-I", "-c", UNCONFINED_BOOTSTRAP, str(site), str(request)], cwd=files,
            stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=child_environment(limits, files),
            preexec_fn=set_limits, start_new_session=sys.platform != "win32",
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
        ended = None
        while ended is None:
            try:
                process.wait(timeout=POLL_SECONDS)
                ended = "finished"
            except subprocess.TimeoutExpired:
                if time.monotonic() - started > limits.seconds:
                    ended = "timeout"
                elif stop is not None and stop.is_set():
                    ended = "interrupted"
        _end_group(process)  # what the file left running in its group goes with it
        returncode = process.wait()
    records, events = read_records(results)
    if ended == "finished" and not any(event["event"] == "done" for event in events):
        ended = "exited"
    return ChildRun(records, events, ended, returncode, time.monotonic() - started)


__all__ = ["ChildRun", "SubmissionLimits", "child_environment", "child_site", "cpu_seconds", "hidden_folders",
           "limit_config", "limits_problem", "read_records", "run_submission", "run_unconfined", "sandbox_problem",
           "unconfined_words"]
