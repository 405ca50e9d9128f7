"""A cheat on exercise 6: it finds the grader's exercise module on disk and runs its text for the references.

Landlock's read set leaves out the grader's `tracks` package wherever it is
installed: opening the file fails with a permission error.
"""
# expect-reason: import error: PermissionError

import importlib.util
import pathlib
import sys

EXERCISE = 6

spec = importlib.util.find_spec("tracks")
folders = [pathlib.Path(spec.origin).parent] if spec and spec.origin else []
folders += [pathlib.Path(entry) / "tracks" for entry in sys.path]
source = next(folder / "exercises" / "ex6_paths.py" for folder in folders if (folder / "exercises").is_dir())
grader = {}
exec(source.read_text(), grader)


def resnet_paths(L):
    return 2**L


def transformer_paths(L):
    return 4**L


def paths_of_length(L, k):
    return grader["math"].comb(L, k)


def path_count_from_the_instrument(model, x, y):
    return 2 ** (len(model.layers) // 3)
