"""Writes each reference run's bands.json: the range a class run of its preset (quick, class, nonorm) may fall in.

A band is the range of every measured run of the preset on that data set
(the reference run and the earlier runs recorded in docs/experiments/),
widened on each side (vision: 3 points of error, language: 0.03 nats, the
threshold below which the language findings call two runs the same) and
rounded outwards (whole points; 0.01 nats). Two or three seeds give a range,
not a confidence interval: a class run outside a band is a reason to look,
not a failure.

    python scripts/make_bands.py
"""

import json
import math
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tracks' results types, run from a checkout
REFERENCE = ROOT / "docs" / "reference"

# The earlier final runs of the same presets, as docs/experiments/ records them
# (final training and test error, validation loss), with where they are written.
EARLIER = {
    "vision-cifar10-s0": {
        "source": "docs/experiments/vision.md, the quick preset at 10 epochs on CIFAR-10, seeds 1-4",
        "values": {
            "plain-8 training error": [0.461, 0.498, 0.521, 0.502],
            "plain-8 test error": [0.466, 0.493, 0.509, 0.505],
            "plain-32 training error": [0.584, 0.636, 0.632, 0.639],
            "plain-32 test error": [0.579, 0.628, 0.618, 0.627],
            "residual-8 training error": [0.491, 0.487, 0.509, 0.512],
            "residual-8 test error": [0.492, 0.490, 0.498, 0.515],
            "residual-32 training error": [0.439, 0.446, 0.471, 0.450],
            "residual-32 test error": [0.456, 0.451, 0.482, 0.455],
        },
    },
    "vision-offline-s0": {
        "source": "docs/experiments/vision.md, the quick preset on its offline set (issue 66's screening 8: every "
                  "object painted, 4 distractors in half the images, background clutter x2), seeds 1-5 "
                  "(docs/measurements/quick_offline.json; seed 0 is the reference run's)",
        "values": {
            "plain-8 training error": [0.309, 0.307, 0.360, 0.323, 0.295],
            "plain-8 test error": [0.334, 0.307, 0.362, 0.320, 0.291],
            "plain-32 training error": [0.886, 0.887, 0.470, 0.869, 0.806],
            "plain-32 test error": [0.895, 0.879, 0.452, 0.875, 0.798],
            "residual-8 training error": [0.297, 0.313, 0.313, 0.322, 0.310],
            "residual-8 test error": [0.310, 0.303, 0.285, 0.316, 0.285],
            "residual-32 training error": [0.212, 0.207, 0.265, 0.245, 0.278],
            "residual-32 test error": [0.222, 0.211, 0.257, 0.248, 0.258],
        },
    },
    "vision-class-cifar10-s0": {
        "source": "docs/experiments/vision.md, the class preset on CIFAR-10, seeds 1 and 2 (issue 53; issue 41's runs "
                  "of the same training gave seed 1's errors)",
        "values": {
            "plain-20 training error": [0.299, 0.339], "plain-20 test error": [0.331, 0.356],
            "plain-56 training error": [0.645, 0.638], "plain-56 test error": [0.619, 0.628],
            "residual-20 training error": [0.271, 0.262], "residual-20 test error": [0.304, 0.292],
            "residual-56 training error": [0.237, 0.232], "residual-56 test error": [0.291, 0.284],
        },
    },
    "vision-class-synthetic-s0": {
        "source": "docs/experiments/vision.md, the class preset on issue 53's third design of the synthetic set, "
                  "seeds 1-4 (training error; seed 1's test error: the others' were not recorded)",
        "values": {
            "plain-20 training error": [0.335, 0.318, 0.297, 0.317], "plain-20 test error": [0.353],
            "plain-56 training error": [0.882, 0.896, 0.888, 0.893], "plain-56 test error": [0.884],
            "residual-20 training error": [0.281, 0.258, 0.259, 0.264], "residual-20 test error": [0.292],
            "residual-56 training error": [0.261, 0.261, 0.250, 0.291], "residual-56 test error": [0.277],
        },
    },
    "vision-nonorm-cifar10-s0": {
        "source": "docs/experiments/vision.md, the clipped nonorm recipe on CIFAR-10, seeds 1 and 2",
        "values": {
            "plain-nonorm-56 training error": [0.905, 0.905],
            "plain-nonorm-56 test error": [0.9, 0.9],
            "residual-nonorm-56 training error": [0.714, 0.788],
            "residual-nonorm-56 test error": [0.705, 0.777],
            "fixup-56 training error": [0.592, 0.611],
            "fixup-56 test error": [0.591, 0.606],
            "preact-zero-nonorm-56 training error": [0.731, 0.663],
            "preact-zero-nonorm-56 test error": [0.728, 0.651],
            "residual-56 training error": [0.475, 0.498],
            "residual-56 test error": [0.486, 0.485],
        },
    },
    "vision-nonorm-synthetic-s0": {
        "source": "docs/experiments/vision.md, the clipped nonorm recipe on the synthetic set, seeds 1-4",
        "values": {
            "plain-nonorm-56 training error": [0.9, 0.901, 0.904, 0.9],
            "plain-nonorm-56 test error": [0.9, 0.9, 0.9, 0.9],
            "residual-nonorm-56 training error": [0.899, 0.901, 0.905, 0.9],
            "residual-nonorm-56 test error": [0.899, 0.9, 0.9, 0.9],
            "fixup-56 training error": [0.465, 0.46, 0.581, 0.622],
            "fixup-56 test error": [0.45, 0.419, 0.567, 0.625],
            "preact-zero-nonorm-56 training error": [0.619, 0.72, 0.468, 0.601],
            "preact-zero-nonorm-56 test error": [0.587, 0.713, 0.461, 0.581],
            "residual-56 training error": [0.202, 0.235, 0.219, 0.239],
            "residual-56 test error": [0.193, 0.22, 0.202, 0.23],
        },
    },
    "language-tinyshakespeare-s0": {
        "source": "docs/experiments/language.md, the final runs on Tiny Shakespeare, seeds 0 (L05) and 1",
        "values": {
            "pre-6-warmup0 validation loss": [1.787, 1.780], "pre-6-warmup100 validation loss": [1.772, 1.765],
            "post-6-warmup0 validation loss": [3.347, 3.349], "post-6-warmup100 validation loss": [1.743, 1.739],
            "plain-6-warmup100 validation loss": [3.348, 3.349],
        },
    },
    "language-offline-s0": {
        "source": "docs/experiments/language.md, the final runs on pydoc, seeds 0 and 1",
        "values": {
            "pre-6-warmup0 validation loss": [1.299, 1.302], "pre-6-warmup100 validation loss": [1.292, 1.297],
            "post-6-warmup0 validation loss": [3.243, 3.249], "post-6-warmup100 validation loss": [1.276, 1.289],
            "plain-6-warmup100 validation loss": [3.244, 3.249],
        },
    },
}
VISION_RULE = ("every measured run's range (this reference and docs/experiments/' earlier seeds) widened by "
               "3 points of error on each side, ends rounded outwards to whole points")
LANGUAGE_RULE = ("every measured run's range (this reference and docs/experiments/' earlier seeds) widened by "
                 "0.03 nats on each side, ends rounded outwards to 0.01")


def _figures(results):
    figures = {}
    for entry in results.models:
        for key, label in (("train_error", "training error"), ("test_error", "test error"),
                           ("val_loss", "validation loss")):
            if getattr(entry, key, None) is not None:
                figures[f"{entry.id} {label}"] = getattr(entry, key)
    return figures


def bands_for(name):
    from tracks.registry import track

    data = json.loads((REFERENCE / name / "results.json").read_text())
    results = track(data["track"]).results.from_json(data)
    earlier = EARLIER[name]["values"]
    vision = name.startswith("vision")
    # Errors are fractions: 3 points widen by 0.03 and whole points are steps of 0.01,
    # the same numbers as the language track's 0.03 and 0.01 nats.
    widen, step = 0.03, 0.01
    bands = {}
    for figure, value in _figures(results).items():
        values = [value, *earlier.get(figure, [])]
        low = math.floor((min(values) - widen) / step + 1e-9) * step
        high = math.ceil((max(values) + widen) / step - 1e-9) * step
        bands[figure] = [round(max(low, 0.0), 4), round(high, 4)]
    return bands, (VISION_RULE if vision else LANGUAGE_RULE), [f"{name}/results.json", EARLIER[name]["source"]]


def main():
    for name in EARLIER:
        if not (REFERENCE / name / "results.json").is_file():
            print(f"skipped {name}: no reference run")
            continue
        bands, rule, sources = bands_for(name)
        path = REFERENCE / name / "bands.json"
        path.write_text(json.dumps({"rule": rule, "sources": sources,
                                    "bands": {key: bands[key] for key in sorted(bands)}}, indent=1) + "\n")
        print(f"wrote {path.relative_to(ROOT)} ({len(bands)} bands)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
