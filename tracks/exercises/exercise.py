"""What an exercise is: a question, the file a student starts from, and checks in two halves.

Each check is split where the process boundary runs (tracks/exercises/sandbox.py):

- its probe (named by `CheckSpec.probe`, a function of the harness's exN
  module, tracks/exercises/harness/) runs in the submission's own process,
  next to the student's code. It calls the student's code on the inputs and
  weights the grader drew and returns raw values: what the code computed,
  never a verdict, and nothing the grader expects.
- `judge(inputs, value)` runs in the grader's process, which never loads the
  student's file. It computes every expected value itself, from the inputs
  it drew and the weights it set or read back, and returns
  `(passed, detail, hint)`.

So a submission that replaces a probe, patches numpy or Keras, or writes
records of its own changes only the values it sends back; the expected
values are computed where it cannot reach, by code it cannot read
(docs/grading.md).
"""

import dataclasses
import math
from typing import Any, Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Check:
    """One verdict: what was checked, whether it passed, what was measured, and what to try."""

    name: str
    passed: bool
    detail: str = ""
    hint: str = ""
    optional: bool = False  # an extra: shown in its own column, not needed to pass


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    """One check: its probe in the submission's process, `judge` in the grader's.

    Attributes:
        key: a short stable name (a column of the gradebook).
        name: the sentence a student reads.
        probe: the name of the harness function `(module, inputs) -> plain values` whose result it
            judges (child side; several checks may judge one probe's values).
        judge: `(inputs, value) -> (passed, detail, hint)` (parent side).
        hint: what to try when the probe raised (the student's code failed to run).
        optional: an extra beyond what the exercise asks (exercise 3's `residual_steps()` for the
            instruments): graded and shown in a column of its own, not a condition of passing.
    """

    key: str
    name: str
    probe: str
    judge: Callable[[dict, Any], tuple]
    hint: str
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class Exercise:
    """An exercise: its question and skeleton (`skeleton` is the file's text), its inputs and checks."""

    number: int
    title: str
    self_test: str  # which part of the course's self-test it makes runnable
    filename: str  # the file a student starts from (and solutions/ holds)
    skeleton: str
    draw: Callable[[np.random.Generator], dict]  # the inputs of one grading run, from its seed
    checks: tuple

    def inputs(self, seed):
        """The inputs every file of this exercise gets in a run with `seed` (plain values)."""
        return self.draw(np.random.default_rng([int(seed), self.number]))

    @property
    def probes(self):
        """The names of the harness functions its checks judge, each once, in order."""
        return list(dict.fromkeys(spec.probe for spec in self.checks))


# Parent side: reading what came back -------------------------------------------------------------


class WrongForm(ValueError):
    """The value sent back is not of the form the check needs (a failed check, never a grader error)."""


def array(value, shape=None, what="the value"):
    """`value` as a finite-or-not float64 array, of `shape` when given; `WrongForm` otherwise (saying what the
    student's code raised, where the harness sent {"error": ...} for this value)."""
    if isinstance(value, dict) and isinstance(value.get("error"), str):
        raise WrongForm(f"{what}: raised {value['error'][:200]}")
    try:
        result = np.asarray(value, dtype="float64")
    except (TypeError, ValueError, OverflowError) as error:
        raise WrongForm(f"{what} is not an array of numbers ({type(error).__name__})") from None
    if shape is not None and result.shape != tuple(shape):
        raise WrongForm(f"{what} has shape {result.shape}, expected {tuple(shape)}")
    return result


def number(value, what="the value"):
    """A float from a number sent back; `WrongForm` for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WrongForm(f"{what} is {type(value).__name__}, not a number")
    try:
        return float(value)
    except OverflowError:
        return math.inf


def close(got, expected, rtol=1e-5, scale=None):
    """Whether `got` is `expected` (float arrays of one shape) to `rtol` of the size of the values: every
    |got - expected| <= rtol * scale, where `scale` is the largest |expected| unless the caller gives the size of
    the computation. Relative at any magnitude: no absolute floor, which would call 1e-35 and 1e-30 equal (a
    float32 result is off by a few units of its own size, whatever that size). NaN is never close."""
    if got.shape != expected.shape:
        return False
    if scale is None:
        scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    return bool(np.all(np.abs(got - expected) <= rtol * scale))


def largest_difference(got, expected):
    return float(np.max(np.abs(got - expected))) if got.shape == expected.shape and got.size else math.nan


def find(weights, shape, what):
    """The value of the first weight of `shape` among the [{name, shape, value}] sent back, or `WrongForm`."""
    for weight in weights:
        if isinstance(weight, dict) and list(weight.get("shape", ())) == list(shape):
            return array(weight.get("value"), shape, what)
    raise WrongForm(f"no {what} of shape {tuple(shape)} among the weights")


def mlp(x, kernel_in, bias_in, kernel_out, bias_out):
    """Dense(hidden, relu) then Dense(width): f(x) = relu(x W1 + b1) W2 + b2, in float64."""
    return np.maximum(x @ kernel_in + bias_in, 0.0) @ kernel_out + bias_out


def judge_all(exercise, inputs, results, missing):
    """[Check] for every check of `exercise`, in order, from the probe results sent back.

    `results[probe]` is {"value": ...} or {"error": {...}}; a check without a
    result failed with `missing` (why the submission stopped early).
    """
    checks = []
    for spec in exercise.checks:
        result = results.get(spec.probe)
        if not isinstance(result, dict) or not ("value" in result or "error" in result):
            checks.append(Check(spec.name, False, missing, spec.hint, spec.optional))
        elif "error" in result:
            checks.append(Check(spec.name, False, describe_error(result["error"]), spec.hint, spec.optional))
        else:
            try:
                passed, detail, hint = spec.judge(inputs, result["value"])
            except WrongForm as error:
                passed, detail, hint = False, str(error), spec.hint
            except Exception as error:  # noqa: BLE001  (the values came from the submission's process)
                passed, detail, hint = False, f"the values sent back have the wrong form ({type(error).__name__})", \
                    spec.hint
            checks.append(Check(spec.name, bool(passed), str(detail), "" if passed else str(hint), spec.optional))
    return checks


def required(checks):
    """The checks a file must pass (its optional extras left out); checks as `Check`s or as their dicts."""
    return [check for check in checks if not (check.get("optional") if isinstance(check, dict) else check.optional)]


def describe_error(error):
    """The detail of a check whose probe raised: what was raised and where in the student's file."""
    if not isinstance(error, dict):
        return "raised an error"
    kind, message = str(error.get("type", "Exception"))[:80], str(error.get("message", ""))[:200]
    if kind == "NotImplementedError":
        return "not written yet (NotImplementedError)"
    line = error.get("line")  # an int, or "cell 3, line 2" in a notebook
    where = (f" (line {int(line)} of your file)" if isinstance(line, int)
             else f" ({line[:40]} of your notebook)" if isinstance(line, str) else "")
    return f"raised {kind}{': ' + message if message else ''}{where}"


__all__ = ["Check", "CheckSpec", "Exercise", "WrongForm", "array", "close", "describe_error", "find", "judge_all",
           "largest_difference", "mlp", "number", "required"]
