"""A hostile file: it starts processes that leave its session and clear their environment, then exits.

One sleeps in a new session with an empty environment (it uses no CPU, so
RLIMIT_CPU never ends it); another is a daemon by a double fork. The
file's supervisor is their subreaper: both are killed after the file.
"""
# expect-reason: checks failed

import os
import subprocess

EXERCISE = 5

subprocess.Popen(["sleep", "317"], env={}, start_new_session=True)
if os.fork() == 0:  # a daemon: fork, new session, fork again, the middle one exits
    os.setsid()
    if os.fork() == 0:
        os.execve("/bin/sleep", ["sleep", "318"], {})
    os._exit(0)


def residual_bounds(eps, L):
    return 0.0, 0.0
