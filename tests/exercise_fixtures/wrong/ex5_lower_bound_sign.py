"""A wrong answer to exercise 5: the lower bound as (eps - 1)^L, which is (1 - eps)^L only when L is even."""
# expect: bounds: a stretch is never negative

import numpy as np

EXERCISE = 5


def residual_bounds(eps, L):
    return (eps - 1) ** L, (1 + eps) ** L


def plain_bound(eps, L):
    return eps**L


def random_residual_product(eps, L, n, seed=0):
    rng = np.random.default_rng(seed)
    product = np.eye(n)
    for _ in range(L):
        J = rng.standard_normal((n, n))
        J *= eps / np.linalg.norm(J, 2)  # spectral norm exactly eps
        product = (np.eye(n) + J) @ product
    return product


ANSWERS = {"residual_lower": 0.8**50, "residual_upper": 1.2**50, "plain_upper": 0.2**50}
