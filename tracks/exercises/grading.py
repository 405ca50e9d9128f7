"""A file's report: which exercise it is, its run in the sandbox, and the verdicts on what came back.

`grade_file` never raises for anything a submission does: a syntax error, a
missing `EXERCISE = N`, an import error, `sys.exit`, `os._exit`, a crash, a
timeout or a memory kill each give a report whose checks failed and whose
`reason` says why. The inputs of every check come from the run's seed
(`Exercise.inputs(seed)`), so a grade can be reproduced with the same seed.
"""

import ast
import concurrent.futures
import dataclasses
import pathlib
import re
import signal
import sys
import tempfile
import threading
import time

from tracks.common.command import signals_held
from tracks.exercises.catalogue import BY_NUMBER
from tracks.exercises.exercise import Check, judge_all, required
from tracks.exercises.harness.supervisor import MAX_FILES, MAX_PROCESSES
from tracks.exercises.sandbox import SubmissionLimits, child_site, run_submission
from tracks.exercises.submissions import Submission, printable, read_submission


def exercise_number(path):
    """(number, None) for a submission with `EXERCISE = N` at its top level, else (None, why not), without
    running it. `path`: a `.py` file or a notebook (any code cell may hold the line), or its `Submission`."""
    submission = path if isinstance(path, Submission) else read_submission(path)
    if submission.problem:
        return None, Check("the file can be graded", False, submission.problem,
                           "hand in the .py file or the notebook (.ipynb) you worked in, saved from Jupyter")
    try:
        tree = ast.parse(submission.source, filename="submission")
    except SyntaxError as error:
        where = submission.where(error.lineno)
        hint = ("run the notebook's cells to see the error" if submission.is_notebook
                else "run it with python FILE to see the error")
        return None, Check("the file imports", False, f"SyntaxError: {where}: {error.msg}", hint)
    except (ValueError, UnicodeError, RecursionError, MemoryError) as error:  # nested too deep for the parser
        return None, Check("the file imports", False, f"{type(error).__name__}: {str(error)[:200]}", "")
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXERCISE" for t in node.targets)
                and isinstance(node.value, ast.Constant)):
            if type(node.value.value) is int and node.value.value in BY_NUMBER:  # not 1.0, True or 1+0j
                return node.value.value, None
            return None, Check("the file says which exercise it is", False, f"EXERCISE = {node.value.value!r}",
                               f"there are exercises {', '.join(map(str, BY_NUMBER))}: keep the skeleton's line")
    return None, Check("the file says which exercise it is", False, "no line EXERCISE = N",
                       "keep the skeleton's line EXERCISE = N (python -m tracks exercises lists them)")


def claimed_exercise(submission):
    """The exercise a file that cannot be graded says it is, read as text (`EXERCISE = 3` at the start of a
    line), or None: a syntax error elsewhere still tells whose grade the file's 0 is."""
    found = re.search(rb"^EXERCISE\s*=\s*(\d+)\s*(#.*)?$", submission.source or b"", re.MULTILINE)
    number = int(found.group(1)) if found else None
    return number if number in BY_NUMBER else None


def _in_cells(run, submission):
    """The lines of the errors `run` reported, as the notebook's cells and lines ("cell 3, line 2")."""
    if not submission.is_notebook:
        return
    for record in [*run.results.values(), *run.events]:
        error = record.get("error") if isinstance(record, dict) else None
        if isinstance(error, dict) and isinstance(error.get("line"), int):
            error["line"] = submission.where(error["line"])


def _signal_name(returncode):
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def reason_for(run, limits, specs):
    """Why the file did not finish normally, in words, or "" when it did (from how its process ended)."""
    events = {event["event"]: event for event in run.events}
    total = len(specs)
    done = sum(1 for spec in specs if "value" in run.results.get(spec.probe, {}))
    if run.ended in ("interrupted", "grader_gone"):
        return "interrupted: the grading was stopped (its processes were killed)"
    if "limits" in events:  # the supervisor's, before the file's process imported anything
        message = str((events["limits"].get("error") or {}).get("message"))[:200]
        return (f"not run: the sandbox could not set the file's limits ({message}); lower the limit, or grade where "
                f"the hard limits (ulimit -H) allow it")
    if run.ended == "timeout":
        return f"timeout: still running after {limits.seconds:g} s (its processes were killed)"
    if run.ended == "memory" or "memory" in events:
        return f"memory: over the {limits.memory_gb:g} GiB limit"
    if run.ended == "disk":
        return (f"disk: wrote more than {limits.disk_mb:g} MiB (files and output) or {MAX_FILES} files "
                f"(its process tree was killed, its folder removed)")
    if run.ended == "processes":
        return f"processes: started more than {MAX_PROCESSES} (a fork bomb; its process tree was killed)"
    if "import_error" in events:
        error = events["import_error"].get("error") or {}
        line = error.get("line")
        line = f" (line {line})" if isinstance(line, int) else f" ({line})" if isinstance(line, str) else ""
        kind = str(error.get("type"))[:60]
        why = (" (a submission may import the standard library, numpy, keras, residual_keras and other installed "
               "packages; the grader's own files are out of its reach)" if kind == "PermissionError" else "")
        return f"import error: {kind}: {str(error.get('message'))[:200]}{line}{why}"
    if "exit" in events:
        message = str((events["exit"].get("error") or {}).get("message", "sys.exit"))[:80]
        return f"exit at import: the file called {message}"
    if run.ended == "exited":
        if run.returncode < 0:
            name = _signal_name(run.returncode)
            why = "its output passed the size limit" if name == "SIGXFSZ" else "a crash or a kill"
            return f"crashed: killed by {name} ({why}) after {done} of {total} checks"
        return (f"ended early: the process exited with code {run.returncode} (os._exit, or a crash in native "
                f"code) after {done} of {total} checks")
    return ""


def grade_file(path, *, seed, limits=SubmissionLimits(), log_dir, site, confined=True, stop=None):
    """{file, exercise, title, passed, checks, reason, seconds, stdout, stderr, confinement, left_running,
    peak_memory, peak_rss, notes}.

    `path`: a `.py` file or a notebook (its code cells, `submissions.py`); `notes`: what was dropped to make
    a notebook Python (its magics), one line each. A file that cannot be graded also has `claimed`: the
    exercise its text says it is (`claimed_exercise`), or None.

    `confinement`: what the file's process gave up before the file was imported ({confined: [...],
    abi, why}; runner.py, landlock.py), or None when it did not say (it was not graded, or ended first).
    `confined=False` runs it as a plain process (sandbox.run_unconfined); `stop`: a `threading.Event` that
    ends its run early (the report's reason then says "interrupted").
    """
    path = pathlib.Path(path)
    started = time.monotonic()
    log_dir = pathlib.Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    report = {"file": printable(str(path)), "exercise": None, "title": None, "passed": False, "checks": [],
              "reason": "", "seconds": 0.0, "stdout": str(log_dir / "stdout.txt"),
              "stderr": str(log_dir / "stderr.txt"), "confinement": None, "left_running": 0, "peak_memory": 0,
              "peak_rss": 0, "notes": []}
    submission = read_submission(path)
    report["notes"] = list(submission.notes)
    number, problem = exercise_number(submission)
    if number is None:
        for name in ("stdout", "stderr"):
            pathlib.Path(report[name]).write_text("")
        report["checks"] = [dataclasses.asdict(problem)]
        report["reason"] = f"not graded: {problem.detail}"
        report["claimed"] = claimed_exercise(submission)
        return report
    exercise = BY_NUMBER[number]
    inputs = exercise.inputs(seed)
    with tempfile.TemporaryDirectory(prefix="submission-", ignore_cleanup_errors=True) as workdir:
        run = run_submission(submission.source, number, exercise.probes, inputs, limits=limits, workdir=workdir,
                             site=site, stdout=report["stdout"], stderr=report["stderr"],
                             name=path.stem + ".py", confined=confined, stop=stop)
    _in_cells(run, submission)
    confinement = next((event for event in run.events if event["event"] == "confinement"), None)
    if confinement is not None:
        report["confinement"] = {key: confinement.get(key) for key in ("confined", "abi", "why")}
    reason = reason_for(run, limits, exercise.checks)
    checks = judge_all(exercise, inputs, run.results, missing=f"no result: {reason or 'the process stopped'}")
    failed = [check for check in required(checks) if not check.passed]  # an optional extra is not needed
    if not reason and failed:
        reason = f"{len(failed)} of {len(required(checks))} checks failed, first: {failed[0].name}"
    # processes it left behind (killed after it), and its memory: the tree's anonymous and shared memory at the
    # largest poll, and the largest process's peak resident set (bytes; 0 where the file ran unconfined)
    report.update(left_running=run.left_running, peak_memory=run.peak_memory, peak_rss=run.peak_rss)
    report.update(exercise=number, title=exercise.title, passed=not failed and not reason, reason=reason,
                  checks=[dataclasses.asdict(check) for check in checks],
                  seconds=round(time.monotonic() - started, 1))
    return report


def student_of(path, folder):
    """The first folder under `folder` when the file is in one (folder/<student>/...), else the file's stem."""
    relative = pathlib.Path(path).relative_to(folder)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def log_folders(paths, root=None):
    """Each file's folder for its stdout.txt and stderr.txt, under a gradebook's logs/, in the order given: its
    path under `root` without its suffix (ana/ex3.py: ana/ex3), or with it where another file took that name
    (ana/ex3.py and ana/ex3.ipynb: ana/ex3 and ana/ex3.ipynb), so that no file's logs overwrite another's.
    Without a root, files of the same name are told apart by their place in `paths` (001-ex3, 002-ex3)."""
    if root is None:
        return [pathlib.Path(f"{index + 1:03d}-{pathlib.Path(path).name}").with_suffix("")
                for index, path in enumerate(paths)]
    taken, folders = set(), []
    for index, path in enumerate(paths):
        relative = pathlib.Path(path).relative_to(root)
        candidate = next((name for name in (relative.with_suffix(""), relative) if name not in taken), None)
        number = index + 1
        while candidate is None or candidate in taken:
            candidate, number = relative.with_name(f"{relative.name}-{number}"), number + 1
        taken.add(candidate)
        folders.append(candidate)
    return folders


class GradingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during `grade_files`, raised once every file's processes have ended.

    `reports`: the files graded to the end, by their index in the files given; `cause`: the interruption
    (KeyboardInterrupt, or tracks.common.command.Terminated for SIGTERM).
    """

    def __init__(self, reports, cause):
        super().__init__("interrupted")
        self.reports, self.cause = reports, cause


def grade_files(paths, *, seed, limits, out, jobs=1, root=None, progress=None, confined=True):
    """Reports for every file, in the order given, graded `jobs` at a time; progress lines on `progress`.

    Each file's stdout and stderr are kept in out/logs/<file's path under root>/ (`log_folders`). `progress`: a
    stream (default: sys.stderr), or False for none. `confined=False`: each file as a plain process
    (sandbox.run_unconfined). An interruption (KeyboardInterrupt in this thread) stops the files
    being graded, starts no other, waits until every file's processes have ended, and raises
    `GradingInterrupted` with the reports finished before it.
    """
    out = pathlib.Path(out).absolute()  # the logs' paths go to supervisors that run in folders of their own
    started, lock, finished, stop = time.monotonic(), threading.Lock(), [0], threading.Event()
    logs = log_folders(paths, root)
    with tempfile.TemporaryDirectory(prefix="grading-") as scratch:
        site = child_site(scratch)

        def one(numbered):
            index, path = numbered
            if stop.is_set():
                return None
            relative = (pathlib.Path(path).relative_to(root) if root
                        else pathlib.Path(f"{index + 1:03d}-{pathlib.Path(path).name}"))
            report = grade_file(path, seed=seed, limits=limits, log_dir=out / "logs" / logs[index],
                                site=site, confined=confined, stop=stop)
            if stop.is_set():  # a file cut short is not graded: its report would be a wrong 0
                return None
            report["stdout"] = str(pathlib.Path(report["stdout"]).relative_to(out))
            report["stderr"] = str(pathlib.Path(report["stderr"]).relative_to(out))
            with lock:
                finished[0] += 1
                if progress is False:
                    return report
                checks = required(report["checks"])
                passed = sum(check["passed"] for check in checks)
                print(f"graded {finished[0]} of {len(paths)}: {printable(str(relative))} {passed}/{len(checks)}"
                      f"{' (' + report['reason'] + ')' if report['reason'] else ''}, "
                      f"{time.monotonic() - started:.0f} s elapsed", file=progress or sys.stderr, flush=True)
            return report

        pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
        futures = [pool.submit(one, numbered) for numbered in enumerate(paths)]
        try:
            pending = set(futures)
            while pending:  # a timeout, so that a signal is taken between waits, whatever the platform
                _, pending = concurrent.futures.wait(pending, timeout=0.5)
        except KeyboardInterrupt as interruption:
            with signals_held():  # a second Ctrl-C must not leave a file's processes running
                stop.set()
                pool.shutdown(wait=True, cancel_futures=True)
                done = {index: future.result() for index, future in enumerate(futures)
                        if not future.cancelled() and future.exception() is None and future.result() is not None}
            raise GradingInterrupted(done, interruption) from None
        pool.shutdown()
        return [future.result() for future in futures]


__all__ = ["GradingInterrupted", "claimed_exercise", "exercise_number", "grade_file", "grade_files", "log_folders",
           "reason_for", "student_of"]
