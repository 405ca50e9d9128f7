"""A hostile file: 6 GiB allocated, and touched, at import."""

import numpy as np

EXERCISE = 5
BIG = np.ones(6 * 2**30, dtype=np.uint8)
