"""A hostile file: wrong answers, with numpy's comparisons and the grader's checks patched to say yes.

The grader's checks are out of a confined file's reach (a PermissionError);
where they are not (no Landlock), the patches live and die in the file's own
process, where no verdict is made.
"""

import numpy as np

EXERCISE = 5

np.allclose = np.array_equal = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.shape(a), dtype=bool)
try:  # the checks of the grader before issue 38
    import tracks.exercises.checks as old_checks

    for number in old_checks.CHECKS:
        old_checks.CHECKS[number] = lambda module: []
except (ImportError, OSError):
    pass
try:  # today's: every verdict made to pass, in this process
    import tracks.exercises.exercise as exercise

    exercise.judge_all = lambda exercise, inputs, results, missing: []
    exercise.close = lambda *args, **kwargs: True
    from tracks.exercises.catalogue import BY_NUMBER

    for spec in BY_NUMBER[EXERCISE].checks:
        object.__setattr__(spec, "judge", lambda inputs, value: (True, "patched", ""))
    print("patched numpy and the checks")
except (ImportError, OSError) as error:
    print(f"could not patch the checks: {error}")


def residual_bounds(eps, L):
    return 0.8**50, 1.2**50


def plain_bound(eps, L):
    return 0.2**50


def random_residual_product(eps, L, n, seed=0):
    return np.eye(n)


ANSWERS = {"residual_lower": 0.0, "residual_upper": 0.0, "plain_upper": 0.0}
