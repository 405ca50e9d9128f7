"""A wrong answer to exercise 5: one random J reused for every layer."""
# expect: independent: one J reused

import numpy as np

EXERCISE = 5


def residual_bounds(eps, L):
    return (1 - eps) ** L, (1 + eps) ** L


def plain_bound(eps, L):
    return eps**L


def random_residual_product(eps, L, n, seed=0):
    rng = np.random.default_rng(seed)
    product = np.eye(n)
    J = rng.standard_normal((n, n))
    J *= eps / np.linalg.norm(J, 2)
    for _ in range(L):  # the same J in every layer
        product = (np.eye(n) + J) @ product
    return product


ANSWERS = {"residual_lower": 0.8**50, "residual_upper": 1.2**50, "plain_upper": 0.2**50}
