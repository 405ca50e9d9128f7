"""A cheat on exercise 5: it reads the inputs of the run (the request file, or the harness's frames) and asks
the grader's judges which answers pass.

The request is gone before the file is imported, and the judges are out of
its reach: importing them fails with a permission error.
"""
# expect-reason: import error: PermissionError

import inspect
import json
import pathlib

EXERCISE = 5

request = pathlib.Path("request.json")
if request.exists():
    inputs = json.loads(request.read_text())["inputs"]
else:
    inputs = next(frame.frame.f_locals["inputs"] for frame in inspect.stack() if "inputs" in frame.frame.f_locals)

from tracks.exercises import ex5_bounds  # noqa: E402  (the grader's judges and references)

ANSWERS = {"residual_lower": 0.8**50, "residual_upper": 1.2**50, "plain_upper": 0.2**50}


def residual_bounds(eps, L):
    return next((low, high) for low in (0.0,) for high in (0.0,) if ex5_bounds.judge_bounds(inputs, []))


def plain_bound(eps, L):
    return 0.0


def random_residual_product(eps, L, n, seed=0):
    raise NotImplementedError
