"""A hostile file: it writes 25 files of 60 MiB (1.5 GB) into its folder, each under the one-file limit.

The supervisor counts what the file's processes have written, in all: past
--disk-mb (256 MiB by default) the file is stopped and its folder removed.
"""
# expect-reason: disk: wrote more than

import os

EXERCISE = 5

chunk = os.urandom(2**20)
for number in range(25):
    with open(f"filler-{number}.bin", "wb") as handle:
        for _ in range(60):
            handle.write(chunk)
