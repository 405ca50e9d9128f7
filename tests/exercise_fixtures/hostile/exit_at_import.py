"""A hostile file: it ends its process at import (in a single-process grader: the whole run, exit code 0)."""

import sys

EXERCISE = 6
sys.exit(0)
