"""A wrong answer to exercise 6: three paths per Transformer block."""
# expect: transformer: count the residual additions

import math

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    return 2**L


def transformer_paths(L):
    return 3**L  # attention, MLP, or neither


def paths_of_length(L, k):
    return math.comb(L, k)


def path_count_from_the_instrument(model, x, y):
    return int(round(sum(diagnostics.path_gradients(model, x, y, samples=1)["num_paths"])))
