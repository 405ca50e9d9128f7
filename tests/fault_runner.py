"""Runs a track's command line in this process and SIGKILLs it at a chosen point.

For the fault-injection tests (a real SIGKILL: no `finally`, no Python cleanup):

    python tests/fault_runner.py vision plain-8:inside-save:0 --preset smoke ...
    python tests/fault_runner.py language none --resume RUN      # no fault

The fault is MODEL:POINT:EPOCH with POINT one of track_helpers.KILL_POINTS.
"""

import os
import signal
import sys

import pytest

from track_helpers import kill_at


def sigkill():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(track, fault, argv):
    if track == "vision":
        from tracks.vision.__main__ import main as track_main
    else:
        from tracks.language.__main__ import main as track_main
    with pytest.MonkeyPatch.context() as monkeypatch:
        if fault != "none":
            model_id, point, epoch = fault.split(":")
            kill_at(monkeypatch, model_id, point, int(epoch), die=sigkill)
        return track_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
