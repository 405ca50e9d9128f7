"""A hostile file: os._exit(3) in the middle of the checks, which no `except` catches."""

import os

EXERCISE = 6


def resnet_paths(L):
    return 2**L


def transformer_paths(L):
    os._exit(3)
