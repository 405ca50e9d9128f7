"""Run machinery shared by every track: tracks.common.cli.main(track, argv) runs a `Track` (track.py)."""
