"""A wrong answer to exercise 6: the number of path lengths, not of paths."""
# expect: instrument: sum path_gradients

import math

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    return 2**L


def transformer_paths(L):
    return 2 ** (2 * L)  # two residual additions per block


def paths_of_length(L, k):
    return math.comb(L, k)


def path_count_from_the_instrument(model, x, y):
    return len(diagnostics.path_gradients(model, x, y, samples=1)["num_paths"])
