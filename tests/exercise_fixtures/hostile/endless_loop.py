"""A hostile file: an endless loop in one function (in a single-process grader: a run that never ends)."""

EXERCISE = 6


def resnet_paths(L):
    while True:
        L += 1
