"""A wrong answer to exercise 6: (-2)^L paths, which is 2^L only when L is even."""
# expect: resnet: a count is never negative

import math

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    return (-2) ** L


def transformer_paths(L):
    return 2 ** (2 * L)  # two residual additions per block


def paths_of_length(L, k):
    return math.comb(L, k)


def path_count_from_the_instrument(model, x, y):
    return int(round(sum(diagnostics.path_gradients(model, x, y, samples=1)["num_paths"])))
