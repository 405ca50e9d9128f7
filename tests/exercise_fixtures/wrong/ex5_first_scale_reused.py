"""A wrong answer to exercise 5: the first J's scale reused for every J."""
# expect: in_bounds: the second as much as the first

import numpy as np

EXERCISE = 5


def residual_bounds(eps, L):
    return (1 - eps) ** L, (1 + eps) ** L


def plain_bound(eps, L):
    return eps**L


def random_residual_product(eps, L, n, seed=0):
    rng = np.random.default_rng(seed)
    product = np.eye(n)
    factor = None
    for _ in range(L):
        J = rng.standard_normal((n, n))
        factor = eps / np.linalg.norm(J, 2) if factor is None else factor  # computed once
        J *= factor
        product = (np.eye(n) + J) @ product
    return product


ANSWERS = {"residual_lower": 0.8**50, "residual_upper": 1.2**50, "plain_upper": 0.2**50}
