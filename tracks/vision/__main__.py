"""`python -m tracks.vision`: plain vs residual ResNets on CIFAR-10 (the track: tracks/vision/track.py)."""

import sys

from tracks.common import cli
from tracks.vision.track import TRACK


def main(argv=None):
    return cli.main(TRACK, argv)


if __name__ == "__main__":
    sys.exit(main())
