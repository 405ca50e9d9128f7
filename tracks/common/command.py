"""`run_command`: how every command that writes a run directory runs, whatever the track.

Everything that can fail on bad input is checked before the run directory is
created; the run's lock is held while the command works and released however
the work ends; bad input, a damaged or unwritable file (a full disk) is one
line (exit 2), Ctrl-C (SIGINT) and SIGTERM are one line saying what was kept
(exit 130 and 143, as a shell reports a process those signals ended), never
a traceback.
"""

import contextlib
import os
import signal
import sys
import threading

from tracks.common.config import ConfigError
from tracks.common.console import fail, warn
from tracks.common.run_directory import describe_os_error


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is (as Ctrl-C raises KeyboardInterrupt), so that a run stops the same way."""


# The signals received and not yet handled by `run_command` (or by the command's own handler).
_PENDING = []
# Seconds after which a signal swallowed by a finaliser is delivered again (`_unraisable`).
REDELIVERY_SECONDS = 0.05
# True while `signals_as_interruptions` holds the handlers (a signal is only delivered again then).
_ACTIVE = []
# True once an interruption was taken (`take_interruption`): the process is ending.
_TAKEN = []


def _exception_of(signum):
    """The exception a signal raises in the main thread: `Terminated` for SIGTERM, KeyboardInterrupt for Ctrl-C."""
    return Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def _interrupt(signum, frame):
    """SIGINT and SIGTERM: remembered, then raised where the main thread is.

    Python may swallow that exception: raised while a garbage collector's
    callback runs (a `WeakKeyDictionary`'s remove, TensorFlow's finalisers),
    it goes to `sys.unraisablehook`, which would print "Exception ignored"
    and a traceback, and the program goes on. `_unraisable` prints nothing
    for it and delivers the signal again a moment later, outside the
    finaliser; until a handler takes it (`take_interruption`) it also stays
    pending, and `raise_if_interrupted` raises it again at safe points.
    """
    _PENDING.append(signum)
    raise _exception_of(signum)


def _deliver_again(signum):
    if _ACTIVE and _PENDING:  # not taken yet, and our handler still in place
        os.kill(os.getpid(), signum)


def _unraisable_hook(previous):
    """A `sys.unraisablehook` that takes our own interruptions silently (see `_interrupt`), `previous` the rest."""

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _PENDING:
            timer = threading.Timer(REDELIVERY_SECONDS, _deliver_again, (_PENDING[-1],))
            timer.daemon = True
            timer.start()
            return
        previous(unraisable)

    return hook


def raise_if_interrupted():
    """Raises the pending interruption again, if one was received and swallowed (see `_interrupt`)."""
    if _PENDING:
        raise _exception_of(_PENDING[-1])


@contextlib.contextmanager
def errors_of_a_signal():
    """An error raised in the block while a signal is pending is raised as that signal's interruption.

    A signal's exception is raised wherever the main thread is, and code
    that it cuts short may fail on its way up with an error of its own:
    TensorFlow, interrupted while it traces a function, raises
    `ValueError("None values not supported.")` or a `SystemError`. That
    error is the signal's doing, not a fault of the run: the user pressed
    Ctrl-C, and reads the one line that says so.
    """
    try:
        yield
    except Exception as error:
        if _PENDING:
            raise _exception_of(_PENDING[-1])() from error
        raise


def take_interruption():
    """Marks the pending interruptions handled; from then on the process is ending (exit 130 or 143)."""
    _PENDING.clear()
    _TAKEN.append(True)


def _quiet(unraisable):
    """The `sys.unraisablehook` once an interruption was taken: an object the signal cut short while it was
    being made (pyparsing's, in matplotlib's import) may raise in its `__del__` as the process ends; that is
    no error of the run's, and the user has already read the one line that says what happened."""


@contextlib.contextmanager
def signals_as_interruptions():
    """SIGINT raises KeyboardInterrupt and SIGTERM `Terminated` in the block (in the main thread), each also
    kept pending until handled, never shown as "Exception ignored" (`_interrupt`); the previous handlers
    come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, _interrupt) for number in (signal.SIGINT, signal.SIGTERM)}
    previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable_hook(sys.unraisablehook)
    _ACTIVE.append(True)
    _TAKEN.clear()
    try:
        yield
    finally:
        _ACTIVE.pop()
        sys.unraisablehook = _quiet if _TAKEN else previous_hook
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def signals_held():
    """SIGINT and SIGTERM ignored in the block (in the main thread; elsewhere nothing changes): for work that
    must finish once started, such as ending a file's processes or writing a gradebook."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def interruption(error):
    """(word, exit code) of an interruption: SIGTERM 143, Ctrl-C 130 (128 + the signal's number)."""
    if isinstance(error, Terminated):
        return "terminated (SIGTERM)", 128 + signal.SIGTERM
    return "interrupted", 128 + signal.SIGINT


def run_command(prog, start, work, *, resumable=True):
    """Runs one command that writes a run directory; returns the exit code.

    Args:
        prog: the command, for the resume hint ("python -m tracks.X").
        start: callable() -> (config, run, payload), checking everything
            before anything is written (`resume.start_or_resume`); `run` is locked.
        work: callable(config, run, payload) -> exit code or None (0), run
            while the run's lock is held (`seeds.train`, `run.diagnose_one_run`).
        resumable: True for training (an interrupted run is kept and
            `--resume` continues it); False for a command whose run is
            complete or nothing (diagnose): an interrupted or failed one is discarded.
    """
    try:
        with errors_of_a_signal():
            config, run, payload = start()
        raise_if_interrupted()
    except KeyboardInterrupt as error:
        take_interruption()
        word, code = interruption(error)
        warn(f"{word} before anything was written")
        return code
    except OSError as error:
        return fail(describe_os_error(error))
    except (ConfigError, ValueError) as error:
        return fail(str(error))
    except MemoryError as error:  # numpy's ArrayMemoryError says how much it wanted
        return fail(f"out of memory before anything was written ({error or 'no details'}); lower the sizes")
    with run:
        try:
            with errors_of_a_signal():
                code = work(config, run, payload)
            raise_if_interrupted()  # a Ctrl-C that Python swallowed on the way does not end in exit 0
            return 0 if code is None else code
        except KeyboardInterrupt as error:
            take_interruption()
            word, code = interruption(error)
            if resumable:
                warn(f"{word}; finished epochs and models are kept: continue with "
                     f"{prog} --resume {run.path}")
            else:
                run.discard()
                warn(f"{word}; nothing was kept")
            return code
        except ConfigError as error:  # a damaged file found during the run
            if not resumable:
                run.discard()
            return fail(str(error))
        except OSError as error:
            if not resumable:
                run.discard()
                return fail(describe_os_error(error, run.path))
            return fail(f"{describe_os_error(error, run.path)}; fix that, then continue with {prog} --resume "
                        f"{run.path}")
        except MemoryError as error:
            if not resumable:
                run.discard()
                return fail(f"out of memory ({error or 'no details'}); lower the sizes")
            return fail(f"out of memory ({error or 'no details'}); finished models are kept in {run.path}, "
                        f"but the sizes are its config's: start a new run with smaller ones")
        except BaseException:
            if not resumable:
                run.discard()
            raise


__all__ = ["Terminated", "errors_of_a_signal", "interruption", "raise_if_interrupted", "run_command",
           "signals_as_interruptions", "signals_held", "take_interruption"]
