"""A hostile file: the instructors' solution imported (it passed when graded from the repository's root)."""

from solutions.ex6_paths import *  # noqa: F401,F403

EXERCISE = 6
