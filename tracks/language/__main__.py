"""`python -m tracks.language`: character Transformers, plain vs residual (the track: tracks/language/track.py)."""

import sys

from tracks.common import cli
from tracks.language.track import TRACK


def main(argv=None):
    return cli.main(TRACK, argv)


if __name__ == "__main__":
    sys.exit(main())
