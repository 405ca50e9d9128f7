"""Runs a track's command line in this process and SIGKILLs it at a chosen point.

For the fault-injection tests (a real SIGKILL: no `finally`, no Python cleanup):

    python tests/fault_runner.py vision plain-8:inside-save:0 --preset smoke ...
    python tests/fault_runner.py language none --resume RUN      # no fault
    python tests/fault_runner.py toy signal:mid-epoch:SIGTERM:residual-4 --preset smoke ...
    python tests/fault_runner.py toy instruments:studies:SIGINT:0.4 --preset smoke ...

The fault is MODEL:POINT:EPOCH with POINT one of track_helpers.KILL_POINTS,
or signal:STAGE:SIGNAL:MODEL with STAGE one of track_helpers.SIGNAL_STAGES
(a real SIGTERM or SIGINT, which the run answers itself), or
instruments:PHASE:SIGNAL:SECONDS: the signal SECONDS after the instruments'
PHASE began, wherever the run is then (PHASE: `initialisation`, the
instruments on the untrained grid; `studies`, the toy's trained nets taken
apart), from a timer thread, as a terminal or `kill` would send it.
"""

import os
import signal
import sys
import threading

import pytest

from track_helpers import kill_at, signal_at


def sigkill():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(track, fault, argv):
    if track == "vision":
        from tracks.vision.__main__ import main as track_main
        from tracks.vision.track import TRACK
    elif track == "toy":
        from tracks.toy.__main__ import main as track_main
        from tracks.toy.track import TRACK
    else:
        from tracks.language.__main__ import main as track_main
        from tracks.language.track import TRACK
    with pytest.MonkeyPatch.context() as monkeypatch:
        if fault.startswith("instruments:"):
            _, phase, name, seconds = fault.split(":")
            signal_during(monkeypatch, phase, getattr(signal, name), float(seconds))
        elif fault.startswith("signal:"):
            _, stage, name, model_id = fault.split(":")
            signal_at(monkeypatch, TRACK, stage, getattr(signal, name), model_id)
        elif fault != "none":
            model_id, point, epoch = fault.split(":")
            kill_at(monkeypatch, model_id, point, int(epoch), die=sigkill)
        return track_main(argv)


def signal_during(monkeypatch, phase, signum, seconds):
    """Sends `signum` to this process `seconds` after the first call of the instruments' `phase` began."""
    from tracks.common import instruments
    from tracks.toy import experiment

    module, name = {"initialisation": (instruments, "at_initialisation"),
                    "studies": (experiment, "trained_studies")}[phase]
    original, started = getattr(module, name), []

    def timed(*args, **kwargs):
        if not started:
            started.append(threading.Timer(seconds, os.kill, (os.getpid(), signum)))
            started[0].start()
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, timed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
