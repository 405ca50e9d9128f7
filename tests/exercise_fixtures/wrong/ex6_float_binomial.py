"""A wrong answer to exercise 6: binomials through floating point."""
# expect: lengths: floating point

import math

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    return 2**L


def transformer_paths(L):
    return 2 ** (2 * L)  # two residual additions per block


def paths_of_length(L, k):
    count = 1.0
    for i in range(k):  # C(L, k) as a product of fractions, in floats
        count = count * (L - i) / (i + 1)
    return int(round(count))


def path_count_from_the_instrument(model, x, y):
    return int(round(sum(diagnostics.path_gradients(model, x, y, samples=1)["num_paths"])))
