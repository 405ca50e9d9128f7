"""Runs many command lines in this one fresh interpreter, and says after each whether TensorFlow was imported.

For test_bad_input.py: the cases come as JSON on stdin, a list of
{"module": "tracks.vision.__main__", "argv": [...], "env": {...}}; one JSON
line per case goes to stdout: the exit code, what the command wrote to
stderr and stdout, and whether tensorflow or keras were in sys.modules
after it (once one is imported it stays, so the first case that imports one
is the one to blame). Not a test module: it is started with `python`, so
tests/conftest.py (which imports Keras) does not run here.
"""

import contextlib
import importlib
import io
import json
import os
import sys
import time


def run_case(case):
    main = importlib.import_module(case["module"]).main
    saved = dict(os.environ)
    os.environ.update(case.get("env", {}))
    for name in case.get("unset", []):
        os.environ.pop(name, None)
    err, out = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main(case["argv"])
            except SystemExit as exit_:
                code = exit_.code
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {"code": code, "stderr": err.getvalue(), "stdout": out.getvalue(),
            "seconds": time.perf_counter() - start,
            "imported": [name for name in ("tensorflow", "keras") if name in sys.modules]}


if __name__ == "__main__":
    for case in json.load(sys.stdin):
        print(json.dumps(run_case(case)), flush=True)
