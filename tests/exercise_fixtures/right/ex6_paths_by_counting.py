"""A right answer to exercise 6 written with loops (Pascal's triangle), exact because Python's ints are."""

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    count = 1
    for _ in range(L):
        count *= 2  # each block: skip it or take its branch
    return count


def transformer_paths(L):
    return resnet_paths(2 * L)


def paths_of_length(L, k):
    row = [1]
    for _ in range(L):
        row = [a + b for a, b in zip([0, *row], [*row, 0])]
    return row[k] if 0 <= k <= L else 0


def path_count_from_the_instrument(model, x, y):
    counts = diagnostics.path_gradients(model, x, y, samples=1)["num_paths"]
    return int(round(sum(counts)))
