"""How long a student waits for data before the first step, offline (the wall-clock checks kept out of the tests).

    python benchmarks/data_speed.py

Prints one JSON line: seconds to make the default synthetic image set
(`python -m tracks.vision` offline), and seconds for the language track's
`--data auto` to fall back to the pydoc corpus when the text's host cannot
be reached (name resolution made to hang, as it does offline). Both should
stay well under 10 s; `tfds.load` of an unprepared data set hangs about
3.5 minutes offline, which is what the fallbacks avoid.
"""

import json
import pathlib
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def main():
    from tracks.common import tfds_source
    from tracks.language.data import load_text_data
    from tracks.vision.data import load_vision_data

    results = {}
    with tempfile.TemporaryDirectory() as empty:
        original = tfds_source.host_reachable
        tfds_source.host_reachable = lambda *args, **kwargs: False
        start = time.perf_counter()
        load_vision_data("auto", data_dir=empty, log=lambda message: None)
        results["vision_auto_offline_synthetic_s"] = round(time.perf_counter() - start, 2)
        tfds_source.host_reachable = original

        release = threading.Event()

        def hanging_connection(*args, **kwargs):
            release.wait(60)
            raise OSError("offline")

        tfds_source.socket.create_connection = hanging_connection
        start = time.perf_counter()
        load_text_data("auto", data_dir=empty, log=lambda message: None)
        results["language_auto_offline_pydoc_s"] = round(time.perf_counter() - start, 2)
        release.set()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
