"""`python -m tracks`: the tracks this package installs, how to start each one, and the exercises.

    python -m tracks                       # the tracks
    python -m tracks exercises             # the exercises; `exercises start N DIR` copies one
    python -m tracks check FILE [--json]   # grades a solution (tracks/exercises/)
    python -m tracks collect ZIP --out DIR # a platform's download as one folder per student
    python -m tracks grade DIR --out OUT   # grades a class into a gradebook
    python -m tracks autograder --out autograder.zip   # the grader for Gradescope
    python -m tracks release --out DIR     # the students' edition, without solutions
"""

import argparse
import ast
import importlib.metadata
import importlib.util
import pathlib
import sys

from tracks.common.environment import choose_tensorflow
from tracks.common.options import OneLineParser, package_version

def tracks():
    """[(track, console script or None)]: every track of tracks/registry.py.

    A track is `python -m tracks.<track>`; a console script (pyproject.toml's
    [project.scripts]) is an optional second name for it.
    """

    from tracks.registry import TRACKS

    names = sorted(TRACKS)
    scripts = {entry.value.split(":")[0]: entry.name
               for entry in importlib.metadata.entry_points(group="console_scripts")
               if entry.value.startswith("tracks.")}
    return [(name, scripts.get(f"tracks.{name}.__main__")) for name in names]


def summary(track):
    """The first line of the track's track.py docstring, read without importing it (or TensorFlow)."""
    origin = pathlib.Path(importlib.util.find_spec(f"tracks.{track}").origin).with_name("track.py")
    first = ast.get_docstring(ast.parse(origin.read_text())).splitlines()[0]
    return first.split(":", 1)[1].strip() if first.startswith("`") else first


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["exercises"], ["check"], ["collect"], ["grade"], ["autograder"], ["release"]):
        from tracks.exercises.cli import main as exercises_main

        return exercises_main(argv)
    # The docstring's command list keeps its lines (argparse would reflow it into one paragraph).
    parser = OneLineParser(prog="python -m tracks", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"residual-keras {package_version()}")
    parser.parse_args(argv)
    print(f"residual-keras {package_version()}: the tracks (each one trains by default; --help lists its "
          f"options and commands)\n")
    for track, script in tracks():
        print((f"  {track:<9} {'python -m tracks.' + track:<26}" + (f" or  {script}" if script else "")).rstrip())
        print(f"  {'':<9} {summary(track)}")
    print("\n  exercises python -m tracks exercises        the course's self-test to solve, and\n"
          "            python -m tracks check FILE        the grader")
    return 0


if __name__ == "__main__":
    choose_tensorflow()  # the grader's Keras on TensorFlow, quietly (nothing is imported here)
    sys.exit(main())
