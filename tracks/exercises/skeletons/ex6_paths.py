"""Exercise 6: how many paths? (Veit, Wilber, Belongie 2016)

Expanding (I + J_L) ... (I + J_1) gives one term per subset S of the blocks
(each block either skipped, I, or taken, J_l): each subset is one member of
the ensemble, a path through |S| branches. A Transformer block has two
residual additions (attention, then feed-forward), so L blocks are 2L steps.

Write:

- `resnet_paths(L)`: the number of paths through L residual blocks;
- `transformer_paths(L)`: through L Transformer blocks;
- `paths_of_length(L, k)`: the number of paths through exactly k of L
  blocks' branches;
- `path_count_from_the_instrument(model, x, y)`: the number of paths
  residual_keras.diagnostics.path_gradients counts for `model` in all
  (sum its "num_paths"), so that you can confirm your formula on a network.

Check your work:  python -m tracks check THIS_FILE

Hints:
- each block doubles the number of paths;
- math.comb(n, k) is "n choose k";
- the paths' lengths run from 0 (every block skipped) to L (every block taken).
"""

import math

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    raise NotImplementedError


def transformer_paths(L):
    raise NotImplementedError


def paths_of_length(L, k):
    raise NotImplementedError


def path_count_from_the_instrument(model, x, y):
    raise NotImplementedError
