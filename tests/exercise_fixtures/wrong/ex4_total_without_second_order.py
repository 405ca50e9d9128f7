"""A wrong answer to exercise 4: the total as I + J1 + J2 (the second-order term left out)."""
# expect: terms: which includes J2 J1

import numpy as np
import tensorflow as tf

EXERCISE = 4


def jacobian(f, x):
    x = tf.convert_to_tensor(np.asarray(x, dtype="float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return tape.jacobian(y, x).numpy()  # rows: outputs, columns: inputs


def two_block_terms(f1, f2, x):
    x = np.asarray(x, dtype="float32")
    n = len(x)
    J1 = jacobian(f1, x)
    y1 = x + np.asarray(f1(tf.convert_to_tensor(x)))
    J2 = jacobian(f2, y1)  # at y1, where the second block reads
    total = np.eye(n, dtype="float32") + J1 + J2
    return {"I": np.eye(n, dtype="float32"), "J1": J1, "J2": J2, "J2J1": J2 @ J1, "total": total}


def identity_term_error(f1, f2, x):
    terms = two_block_terms(f1, f2, x)
    return float(np.linalg.norm(terms["total"] - (terms["I"] + terms["J1"] + terms["J2"]), 2))
