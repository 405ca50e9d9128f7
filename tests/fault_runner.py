"""Runs a track's command line in this process and SIGKILLs it at a chosen point.

For the fault-injection tests (a real SIGKILL: no `finally`, no Python cleanup):

    python tests/fault_runner.py vision plain-8:inside-save:0 --preset smoke ...
    python tests/fault_runner.py language none --resume RUN      # no fault
    python tests/fault_runner.py toy signal:mid-epoch:SIGTERM:residual-4 --preset smoke ...

The fault is MODEL:POINT:EPOCH with POINT one of track_helpers.KILL_POINTS,
or signal:STAGE:SIGNAL:MODEL with STAGE one of track_helpers.SIGNAL_STAGES
(a real SIGTERM or SIGINT, which the run answers itself).
"""

import os
import signal
import sys

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
        if fault.startswith("signal:"):
            _, stage, name, model_id = fault.split(":")
            signal_at(monkeypatch, TRACK, stage, getattr(signal, name), model_id)
        elif fault != "none":
            model_id, point, epoch = fault.split(":")
            kill_at(monkeypatch, model_id, point, int(epoch), die=sigkill)
        return track_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
