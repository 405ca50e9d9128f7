"""`python -m tracks.toy`: plain vs residual MLPs on two spirals (the track: tracks/toy/track.py)."""

import sys

from tracks.common import cli
from tracks.toy.track import TRACK


def main(argv=None):
    return cli.main(TRACK, argv)


if __name__ == "__main__":
    sys.exit(main())
