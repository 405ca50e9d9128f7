"""The toy track: plain vs residual MLPs on two spirals, in seconds (`python -m tracks.toy`)."""
