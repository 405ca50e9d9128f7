"""One file's supervisor: a subreaper that forks the submission's process, watches it and ends every descendant.

The grader starts one supervisor per file (`python -I -c BOOTSTRAP`, standard
library only, not confined). It makes itself a child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`), so every process the submission starts and
leaves behind, in whatever session and with whatever environment, is
re-parented to it rather than to init, then forks the submission's process:
a session of its own, stdout and stderr into files, the limits set
(`RLIMIT_DATA`, `RLIMIT_CPU`, `RLIMIT_FSIZE`, no core files) before
anything else is imported, then runner.py (a limit it may not set, above a
hard limit, is written to the results as a `limits` event, and the file is
not run). It watches that process tree until it ends or passes a limit:

- time: the whole tree is killed at the time limit;
- memory: the tree's resident anonymous and shared memory (shared memory is
  not in RLIMIT_DATA), checked every poll;
- disk: what the tree has written into its working folder plus its two
  logs, in bytes and in files, checked every poll;
- processes: more than `MAX_PROCESSES` in the tree (a fork bomb);
- the grader: gone (killed, even by SIGKILL, which it cannot pass on), seen as
  this process's parent changing.

Then it kills the submission's process group and every descendant left
(found through /proc by parent, as their subreaper), reaps them, and prints
one JSON line for the grader: how the process ended, its exit code, how
many processes it left behind, and the memory it took: the tree's resident
anonymous and shared memory at its largest poll (`peak_memory`), and the
kernel's high-water mark of the largest process's whole resident set, its
libraries' pages included (`peak_rss`, getrusage of the reaped children).
"""

import ctypes
import json
import os
import pathlib
import signal
import sys
import time

# The supervisor's first lines (`python -I -c BOOTSTRAP SITE CONFIG`): this harness from the copy in SITE.
BOOTSTRAP = """
import sys
sys.path.insert(0, sys.argv[1])
from harness.supervisor import main
main(sys.argv[1], sys.argv[2])
"""

POLL_SECONDS = 0.05
MAX_FILES = 20_000  # entries in the working folder: past this it counts as over the disk limit
MAX_PROCESSES = 256  # in the file's tree: past this it is a fork bomb, and killed
_PR_SET_CHILD_SUBREAPER = 36
_CAP_SYS_RESOURCE = 24  # linux/capability.h: the capability that may raise a hard limit


def rlimits(config):
    """The limits the submission's process is given, [(name, resource's limit, value)], from the grader's config:
    its memory (RLIMIT_DATA, bytes), CPU seconds, output (RLIMIT_FSIZE, bytes) and no core file."""
    import resource  # POSIX only, as in _child

    return [("memory", resource.RLIMIT_DATA, config["memory"]), ("cpu", resource.RLIMIT_CPU, config["cpu"]),
            ("output", resource.RLIMIT_FSIZE, config["output"]), ("core", resource.RLIMIT_CORE, 0)]


def may_raise_hard_limits():
    """True where this process holds CAP_SYS_RESOURCE (root's, outside most containers): it may set a limit above
    its hard limit; any other process may not."""
    try:
        with open("/proc/self/status") as handle:
            effective = next(line for line in handle if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    return bool(int(effective.split()[1], 16) >> _CAP_SYS_RESOURCE & 1)


def over_hard_limit(config):
    """(name, value, hard limit) of the first of the submission's limits (`rlimits`) above this process's hard
    limit, which its children inherit and could not set, or None."""
    import resource

    if may_raise_hard_limits():
        return None
    for name, limit, value in rlimits(config):
        hard = resource.getrlimit(limit)[1]
        if hard != resource.RLIM_INFINITY and value > hard:
            return name, value, hard
    return None


def _parents():
    """{pid: parent pid} of every process this supervisor can see."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    found[int(entry.name)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return found


def descendants(root):
    """The process ids below `root` in the process tree (children, their children, ...)."""
    parents, below, frontier = _parents(), [], {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier and pid not in below}
        below.extend(frontier)
    return below


def _memory(path, names):
    try:
        fields = dict(line.split(":", 1) for line in pathlib.Path(path).read_text().splitlines() if ":" in line)
        return sum(int(fields[name].split()[0]) * 1024 for name in names)
    except (OSError, ValueError, KeyError):
        return None


def resident_bytes(pids, limit):
    """Resident anonymous plus shared memory of the tree `pids` (0 for those gone), compared with `limit`.

    First from /proc/PID/status (RssAnon + RssShmem: 0.03 ms a process); only when that sum passes the
    limit, again from smaps_rollup's proportional shares (Pss_Anon + Pss_Shmem: 37 ms for a process that
    imported TensorFlow), so that processes forked from one another and sharing their pages copy-on-write
    are not counted as copies.
    """
    total = sum(_memory(f"/proc/{pid}/status", ("RssAnon", "RssShmem")) or 0 for pid in pids)
    if total <= limit:
        return total
    shares = [_memory(f"/proc/{pid}/smaps_rollup", ("Pss_Anon", "Pss_Shmem")) for pid in pids]
    return total if None in shares else sum(shares)


def disk_used(folder, logs):
    """(bytes, entries) written under `folder` (allocated blocks, links not followed), plus the logs' bytes."""
    used, entries, stack = 0, 0, [folder]
    while stack and entries <= MAX_FILES:
        try:
            with os.scandir(stack.pop()) as scan:
                for entry in scan:
                    entries += 1
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    used += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            pass
    for log in logs:
        try:
            used += os.stat(log).st_size
        except OSError:
            pass
    return used, entries


def _has_ended(pid):
    """True once `pid` has exited, without reaping it (WNOWAIT): its id cannot be reused meanwhile."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def watch(pid, config, grader, peak=None):
    """How the submission's process ended: finished, timeout, memory, disk, processes or grader_gone (the
    grader, process `grader`, is no longer this supervisor's parent: nobody is left to read the verdicts).
    `peak`: a list whose one number is raised to the largest resident memory of the tree seen at a poll."""
    started, memory, disk = time.monotonic(), config["memory"], config["disk"]
    peak = [0] if peak is None else peak
    logs = (config["stdout"], config["stderr"])
    while True:
        if _has_ended(pid):
            return "finished"
        if os.getppid() != grader:
            return "grader_gone"
        if time.monotonic() - started > config["seconds"]:
            return "timeout"
        tree = [pid, *descendants(pid)]
        if len(tree) > MAX_PROCESSES:
            return "processes"
        resident = resident_bytes(tree, memory)
        peak[0] = max(peak[0], resident)
        if resident > memory:
            return "memory"
        used, entries = disk_used(config["workdir"], logs)
        if used > disk or entries > MAX_FILES:
            return "disk"
        time.sleep(POLL_SECONDS)


def end_everything(pid, deadline_seconds=20.0):
    """SIGKILL to the submission's group and every descendant of this subreaper, reaping them; returns
    (the submission's wait status or None, how many other processes were left running)."""
    status, others, deadline = None, set(), time.monotonic() + deadline_seconds
    try:
        os.killpg(pid, signal.SIGKILL)  # not reaped yet: its group id cannot belong to another process
    except (ProcessLookupError, PermissionError):
        pass
    while time.monotonic() < deadline:
        for child in descendants(os.getpid()):
            others.add(child)
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            while True:
                reaped, code = os.waitpid(-1, os.WNOHANG)
                if reaped == 0:
                    break
                if reaped == pid:
                    status = code
        except ChildProcessError:  # no child left: as their subreaper, that means no descendant either
            break
        time.sleep(0.01)
    return status, len(others - {pid})


def _stop(signum, frame):
    raise SystemExit(128 + signum)


def _child(site, config):
    """The submission's process (after the fork): its session, files and limits, then the runner."""
    import resource  # POSIX only: imported here, so that the grader can import this module anywhere

    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, config["stdout"]), (2, config["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        for name, limit, value in rlimits(config):
            try:
                resource.setrlimit(limit, (value, value))
            except (ValueError, OSError) as error:  # above a hard limit this process may not raise
                with open(config["results"], "a") as results:  # the runner's file: the grader says why
                    results.write(json.dumps({"event": "limits", "error": {
                        "type": type(error).__name__, "message": f"{name} limit {value}: {error}"}}) + "\n")
                raise
        from harness.runner import main

        main(config["request"], site)
    finally:
        os._exit(70)


def main(site, config_text):
    config = json.loads(config_text)
    grader = config["grader"]  # the grader's process id, as it knew it (it may be gone already)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for number in (signal.SIGTERM, signal.SIGINT):  # how the grader stops it (no traceback on its stderr)
        signal.signal(number, _stop)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(site, config)
    ended, peak = "interrupted", [0]
    try:
        ended = watch(pid, config, grader, peak)
    finally:  # also when the grader stops it or is gone: nothing of the file's outlives it
        status, others = end_everything(pid)
        returncode = os.waitstatus_to_exitcode(status) if status is not None else None
        import resource  # POSIX only, as in _child

        largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux gives KiB
        print(json.dumps({"ended": ended, "returncode": returncode, "left_running": others,
                          "seconds": round(time.monotonic() - started, 2), "peak_memory": peak[0],
                          "peak_rss": largest}), flush=True)


__all__ = ["BOOTSTRAP", "descendants", "disk_used", "end_everything", "main", "may_raise_hard_limits",
           "over_hard_limit", "rlimits"]
