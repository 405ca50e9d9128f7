"""The student-model matrix: every instrument on every student-style model, with its time.

    KERAS_BACKEND=jax python scripts/student_matrix.py

prints a Markdown table, one row per model of tests/student_models.py and one
column per instrument of tests/library/test_student_models.py. A cell reads
"ok" (finite numbers, the model unchanged), "refused" (one clear error, the
one the test expects) or what went wrong, with the seconds it took on a
freshly built model. The pass/fail judgement is the test's own (`_one`);
this script only adds the clock, for a closing note or a review.
"""

import pathlib
import sys
import time

TESTS = pathlib.Path(__file__).resolve().parent.parent / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "library")]

import keras  # noqa: E402
from student_models import STUDENT_MODELS  # noqa: E402
from test_student_models import INSTRUMENTS, REFUSED, _one  # noqa: E402


def main():
    print(f"backend: {keras.backend.backend()}\n")
    print("| model | " + " | ".join(INSTRUMENTS) + " |")
    print("| --- |" + " --- |" * len(INSTRUMENTS))
    total = time.perf_counter()
    for name in STUDENT_MODELS:
        cells = []
        for instrument in INSTRUMENTS:
            start = time.perf_counter()
            problem = _one(name, instrument)
            seconds = time.perf_counter() - start
            verdict = problem or ("refused" if (name, instrument) in REFUSED else "ok")
            cells.append(f"{verdict} {seconds:.1f} s")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nall cells: {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
