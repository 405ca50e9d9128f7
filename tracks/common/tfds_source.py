"""Deciding fast whether a TensorFlow Datasets dataset can be used.

Offline, `tfds.load` of a dataset that is not prepared retries name
resolution for minutes before failing. The tracks never call it blindly: they
ask `tfds_status` first, which answers within `timeout` seconds:

- "prepared": the dataset is already in the data directory; load it.
- "downloadable": not prepared, but its download host answers.
- "unavailable": neither; the caller falls back (or fails with a message).
"""

import concurrent.futures
import os
import socket
import sys

def data_dir(explicit=None):
    """The TFDS data directory: `explicit`, else $TFDS_DATA_DIR, else tfds' default."""
    if explicit:
        return os.path.expanduser(explicit)
    return os.environ.get("TFDS_DATA_DIR") or os.path.expanduser("~/tensorflow_datasets")


def is_prepared(name, directory=None):
    """True when `name` has been downloaded and prepared in the data directory.

    tensorflow_datasets logs a warning through absl when the folder is not there ("Variant folder ... has no
    dataset_info.json"): the answer here is that it is not prepared, and the caller says so in its own words.
    """
    import logging

    import tensorflow_datasets as tfds

    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        return tfds.builder(name, data_dir=data_dir(directory)).is_prepared()
    finally:
        absl.setLevel(level)


def host_reachable(host, port=443, timeout=5.0):
    """True when a TCP connection to `host:port` opens within `timeout` seconds.

    Name resolution has no timeout of its own, so the whole attempt runs in a
    worker thread that is abandoned when the time is up.
    """

    def connect():
        with socket.create_connection((host, port), timeout=timeout):
            return True

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(connect).result(timeout=timeout)
    except Exception:  # timeout, DNS failure, refused: all mean "not now"
        return False
    finally:
        pool.shutdown(wait=False)


def tfds_status(name, host, directory=None, timeout=5.0):
    """"prepared", "downloadable" or "unavailable", decided within about `timeout` s.

    Args:
        name: the TFDS name ("mnist").
        host: the host tfds downloads it from (the track that uses it knows it).
    """
    if is_prepared(name, directory):
        return "prepared"
    if host is not None and host_reachable(host, timeout=timeout):
        return "downloadable"
    return "unavailable"


def prefetch(name, host, directory=None, log=print):
    """Downloads and prepares `name` into the data directory; returns an exit code.

    0: prepared (now or already). 1: the download host cannot be reached, with
    a message saying so (nothing is downloaded, nothing hangs).
    """
    import tensorflow_datasets as tfds

    directory = data_dir(directory)
    status = tfds_status(name, host, directory)
    if status == "prepared":
        log(f"{name} is already prepared in {directory}")
        return 0
    if status == "unavailable":  # not the user's input: exit 1, the line on stderr
        print(f"error: cannot download {name}: {host or 'its host'} is unreachable "
              f"(offline?). Run this where there is network, then copy {directory} here "
              f"or point --data-dir / TFDS_DATA_DIR at it.", file=sys.stderr, flush=True)
        return 1
    log(f"downloading and preparing {name} into {directory} ...")
    tfds.builder(name, data_dir=directory).download_and_prepare()
    log(f"{name} is ready in {directory}")
    return 0
