"""A wrong answer to exercise 4: forward differences with h = 1e-4."""
# expect: autodiff: finite differences

import numpy as np
import tensorflow as tf

EXERCISE = 4


def jacobian(f, x, h=1e-4):
    x = np.asarray(x, dtype="float32")
    base = np.asarray(f(tf.constant(x)), dtype="float64")
    columns = []
    for j in range(len(x)):
        step = np.zeros_like(x)
        step[j] = h
        columns.append((np.asarray(f(tf.constant(x + step)), dtype="float64") - base) / h)
    return np.stack(columns, axis=1)  # forward differences


def two_block_terms(f1, f2, x):
    x = np.asarray(x, dtype="float32")
    n = len(x)
    J1 = jacobian(f1, x)
    y1 = x + np.asarray(f1(tf.convert_to_tensor(x)))
    J2 = jacobian(f2, y1)  # at y1, where the second block reads
    total = jacobian(lambda z: (lambda y: y + f2(y))(z + f1(z)), x)
    return {"I": np.eye(n, dtype="float32"), "J1": J1, "J2": J2, "J2J1": J2 @ J1, "total": total}


def identity_term_error(f1, f2, x):
    terms = two_block_terms(f1, f2, x)
    return float(np.linalg.norm(terms["total"] - (terms["I"] + terms["J1"] + terms["J2"]), 2))
