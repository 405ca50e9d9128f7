"""Exercise 5: bounds on the Jacobian of L blocks.

If every branch has ||J_f|| <= eps < 1, each residual factor I + J stretches
a vector by at least 1 - eps and at most 1 + eps, so

    (1 - eps)^L <= ||(I + J_L) ... (I + J_1) v|| / ||v|| <= (1 + eps)^L,

while a plain stack J_L ... J_1 has norm at most eps^L. For eps = 0.2 and
L = 50 that is a factor 4^50 ~ 1.3e30 between them.

Write:

- `residual_bounds(eps, L)`: (lower, upper) for the residual stack's
  stretch of any vector, as above;
- `plain_bound(eps, L)`: the upper bound of the plain stack's norm;
- `random_residual_product(eps, L, n, seed)`: the (n, n) product
  (I + J_L) ... (I + J_1) of L random matrices J_l, each scaled to spectral
  norm exactly eps (numpy; np.linalg.norm(J, 2) is the spectral norm);
- `ANSWERS`: a dict with the numbers for eps = 0.2, L = 50:
  "residual_lower", "residual_upper", "plain_upper".

Check your work:  python -m tracks check THIS_FILE

Hints:
- the bounds hold for every vector, so the product's smallest and largest
  singular values lie between them (np.linalg.svd(..., compute_uv=False));
- a random matrix divided by its spectral norm has spectral norm 1.
"""

import numpy as np

EXERCISE = 5


def residual_bounds(eps, L):
    raise NotImplementedError


def plain_bound(eps, L):
    raise NotImplementedError


def random_residual_product(eps, L, n, seed=0):
    raise NotImplementedError


ANSWERS = {"residual_lower": None, "residual_upper": None, "plain_upper": None}
