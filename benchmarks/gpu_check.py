"""What the tracks' GPU defaults cost on one GPU, in about 8 minutes: one JSON.

    bash benchmarks/gpu_check.sh                    # writes benchmarks/gpu_check.json
    python benchmarks/gpu_check.py --out FILE --budget 480

Measured, in this order (each item has a share of the budget and is cut
short, not skipped, when it runs out):

1. the device: its name, compute capability, TensorFlow and Keras versions;
2. ResNet-20 and ResNet-56 (batch 128, the vision track's builder, optimizer
   and augmenting tf.data pipeline): ms per step and the projected CIFAR-10
   epoch (390 steps), with XLA on and off, in fp32 and bf16;
3. the char GPT of the `fast` language preset (6 layers x 384, 6 heads,
   block 256, batch 64): tokens/s in fp32 and bf16, XLA on;
4. the first epochs of `--preset fast` of both tracks (offline data:
   synthetic images, the pydoc corpus), with the projected total;
5. peak GPU memory of every measurement.

The throughput items reuse benchmarks/throughput.py's `measure` (the tracks'
own build and compile code), so the numbers are what a track run gets.
"""

import argparse
import importlib
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CIFAR_STEPS_PER_EPOCH = 50_000 // 128
THROUGHPUT_RUNS = [
    # (model, xla, precision)
    ("resnet20", "on", "fp32"), ("resnet20", "off", "fp32"), ("resnet20", "on", "bf16"), ("resnet20", "off", "bf16"),
    ("resnet56", "on", "bf16"), ("resnet56", "off", "bf16"), ("resnet56", "on", "fp32"),
    ("chargpt-6x384", "on", "bf16"), ("chargpt-6x384", "on", "fp32"),
]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "gpu_check.json"))
    parser.add_argument("--budget", type=float, default=450.0, help="seconds for everything (default 450)")
    parser.add_argument("--preset-seconds", type=float, default=70.0,
                        help="seconds of each track's `--preset fast` run (default 70)")
    return parser.parse_args(argv)


def device_info():
    import keras
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    details = tf.config.experimental.get_device_details(gpus[0])
    return {"device": details.get("device_name", "GPU"), "compute_capability": details.get("compute_capability"),
            "gpus": len(gpus), "tensorflow": tf.__version__, "keras": keras.__version__}


def throughput(model, xla, precision, steps):
    """One measurement through throughput.py's `measure`, with the GPU's peak memory."""
    import keras
    import tensorflow as tf

    from benchmarks import throughput as bench

    keras.backend.clear_session()
    tf.config.experimental.reset_memory_stats("GPU:0")
    args = bench.parse_args(["--models", model, "--xla", xla, "--precision", precision,
                             "--steps", str(steps), "--pairs", "2"])
    result = bench.measure(model, args, peers_available=False)
    result["peak_gpu_memory_mb"] = round(tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20)
    if model.startswith("resnet"):
        result["projected_cifar10_epoch_s"] = round(result["ms_per_step"] * CIFAR_STEPS_PER_EPOCH / 1000, 1)
    keras.config.set_dtype_policy("float32")
    return result


def preset_run(track, data, seconds):
    """`python -m tracks.TRACK --preset fast` for `seconds`, then its per-epoch times and a projected total."""
    out = pathlib.Path(tempfile.mkdtemp(prefix=f"gpu-check-{track}-")) / "run"
    command = [sys.executable, "-m", f"tracks.{track}", "--preset", "fast", "--data", data, "--out", str(out)]
    start = time.perf_counter()
    try:
        subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        pass  # expected: the run is cut short on purpose; its finished epochs are on disk
    wall = time.perf_counter() - start
    config_path = out / "config.json"
    if not config_path.exists():
        return {"track": track, "error": f"no config.json after {wall:.0f} s", "command": " ".join(command)}
    config = json.loads(config_path.read_text())
    epochs = {}
    for csv in sorted((out / "metrics").glob("*.csv")):
        rows = [line.split(",") for line in csv.read_text().splitlines()[1:]]
        epochs[csv.stem] = [float(row[1]) for row in rows]
    result = {"track": track, "data": data, "observed_s": round(wall, 1), "epoch_seconds": epochs}
    observed = next(((name, times) for name, times in epochs.items() if len(times) >= 2), None)
    if observed is None:
        result["projection"] = "fewer than 2 finished epochs: no projection"
        return result
    name, times = observed
    steady = statistics.median(times[1:])  # the first epoch includes compilation
    # Model ids end in the depth ("residual-56", "pre-6-warmup100"); a step's time is about linear in depth.
    observed_depth = int(re.search(r"-(\d+)(?:-warmup\d+)?$", name).group(1))
    # Vision "epochs" are epochs; language "epochs" are evaluation intervals of equal length.
    per_model = config["epochs"] if track == "vision" else config["steps"] / config["eval_interval"]
    # The preset's models, as the track lists them (the language grid adds warm-up variants).
    experiment = importlib.import_module(f"tracks.{track}.experiment")
    specs = experiment.grid(importlib.import_module(f"tracks.{track}.presets").PRESETS["fast"])
    total = sum(steady * spec.depth / observed_depth * per_model for spec in specs)
    models = len(specs)
    result.update(steady_epoch_s=round(steady, 2), models=models,
                  projected_total_min=round(total / 60, 1),
                  projection=f"median epoch of {name} after its first x epochs x models, scaled by depth")
    return result


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    device = device_info()
    if device is None:
        print("gpu_check: TensorFlow sees no GPU here; run it on a machine with one "
              "(e.g. docker run --gpus all IMAGE bash benchmarks/gpu_check.sh)", file=sys.stderr)
        return 2
    report = {"device": device, "throughput": [], "presets": []}
    out = pathlib.Path(args.out)

    def save():
        report["wall_s"] = round(time.perf_counter() - started, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")

    throughput_budget = args.budget - 2 * args.preset_seconds - 20
    for model, xla, precision in THROUGHPUT_RUNS:
        if time.perf_counter() - started > throughput_budget:
            report["throughput"].append({"model": model, "xla": xla, "precision": precision,
                                         "skipped": "time budget spent"})
            continue
        steps = 48 if model.startswith("resnet") else 40
        try:
            result = throughput(model, xla, precision, steps)
        except Exception as error:  # one failed configuration must not lose the others
            result = {"model": model, "xla": xla, "precision": precision,
                      "error": f"{type(error).__name__}: {str(error)[:300]}"}
        report["throughput"].append(result)
        print(json.dumps(result), flush=True)
        save()
    for track, data in (("vision", "synthetic"), ("language", "pydoc")):
        report["presets"].append(preset_run(track, data, args.preset_seconds))
        print(json.dumps(report["presets"][-1]), flush=True)
        save()
    save()
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
