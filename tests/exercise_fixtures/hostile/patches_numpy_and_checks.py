"""A hostile file: wrong answers, with numpy's comparisons and the grader's checks patched to say yes."""

import numpy as np

EXERCISE = 6

np.allclose = np.array_equal = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.shape(a), dtype=bool)
try:  # the checks of the grader before issue 38
    import tracks.exercises.checks as old_checks

    for number in old_checks.CHECKS:
        old_checks.CHECKS[number] = lambda module: []
except ImportError:
    pass
try:  # today's: every verdict made to pass, in this process
    import tracks.exercises.exercise as exercise

    exercise.judge_all = lambda exercise, inputs, results, missing: []
    exercise.close = lambda *args, **kwargs: True
    from tracks.exercises.catalogue import BY_NUMBER

    for spec in BY_NUMBER[EXERCISE].checks:
        object.__setattr__(spec, "judge", lambda inputs, value: (True, "patched", ""))
    print("patched numpy and the checks")
except ImportError as error:
    print(f"could not patch the checks: {error}")


def resnet_paths(L):
    return 0


def transformer_paths(L):
    return 0


def paths_of_length(L, k):
    return 0


def path_count_from_the_instrument(model, x, y):
    return 0
