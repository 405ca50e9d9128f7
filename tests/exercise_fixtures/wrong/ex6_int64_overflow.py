"""A wrong answer to exercise 6: numpy's int64, which overflows."""
# expect: resnet: overflow

import math

import numpy as np

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    return int(np.int64(2) ** L)  # 0 from L = 64 on


def transformer_paths(L):
    return 2 ** (2 * L)  # two residual additions per block


def paths_of_length(L, k):
    return math.comb(L, k)


def path_count_from_the_instrument(model, x, y):
    return int(round(sum(diagnostics.path_gradients(model, x, y, samples=1)["num_paths"])))
