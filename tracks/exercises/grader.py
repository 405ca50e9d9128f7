"""`python -m tracks exercises` and `python -m tracks check FILE...`: start an exercise, grade a solution.

    python -m tracks exercises                   # the list
    python -m tracks exercises start 1 mywork/   # copies exercise 1's file into mywork/
    python -m tracks check mywork/ex1_residual_layer.py
    python -m tracks check submissions/*.py --json > grades.json   # a whole class

A solution file says which exercise it is (`EXERCISE = N`, as the skeleton
does). Each check prints PASS or FAIL, and a failed one a hint. The exit
code is 0 when every check of every file passed, 1 when one failed, 2 for
bad input (no such file, not an exercise, an unknown exercise number).
"""

import argparse
import importlib.util
import json
import pathlib
import shutil
import sys
import time
import uuid

from tracks.exercises.catalogue import BY_NUMBER, EXERCISES


def _fail(message):
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


def list_exercises():
    print("The course's self-test as exercises. Start one with: python -m tracks exercises start N DIR\n")
    for exercise in EXERCISES:
        print(f"  {exercise.number}. {exercise.title}")
        print(f"     self-test {exercise.self_test}; file {exercise.skeleton}")
    print("\nThen write the functions in the copied file and grade it: python -m tracks check DIR/FILE")
    return 0


def start(number, folder):
    exercise = BY_NUMBER.get(number)
    if exercise is None:
        return _fail(f"no exercise {number}; there are {', '.join(str(e.number) for e in EXERCISES)}")
    folder = pathlib.Path(folder)
    target = folder / exercise.skeleton
    if target.exists():
        return _fail(f"{target} exists already: choose another folder, or delete it to start again")
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(exercise.path, target)
    print(f"exercise {exercise.number}: {exercise.title}")
    print(f"wrote {target}: read its question and hints, fill in the functions, then")
    print(f"  python -m tracks check {target}")
    return 0


def load(path):
    """The solution file as a module (a fresh name each time), or raise the error it raised."""
    spec = importlib.util.spec_from_file_location(f"exercise_solution_{uuid.uuid4().hex}",
                                                  pathlib.Path(path).resolve())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grade(path):
    """{file, exercise, title, passed, checks: [...], seconds} for one solution file."""
    from tracks.exercises.checks import CHECKS, SOLUTION_FILE, Check

    start_time = time.perf_counter()
    SOLUTION_FILE["path"] = str(pathlib.Path(path).resolve())
    report = {"file": str(path), "exercise": None, "title": None, "passed": False, "checks": []}
    try:
        module = load(path)
    except Exception as error:  # noqa: BLE001  (the file may raise anything on import)
        checks = [Check("the file imports", False, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                        if str(error) else type(error).__name__,
                        "run it with python FILE to see the error: a syntax error, or code outside the functions")]
    else:
        number = getattr(module, "EXERCISE", None)
        if number not in CHECKS:
            checks = [Check("the file says which exercise it is", False, f"EXERCISE = {number!r}",
                            "keep the skeleton's line EXERCISE = N (python -m tracks exercises lists them)")]
        else:
            report["exercise"], report["title"] = number, BY_NUMBER[number].title
            import keras

            keras.utils.set_random_seed(0)
            checks = CHECKS[number](module)
    report["checks"] = [{"name": c.name, "passed": c.passed, "detail": c.detail, "hint": c.hint} for c in checks]
    report["passed"] = all(c.passed for c in checks)
    report["seconds"] = round(time.perf_counter() - start_time, 1)
    return report


def print_report(report):
    heading = (f"exercise {report['exercise']} ({report['title']})" if report["exercise"] else "not graded")
    print(f"{report['file']}: {heading}")
    for check in report["checks"]:
        print(f"  {'PASS' if check['passed'] else 'FAIL'}  {check['name']}"
              + (f": {check['detail']}" if check["detail"] else ""))
        if not check["passed"] and check["hint"]:
            print(f"        hint: {check['hint']}")
    passed = sum(check["passed"] for check in report["checks"])
    print(f"  {passed} of {len(report['checks'])} checks passed ({report['seconds']} s)\n")


def check(files, as_json=False):
    paths = [pathlib.Path(name) for name in files]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        return _fail(f"no such file: {', '.join(missing)}")
    reports = []
    for path in paths:
        report = grade(path)
        reports.append(report)
        if not as_json:
            print_report(report)
    if as_json:
        print(json.dumps(reports, indent=1))
    return 0 if all(report["passed"] for report in reports) else 1


def main(argv):
    """`exercises [start N DIR]` or `check FILE... [--json]` (argv without the command's name)."""
    command, rest = argv[0], argv[1:]
    if command == "exercises":
        parser = argparse.ArgumentParser(prog="python -m tracks exercises",
                                         description="List the exercises, or copy one's file to start it.")
        parser.add_argument("action", nargs="?", choices=["start"])
        parser.add_argument("number", nargs="?", type=int)
        parser.add_argument("folder", nargs="?")
        args = parser.parse_args(rest)
        if args.action is None:
            return list_exercises()
        if args.number is None or args.folder is None:
            return _fail("start needs the exercise's number and a folder: python -m tracks exercises start 1 mywork")
        return start(args.number, args.folder)
    parser = argparse.ArgumentParser(prog="python -m tracks check",
                                     description="Grade exercise solutions with the package's instruments.")
    parser.add_argument("files", nargs="+", help="solution files (EXERCISE = N inside)")
    parser.add_argument("--json", action="store_true", help="one JSON report for every file, on stdout")
    args = parser.parse_args(rest)
    return check(args.files, as_json=args.json)


__all__ = ["check", "grade", "list_exercises", "main", "start"]
