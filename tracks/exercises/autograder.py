"""`python -m tracks autograder --out autograder.zip`: the grader as a Gradescope autograder.

The zip (Gradescope's layout, docs/grading.md "On Gradescope") holds:
- setup.sh: run once when the platform builds its image: a Python >= 3.11,
  a virtual environment in $ROOT/venv and this version's wheel with its
  dependencies;
- run_autograder: run for each submission: grades every .py and .ipynb in
  $ROOT/submission/ with the same isolation as `python -m tracks grade`
  and writes $ROOT/results/results.json (a link is not followed: its
  output names it, ungraded);
- autograder.json: the exercises graded and the points of their checks;
- the wheel of this version (residual_keras-<version>-py3-none-any.whl).

$ROOT is /autograder unless AUTOGRADER_ROOT names another folder (tests
and instructors run it anywhere). results.json has the platform's fields:
`score`, `execution_time`, `output`, `visibility`, `stdout_visibility` and
`tests`, one per check of each exercise, each with `name`, `number`,
`score`, `max_score`, `status`, `output` (the detail, and the hint when it
failed) and `visibility`: `--visibility` (default visible) at the top and in
every test, `--stdout-visibility` (default hidden), Gradescope's values. A
submission's best file counts for each exercise (students.py); an exercise
with no file gets 0 on each check, saying so.
"""

import argparse
import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile

from tracks.exercises.catalogue import BY_NUMBER, checks_by_key

CONFIG = "autograder.json"
# Gradescope's values of `visibility` and `stdout_visibility` (its specification: "Controlling test case
# visibility"): shown at once, never, after the due date, after the grades are published.
VISIBILITY = ("visible", "hidden", "after_due_date", "after_published")

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu):
# a Python >= 3.11, a virtual environment in $ROOT/venv, and the wheel beside this file
# with its dependencies (Keras, TensorFlow, ...: a few minutes).
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$(cd "$(dirname "$0")" && pwd)"
PYTHON=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null \\
      && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    PYTHON="$candidate"
    break
  fi
done
if [ -z "$PYTHON" ]; then  # Ubuntu 22.04's Python is 3.10: deadsnakes' 3.11
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq software-properties-common
  add-apt-repository -y ppa:deadsnakes/ppa
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv
  PYTHON=python3.11
fi
if ! "$PYTHON" -m venv "$ROOT/venv"; then  # Debian's Python keeps venv in a package of its own
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$(basename "$PYTHON")-venv"
  "$PYTHON" -m venv "$ROOT/venv"
fi
"$ROOT/venv/bin/python" -m pip install --quiet --upgrade pip
"$ROOT/venv/bin/python" -m pip install --quiet "$SOURCE"/WHEEL
"$ROOT/venv/bin/python" -m tracks exercises >/dev/null
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grades $ROOT/submission/ into $ROOT/results/results.json.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="$ROOT/venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3  # no setup.sh run here: the Python on PATH, with residual-keras installed
SOURCE="$(cd "$(dirname "$0")" && pwd)"
exec "$PYTHON" -m tracks.exercises.autograder --root "$ROOT" --config "$SOURCE/autograder.json"
"""


def parse_exercises(text):
    """[numbers] of `--exercises 1,3,5`; ValueError in one line for anything else."""
    numbers = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or int(part) not in BY_NUMBER:
            raise ValueError(f"--exercises {text}: {part!r} is no exercise; there are "
                             f"{', '.join(map(str, BY_NUMBER))}")
        if int(part) in numbers:
            raise ValueError(f"--exercises {text}: {part} is given twice")
        numbers.append(int(part))
    return sorted(numbers)


# The wheel ---------------------------------------------------------------------------------------


def project_root():
    """The source checkout this package runs from (an editable install), or None when it is installed."""
    root = pathlib.Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "residual-keras"' in pyproject.read_text():
        return root
    return None


def repository_problem(out):
    """The one line refusing an --out inside the repository (the instructor's copy, solutions and all), or None."""
    root = project_root()
    if root is not None and pathlib.Path(out).resolve().is_relative_to(root.resolve()):
        return f"--out {out} is inside the repository: write it outside the instructor's copy"
    return None


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _repacked_wheel(folder):
    """This version's wheel made again from the installed files its RECORD lists (an installed package)."""
    distribution = importlib.metadata.distribution("residual-keras")
    version = distribution.version
    info = f"residual_keras-{version}.dist-info"
    path = pathlib.Path(folder) / f"residual_keras-{version}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file in distribution.files or []:
            name = str(file)
            if name.startswith("..") or "__pycache__" in name or name.endswith((".pyc", "RECORD", "INSTALLER",
                                                                                 "direct_url.json", "REQUESTED")):
                continue  # scripts are made again from entry_points.txt; the installer's own files are not the wheel's
            data = file.locate().read_bytes()
            wheel.writestr(name, data)
            records.append([name, _record_hash(data), str(len(data))])
        if not any(name == f"{info}/WHEEL" for name, _, _ in records):
            data = (b"Wheel-Version: 1.0\nGenerator: residual_keras autograder\nRoot-Is-Purelib: true\n"
                    b"Tag: py3-none-any\n")
            wheel.writestr(f"{info}/WHEEL", data)
            records.append([f"{info}/WHEEL", _record_hash(data), str(len(data))])
        lines = io.StringIO()
        csv.writer(lines, lineterminator="\n").writerows([*records, [f"{info}/RECORD", "", ""]])
        wheel.writestr(f"{info}/RECORD", lines.getvalue())
    return path


def build_wheel(folder):
    """This version's wheel in `folder`: built from the checkout, or repacked from the installed files."""
    root = project_root()
    if root is None:
        return _repacked_wheel(folder)
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder), str(root)]
    # First with this environment's setuptools (offline, a second); a fresh environment may lack the version
    # pyproject.toml's build-system asks for, and pip then builds in an isolated one it installs it into.
    for isolation in (["--no-build-isolation"], []):
        built = subprocess.run(command + isolation, capture_output=True, text=True, timeout=600)
        if built.returncode == 0:
            return next(pathlib.Path(folder).glob("residual_keras-*.whl"))
    last = (built.stderr.strip().splitlines() or ["no output"])[-1][:200]
    raise RuntimeError(f"pip could not build the wheel of {root}: {last}")


def build(out, exercises, scores, visibility="visible", stdout_visibility="hidden", opened=None):
    """Writes the autograder zip `out` for `exercises` with the points of `scores` (a `students.Scores`); its
    results say `visibility` for the tests and `stdout_visibility` for the output (`VISIBILITY`). `opened`: a
    function called once the zip is open, before the wheel is built (a progress line), or None."""
    for name, value in (("visibility", visibility), ("stdout_visibility", stdout_visibility)):
        if value not in VISIBILITY:
            raise ValueError(f"{name} {value!r}: Gradescope's values are {', '.join(VISIBILITY)}")
    out = pathlib.Path(out)
    config = {"exercises": exercises, "visibility": visibility, "stdout_visibility": stdout_visibility,
              "points": {str(n): {spec.key: scores.of(n, spec.key) for spec in BY_NUMBER[n].checks
                                  if not spec.optional} for n in exercises},
              "limits": {"seconds": 120.0, "memory_gb": 4.0, "disk_mb": 256.0}}
    partial = out.with_name(out.name + ".partial")
    try:  # the zip is opened first: a place it cannot be written is found before the wheel is built
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive, \
                tempfile.TemporaryDirectory(prefix="autograder-") as folder:
            if opened is not None:
                opened()
            wheel = build_wheel(folder)
            for name, text in (("setup.sh", SETUP.replace("WHEEL", wheel.name)), ("run_autograder", RUN)):
                entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
                entry.external_attr = 0o100755 << 16  # executable: Gradescope runs both files as they are
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, text)
            archive.writestr(CONFIG, json.dumps(config, indent=1))
            archive.write(wheel, wheel.name)
        os.replace(partial, out)
    except BaseException:  # a full disk, a wheel that would not build, Ctrl-C: no half-written zip is left
        partial.unlink(missing_ok=True)
        raise
    return out


# Grading one submission --------------------------------------------------------------------------


def _test(number, spec, check, points, why_missing=None, visibility="visible"):
    passed = bool(check and check["passed"])
    if check is None:
        output = why_missing
    else:
        output = check["detail"] or ""
        if not passed and check.get("hint"):
            output += f"\nHint: {check['hint']}"
    return {"name": f"Exercise {number}: {spec.name}", "number": f"{number}.{spec.key}",
            "score": points if passed else 0.0, "max_score": points,
            "status": "passed" if passed else "failed", "output": output.strip(), "visibility": visibility}


def results(reports, config, seed, seconds):
    """The platform's results.json for the reports of one submission's files."""
    from tracks.exercises.students import Scores, by_student

    points = {int(n): checks for n, checks in config["points"].items()}
    scores = Scores(points)
    visibility = config.get("visibility", "visible")  # a zip built before the option: every test visible
    students, unassigned = by_student([{**report, "student": "submission"} for report in reports])
    entries = students.get("submission", {})
    tests, lines = [], [f"Graded with residual-keras on the inputs of seed {seed}, in {seconds:.0f} s."]
    for number in config["exercises"]:
        entry = entries.get(number)
        best = entry.counted(scores) if entry else None
        if entry is None:
            why = f"not handed in: no file with EXERCISE = {number} (start from {BY_NUMBER[number].filename})"
        elif not best["exercise"]:
            why = f"{best['file']}: {best['reason']}"
        else:
            why = None
        if entry is not None:
            lines.append(f"Exercise {number}: {best['file']} counted" + (f" (best of {len(entry.reports)})"
                                                                           if len(entry.reports) > 1 else "")
                         + (f"; {best['reason']}" if best["reason"] else "")
                         + "".join(f"\n  note: {note}" for note in best.get("notes", [])))
        checks = checks_by_key(best) if best else {}
        for spec in BY_NUMBER[number].checks:
            if not spec.optional:
                tests.append(_test(number, spec, checks.get(spec.key), scores.of(number, spec.key),
                                   why or "no result", visibility))
    for report in [*unassigned.get("submission", []),
                   *(r for r in reports if r["exercise"] and r["exercise"] not in config["exercises"])]:
        lines.append(f"{report['file']}: not graded here"
                     + (f" ({report['reason']})" if report["reason"] else f" (exercise {report['exercise']} "
                                                                           f"is not part of this assignment)"))
    return {"score": sum(test["score"] for test in tests), "execution_time": round(seconds, 1),
            "output": "\n".join(lines), "visibility": visibility,
            "stdout_visibility": config.get("stdout_visibility", "hidden"), "tests": tests}


def _link_line(link, submission):
    name = link.relative_to(submission)
    if link.is_dir():
        return f"{name}/ is a link to a folder: the files in it were not graded; hand them in as files.\n"
    return f"{name} is a link: not graded; hand in the file itself.\n"


def run(root, config_path):
    """Grades root/submission/ into root/results/results.json (written whatever happens); 0 when graded."""
    from tracks.exercises.gradebook import class_files, class_links
    from tracks.exercises.grading import grade_files
    from tracks.exercises.sandbox import SubmissionLimits, limits_problem

    root = pathlib.Path(root)
    target = root / "results" / "results.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    started, seed = time.monotonic(), secrets.randbelow(2**31)
    config = {}
    try:
        config = json.loads(pathlib.Path(config_path).read_text())
        submission = root / "submission"
        # A link is not followed: it could point at any file of the grading machine (the grader's own
        # package, another submission); `python -m tracks grade` refuses a class that holds one.
        links, files = (class_links(submission), class_files(submission)) if submission.is_dir() else ([], [])
        limits = SubmissionLimits(**config["limits"])
        problem = limits_problem(limits)  # a container whose hard rlimits are lower: never a zero for the student
        if problem:
            raise RuntimeError(f"this machine cannot give each file its limits: {problem}")
        with tempfile.TemporaryDirectory(prefix="logs-") as logs:
            reports = grade_files(files, seed=seed, limits=limits, out=logs, root=submission, progress=False) \
                if files else []
        for path, report in zip(files, reports):
            report["file"] = str(path.relative_to(submission))
        outcome = results(reports, config, seed, time.monotonic() - started)
        if not files:
            outcome["output"] = (f"No .py or .ipynb file was handed in (looked in {submission}).\n"
                                 + outcome["output"])
        if links:
            outcome["output"] = "".join(_link_line(link, submission) for link in links) + outcome["output"]
        code = 0
    except Exception as error:  # noqa: BLE001  (the platform must get a results.json that says why)
        outcome = {"score": 0.0, "execution_time": round(time.monotonic() - started, 1),
                   "visibility": config.get("visibility", "visible") if isinstance(config, dict) else "visible",
                   "output": f"The autograder failed, not your submission: {type(error).__name__}: {error}. "
                             f"Tell your instructor.", "tests": []}
        traceback.print_exc()
        code = 1
    target.write_text(json.dumps(outcome, indent=1))
    return code


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tracks.exercises.autograder",
                                     description="Grade $ROOT/submission/ into $ROOT/results/results.json "
                                                 "(what run_autograder runs).")
    parser.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    parser.add_argument("--config", required=True, help="the zip's autograder.json")
    args = parser.parse_args(argv)
    return run(args.root, args.config)


__all__ = ["VISIBILITY", "build", "build_wheel", "parse_exercises", "project_root", "repository_problem", "results",
           "run"]


if __name__ == "__main__":
    from tracks.common.environment import choose_tensorflow

    choose_tensorflow()
    sys.exit(main())
