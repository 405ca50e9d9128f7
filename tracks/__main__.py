"""`python -m tracks`: the tracks this package installs, how to start each one, and the exercises.

    python -m tracks                       # the tracks
    python -m tracks exercises             # the exercises; `exercises start N DIR` copies one
    python -m tracks check FILE [--json]   # grades a solution (tracks/exercises/)
"""

import argparse
import ast
import importlib.util
import pathlib
import sys

# (track, console script): each track is `python -m tracks.<track>` or the script.
TRACKS = (("vision", "residual-vision"), ("language", "residual-language"))


def summary(track):
    """The first line of the track's `__main__` docstring, read without importing it (or TensorFlow)."""
    origin = pathlib.Path(importlib.util.find_spec(f"tracks.{track}").origin).with_name("__main__.py")
    first = ast.get_docstring(ast.parse(origin.read_text())).splitlines()[0]
    return first.split(":", 1)[1].strip() if first.startswith("`") else first


def version():
    """The package's version, read from residual_keras/_version.py without importing Keras."""
    origin = pathlib.Path(importlib.util.find_spec("residual_keras").origin).with_name("_version.py")
    for node in ast.parse(origin.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__version__":
            return node.value.value
    return "unknown"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["exercises"], ["check"]):
        from tracks.exercises.grader import main as exercises_main

        return exercises_main(argv)
    parser = argparse.ArgumentParser(prog="python -m tracks", description=__doc__)
    parser.add_argument("--version", action="version", version=f"residual-keras {version()}")
    parser.parse_args(argv)
    print(f"residual-keras {version()}: the tracks (each one trains by default; --help lists its "
          f"options and commands)\n")
    for track, script in TRACKS:
        print(f"  {track:<9} {'python -m tracks.' + track:<26} or  {script}")
        print(f"  {'':<9} {summary(track)}")
    print("\n  exercises python -m tracks exercises        the course's self-test to solve, and\n"
          "            python -m tracks check FILE        the grader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
