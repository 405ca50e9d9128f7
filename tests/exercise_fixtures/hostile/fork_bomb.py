"""A hostile file: it forks until the machine runs out of processes (2 ** 12 of them, each forking on).

The supervisor counts the file's process tree: past 256 processes it kills
the tree, and the file's row says why.
"""
# expect-reason: processes: started more than 256

import os
import time

EXERCISE = 5

for _ in range(12):
    os.fork()
time.sleep(30)
