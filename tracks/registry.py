"""Every track of the package: its name and the module that declares its `TRACK`.

A new track is a folder (tracks/<name>/ with track.py and __main__.py) and
its line here. `python -m tracks` lists these, the docs scripts read a
reference run's findings through them (scripts/reference_tables.py), and the
tests run each one through the same contract (tests/tracks/test_track_contract.py).
Nothing here imports a track until it is asked for.
"""

import importlib

TRACKS = {
    "vision": "tracks.vision.track",
    "language": "tracks.language.track",
    "toy": "tracks.toy.track",
}


def track(name):
    """The `Track` named `name` ("vision"; a results.json's "vision-diagnose" names the same track)."""
    base = name[:-len("-diagnose")] if name.endswith("-diagnose") else name
    if base not in TRACKS:
        raise KeyError(f"no track {name!r}; the tracks are {', '.join(TRACKS)}")
    return importlib.import_module(TRACKS[base]).TRACK


__all__ = ["TRACKS", "track"]
