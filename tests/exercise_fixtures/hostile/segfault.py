"""A hostile file: a crash in native code (reading address 0) during the checks."""

import ctypes

EXERCISE = 6


def resnet_paths(L):
    return ctypes.string_at(0)
