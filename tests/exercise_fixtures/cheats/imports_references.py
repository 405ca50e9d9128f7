"""A cheat on exercise 4: it imports the grader's closed-form Jacobians instead of computing them.

The grader's exercise modules are out of a submission's reach: the import
fails with a permission error, and the file's row says so.
"""
# expect-reason: import error: PermissionError

import numpy as np

from tracks.exercises.ex4_two_block_jacobian import reference

EXERCISE = 4


def _inputs(f1):
    cells = {name: cell.cell_contents for name, cell in zip(f1.__code__.co_freevars, f1.__closure__ or ())}
    return cells


def jacobian(f, x):
    raise NotImplementedError


def two_block_terms(f1, f2, x):
    J1, J2, _ = reference(_inputs(f1))
    n = len(x)
    return {"I": np.eye(n), "J1": J1, "J2": J2, "J2J1": J2 @ J1, "total": (np.eye(n) + J2) @ (np.eye(n) + J1)}


def identity_term_error(f1, f2, x):
    return float(np.linalg.norm(two_block_terms(f1, f2, x)["J2J1"], 2))
