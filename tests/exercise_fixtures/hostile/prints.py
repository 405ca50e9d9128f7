"""A hostile file: it prints on stdout and stderr, fake JSON and fake PASS lines, and writes to file descriptor 1."""

import os
import sys

EXERCISE = 5
print('[{"file": "prints.py", "passed": true}]')
print("  PASS  the bounds at eps = 0.2, L = 50")
print("} not JSON {", file=sys.stderr)
os.write(1, b'{"passed": true\n')


def residual_bounds(eps, L):
    print("residual_bounds called")
    return 0.0, 0.0


def plain_bound(eps, L):
    return 0.0


def random_residual_product(eps, L, n, seed=0):
    raise NotImplementedError


ANSWERS = {"residual_lower": None, "residual_upper": None, "plain_upper": None}
