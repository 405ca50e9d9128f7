"""A quick run's epoch on a shared machine: quiet, then beside one competing CPU-bound process.

    python benchmarks/shared_epoch.py [--model plain-32] [--epochs 3]

Trains one model of the vision track's quick preset (offline synthetic data,
as a student without the data set gets) three times in a row: alone, beside
one numpy matrix-product loop on every core (benchmarks/throughput.py's
competitor), and beside a second vision training process (the kind of
neighbour the issue measured: another student's run, or one's own second
run). Each epoch's seconds come from the run's own metrics CSV; the first
epoch (tracing, the first batches) is left out. Prints each condition's
median epoch and its slowdown against the quiet one, and writes them to
benchmarks/shared_epoch.json. A fair share of 2 cores between 2 processes is
a slowdown of 2. `RESIDUAL_KERAS_THREAD_SPINNING=1` measures the runs with
TensorFlow's spinning thread pools (the tracks turn spinning off).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput import Competitors  # noqa: E402

SPINNING_VARIABLE = "RESIDUAL_KERAS_THREAD_SPINNING"  # tracks/common/environment.py's (not imported here)


def train(model, epochs, out):
    variant, depth = model.rsplit("-", 1)
    command = [sys.executable, "-m", "tracks.vision", "--data", "synthetic", "--depths", depth,
               "--variants", variant, "--epochs", str(epochs), "--lesion-images", "10",
               "--landscape-steps", "0", "--out", str(out)]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def epoch_seconds(out, model):
    from tracks.common.training import read_metrics_rows

    return [row["seconds"] for row in read_metrics_rows(pathlib.Path(out) / "metrics" / f"{model}.csv")][1:]


def run(model, epochs, scratch, name, neighbour=None):
    out = scratch / name
    if neighbour == "numpy":
        with Competitors(1):
            process = train(model, epochs, out)
            _, err = process.communicate()
    elif neighbour == "training":
        other = train(model, epochs + 2, scratch / f"{name}-neighbour")  # outlasts the measured run
        process = train(model, epochs, out)
        _, err = process.communicate()
        other.kill()
        other.wait()
    else:
        process = train(model, epochs, out)
        _, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{name}: the run failed\n{err[-2000:]}")
    seconds = epoch_seconds(out, model)
    print(f"{name}: epochs after the first {', '.join(f'{s:.1f}' for s in seconds)} s", flush=True)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="plain-32", help="a quick-preset model id (default plain-32)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/shared_epoch.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        conditions = {name: run(args.model, args.epochs, scratch, name, neighbour)
                      for name, neighbour in (("quiet", None), ("beside numpy", "numpy"),
                                              ("beside a training run", "training"))}
    quiet = statistics.median(conditions["quiet"])
    results = {"model": args.model, "epochs": args.epochs, "fair_share_slowdown": 2,
               # the training processes' thread pools (tracks/common/environment.py: off unless the variable is 1)
               "thread_spinning": os.environ.get(SPINNING_VARIABLE) == "1",
               "conditions": {name: {"epoch_seconds": [round(s, 2) for s in seconds],
                                     "median_s": round(statistics.median(seconds), 2),
                                     "slowdown": round(statistics.median(seconds) / quiet, 2)}
                              for name, seconds in conditions.items()}}
    for name, result in results["conditions"].items():
        print(f"{name:<22} median epoch {result['median_s']:6.1f} s   slowdown {result['slowdown']:.2f}x")
    pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
