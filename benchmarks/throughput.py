"""Training throughput of the tracks' models, optionally side by side with PyTorch eager.

    python benchmarks/throughput.py                 # ResNet-20, ResNet-56, baby char GPT
    python benchmarks/throughput.py --peers         # + the PyTorch peers, alternated
    python benchmarks/throughput.py --models chargpt --xla off --steps-per-execution 1
    python benchmarks/throughput.py --emulate-isa avx2 --peers   # as on an AVX2 CPU (benchmarks/emulate_isa.py)

Each model is built, compiled and trained by the tracks' own code
(`tracks.vision.experiment` / `tracks.language.experiment`: the same builder,
optimizer, loss, XLA and precision settings, `model.fit` on the tracks' tf.data
pipelines with augmentation), so the numbers are what a track run gets.
Warm-up steps (including compilation) are timed separately and left out.

With `--peers` (`pip install torch==2.13.0`), the PyTorch peers of this
folder (benchmarks/torch_resnet20.py and benchmarks/torch_chargpt.py: the
same networks, optimizers and schedules as the tracks', each documented
there), eager and under `torch.compile` (benchmarks/torch_compiled_peer.py;
with `--precision bf16` both peers run under `torch.autocast` to bfloat16),
run in subprocesses between our timed segments: ours, eager, compiled, ours,
eager, compiled, ... so all see the same machine state; each ratio reported
is the median over the rounds. The peers use a fixed in-memory batch and no
input pipeline; ours includes the tf.data pipeline. Each peer reports its
trainable parameters, and a peer whose count differs from our model's is an
error, not a ratio.

`--emulate-isa avx2` runs every measured process (ours, the peers, the
peak) as on a CPU with AVX2 and no AVX-512 (benchmarks/emulate_isa.py: CPUID
masked where Linux can trap it, else each library's own cap); the package then
sets itself up as on such a CPU (tracks/common/cpu_settings.py:
`apply_cpu_settings`). The JSON's `meta.emulated_isa` and `meta.emulated_by`,
and each model's `cpu_settings`, say so.

Each model's work per image / token is counted from its architecture
(benchmarks/flops.py), and set against this machine's fp32 peak, measured
before and after the models: the best float32 matrix product of numpy (its
BLAS) and of TensorFlow (oneDNN, what the models run on).
"""

import argparse
import json
import os
import pathlib
import platform
import resource
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.flops import (  # noqa: E402  (after the path is set)
    TRAINING_OVER_FORWARD,
    char_gpt_forward_flops,
    cifar_resnet_forward_flops,
)
from benchmarks.emulate_isa import EMULATIONS, emulation  # noqa: E402
from tracks.common.cpu_settings import BF16_CPU_FLAGS  # noqa: E402  (standard library only: no TensorFlow)

MODELS = {
    # name: (track, description, peer script or None, training FLOPs per image / token)
    "resnet20": ("vision", "ResNet-20, option-B shortcuts (as the peer), batch 128", "torch_resnet20.py",
                 TRAINING_OVER_FORWARD * cifar_resnet_forward_flops(20, projection_shortcuts=True)),
    "resnet56": ("vision", "ResNet-56, option-A shortcuts, batch 128", None,
                 TRAINING_OVER_FORWARD * cifar_resnet_forward_flops(56, projection_shortcuts=False)),
    "chargpt": ("language", "baby char GPT: 4 layers x 128, block 64, batch 12", "torch_chargpt.py",
                TRAINING_OVER_FORWARD * char_gpt_forward_flops(4, 128, 64, 65)),
    # the `fast` language preset's model (nanoGPT's Shakespeare-char GPU model): for GPUs
    "chargpt-6x384": ("language", "char GPT: 6 layers x 384, 6 heads, block 256, batch 64", None,
                      TRAINING_OVER_FORWARD * char_gpt_forward_flops(6, 384, 256, 65)),
}
LANGUAGE_SHAPES = {  # name: (layers, width, heads, block, batch)
    "chargpt": (4, 128, 4, 64, 12),
    "chargpt-6x384": (6, 384, 6, 256, 64),
}
# A text of exactly this many distinct characters stands in for Tiny Shakespeare (the GPT's vocabulary, 65):
# the step's cost depends on the shapes, not on the text; the benchmark reads no file outside the repository.
BENCHMARK_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ \n.,;:!?'-&$3"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet20,resnet56,chargpt",
                        help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per segment (default: 16 for ResNets, 120 for the GPT)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default: 2 x steps-per-execution + 4)")
    parser.add_argument("--pairs", type=int, default=5, help="timed segments (and peer runs, with --peers)")
    parser.add_argument("--xla", default="auto", choices=("auto", "on", "off"))
    parser.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp32"))
    parser.add_argument("--steps-per-execution", type=int, default=None,
                        help="default: the tracks' presets (quick)")
    parser.add_argument("--peers", action="store_true", help="also run the PyTorch peers, alternated with ours")
    parser.add_argument("--emulate-isa", choices=sorted(EMULATIONS), default=None,
                        help="run ours, the peers and the peak capped to this instruction set "
                             "(benchmarks/emulate_isa.py: an AVX2 CPU on an AVX-512 machine)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for the peers")
    parser.add_argument("--competing", type=int, default=0, metavar="N",
                        help="a shared machine: each round also times ours (and the eager peer) while N "
                             "CPU-bound processes (a numpy matrix product loop each, on every core) run, "
                             "and reports the slowdown against the quiet segment of the same round")
    parser.add_argument("--out", default="benchmarks/throughput.json", help="where the JSON results go")
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    for name in args.models:
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return args


def vision_setup(name, args):
    import dataclasses

    from tracks.common.track import RunContext
    from tracks.vision import experiment
    from tracks.vision.data import load_vision_data, training_epochs
    from tracks.vision.presets import PRESETS

    depth, variant = (20, "projection") if name == "resnet20" else (56, "residual")
    config = dataclasses.replace(PRESETS["quick"], depths=(depth,), variants=(variant,), width=16,
                                 batch_size=128, xla=args.xla, precision=args.precision,
                                 **_spe(args))
    data = load_vision_data("synthetic", seed=0, log=lambda message: None)
    train_ds = training_epochs(data, config.batch_size, augment=True, seed=0)(0)  # epoch 0, as the track
    spec = experiment.VisionSpec(variant, depth)

    def build(runtime):
        model = experiment.build_model(spec, RunContext(config, data=data))
        experiment.compile_model(model, config, spec, runtime, steps_per_epoch=len(data.y_train) // 128)
        return model

    return config, build, train_ds.repeat(), config.batch_size, "images"


def language_setup(name, args):
    import dataclasses

    from tracks.common.track import RunContext
    from tracks.language import experiment
    from tracks.language.pipeline import make_lm_datasets
    from tracks.language.presets import PRESETS

    layers, width, heads, block, batch = LANGUAGE_SHAPES[name]
    config = dataclasses.replace(PRESETS["quick"], depths=(layers,), variants=("pre",), warmup_steps=(0,),
                                 warmup_variants=("pre",),
                                 embed_dim=width, num_heads=heads, sequence_length=block, batch_size=batch,
                                 xla=args.xla, precision=args.precision, **_spe(args))
    data = benchmark_text(config.sequence_length)
    train_ds, _ = make_lm_datasets(data, config.sequence_length, config.batch_size, seed=0)
    spec = experiment.LanguageSpec("pre", layers, 0)

    def build(runtime):
        model = experiment.build_model(spec, RunContext(config, data=data))
        experiment.compile_model(model, config, spec, runtime)
        return model

    return config, build, train_ds, config.batch_size * config.sequence_length, "tokens"


def benchmark_text(sequence_length, characters=300_000):
    """The language track's `TextData` of a random text over `BENCHMARK_ALPHABET` (vocabulary 65)."""
    import tempfile

    import numpy as np

    from tracks.language.data import load_text_data

    codes = np.random.default_rng(0).integers(0, len(BENCHMARK_ALPHABET), characters)
    text = BENCHMARK_ALPHABET + "".join(BENCHMARK_ALPHABET[code] for code in codes)  # every character once
    with tempfile.TemporaryDirectory() as directory:
        path = pathlib.Path(directory) / "benchmark.txt"
        path.write_text(text, encoding="utf-8")
        return load_text_data(f"text:{path}", log=lambda message: None, sequence_length=sequence_length)


def compiled_peer(script, args, name, bf16, parameters):
    """(rate, compile seconds, None) of the torch.compile peer, or (None, None, the error) where it failed.

    torch.compile can crash where eager PyTorch runs (PyTorch 2.13's compiled ResNet-20 on an Intel Xeon with
    AMX, benchmarks/NOTES.md, issue 67): that is the peer's failure, reported in the JSON and on stderr, and
    the benchmark goes on with ours and the eager peer."""
    try:
        rate, seconds = run_peer(script, args, name, compiled=True, bf16=bf16, parameters=parameters)
    except RuntimeError as error:
        if "parameters, ours" in str(error):  # a different model is our error, never the peer's
            raise
        message = str(error).strip()[-300:]
        print(f"{name}: the torch.compile peer failed, no ratio against it: {message}", file=sys.stderr)
        return None, None, message
    return rate, seconds, None


def _spe(args):
    return {} if args.steps_per_execution is None else {"steps_per_execution": args.steps_per_execution}


def run_peer(script, args, name, compiled=False, bf16=False, parameters=None):
    """(rate, compile seconds or None) of one peer run in a subprocess; `bf16`: under bfloat16 autocast,
    like with like when ours runs in mixed_bfloat16. `parameters`: our model's trainable parameters, which
    the peer's must equal (`RuntimeError` otherwise: a ratio between different models means nothing)."""
    command = [sys.executable, str(pathlib.Path(__file__).with_name(script))]
    command += (["--compile"] if compiled else []) + (["--autocast", "bf16"] if bf16 else [])
    command += ["--threads", str(args.threads)]
    command += ["--steps", "20"] if name == "resnet20" else ["--steps", "150"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if finished.returncode != 0:
        raise RuntimeError(f"peer {command[1]} failed: {finished.stderr[-500:]}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    if parameters is not None and result["parameters"] != parameters:
        raise RuntimeError(f"peer {script} trains {result['parameters']:,} parameters, ours {parameters:,}: "
                           f"not the same model")
    rate = result["images_per_s"] if "images_per_s" in result else result["tokens_per_s"]
    return rate, result.get("compile_s")


# One competing CPU-bound process: float32 matrix products on every core (numpy's BLAS threads), forever.
COMPETITOR = ("import numpy as np\n"
              "a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)\n"
              "while True:\n"
              "    a = (a @ a) / 1024.0\n")


class Competitors:
    """`with Competitors(n):` runs n competing CPU-bound processes for the block, then stops them."""

    def __init__(self, count):
        self.count = count
        self.processes = []

    def __enter__(self):
        self.processes = [subprocess.Popen([sys.executable, "-c", COMPETITOR]) for _ in range(self.count)]
        time.sleep(1.0)  # let them reach their loop
        return self

    def __exit__(self, *exc_info):
        for process in self.processes:
            process.kill()
            process.wait()
        return False


def measure(name, args, peers_available):
    import numpy as np

    from tracks.common.environment import configure_process, read_environment

    configure_process(read_environment())  # as a track's command does: pools that sleep, before any op
    from tracks.common.runtime import setup_runtime
    from tracks.common.xla import xla_step_ran

    track, description, peer, flops_per_unit = MODELS[name]
    setup = vision_setup if track == "vision" else language_setup
    config, build, train_ds, units_per_step, unit = setup(name, args)
    runtime = setup_runtime(config.precision, config.xla, "none", seed=0,
                            cpu_xla=_cpu_xla_default(track))
    model = build(runtime)
    parameters = sum(int(np.prod(weight.shape)) for weight in model.trainable_weights)
    spe = config.steps_per_execution
    steps = args.steps or (16 if track == "vision" else 120)
    steps = max(spe, steps - steps % spe)
    warmup = args.warmup or 2 * spe + 4
    start = time.perf_counter()
    model.fit(train_ds, epochs=1, steps_per_epoch=warmup, verbose=0)
    compile_seconds = time.perf_counter() - start
    ours, eager, compiled, compile_seconds_peer = [], [], [], []
    compile_error = None
    ours_loaded, eager_loaded = [], []
    with_peer = args.peers and peer and peers_available

    def segment():
        start = time.perf_counter()
        model.fit(train_ds, epochs=1, steps_per_epoch=steps, verbose=0)
        return steps * units_per_step / (time.perf_counter() - start)

    rounds = args.pairs if with_peer or args.competing else min(args.pairs, 2)  # no ratio: 2 segments do
    bf16 = runtime.precision == "bf16"  # the peers under bfloat16 autocast: like with like
    for _ in range(rounds):
        ours.append(segment())
        if with_peer:
            eager.append(run_peer(peer, args, name, bf16=bf16, parameters=parameters)[0])
            if compile_error is None:
                rate, seconds, compile_error = compiled_peer(peer, args, name, bf16, parameters)
                if compile_error is None:
                    compiled.append(rate)
                    compile_seconds_peer.append(seconds)
                else:  # no ratio against a peer that did not run, in any round
                    compiled, compile_seconds_peer = [], []
        if args.competing:
            with Competitors(args.competing):
                ours_loaded.append(segment())
                if with_peer:
                    eager_loaded.append(run_peer(peer, args, name, bf16=bf16, parameters=parameters)[0])
    rate = statistics.median(ours)
    result = {
        "model": name,
        "description": description,
        f"{unit}_per_s": round(rate, 1),
        "ms_per_step": round(1000 * units_per_step / rate, 2),
        "compile_and_warmup_s": round(compile_seconds, 1),
        "peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "xla": xla_step_ran(model),
        "precision": runtime.precision,
        "steps_per_execution": spe,
        "device": runtime.device,
        "cpu_settings": runtime.cpu_settings,
        "parameters": parameters,
        "segments": [round(r, 1) for r in ours],
        f"training_flops_per_{unit[:-1]}": flops_per_unit,
        "gflops": round(rate * flops_per_unit / 1e9, 1),
    }
    for peer_name, rates in (("torch_eager", eager), ("torch_compile", compiled)):
        if rates:
            ratios = [o / t for o, t in zip(ours, rates)]
            result[f"{peer_name}_{unit}_per_s"] = [round(t, 1) for t in rates]
            result[f"ratio_vs_{peer_name}"] = round(statistics.median(ratios), 3)
            result[f"ratios_vs_{peer_name}"] = [round(r, 3) for r in ratios]
    if compile_seconds_peer:
        result["torch_compile_compile_s"] = compile_seconds_peer
    if compile_error:
        result["torch_compile_error"] = compile_error
    for who, quiet, loaded in (("ours", ours, ours_loaded), ("torch_eager", eager, eager_loaded)):
        if loaded:  # the slowdown of each round: its quiet segment over its loaded one
            slowdowns = [q / l for q, l in zip(quiet, loaded)]
            result[f"slowdown_{who}"] = round(statistics.median(slowdowns), 2)
            result[f"slowdowns_{who}"] = [round(value, 2) for value in slowdowns]
    if args.competing:
        result["competing_processes"] = args.competing
        # A fair share of the cores: this process gets 1 / (1 + N) of them.
        result["fair_share_slowdown"] = 1 + args.competing
    return result


def _torch_importable():
    import importlib.util

    return importlib.util.find_spec("torch") is not None


# The /proc/cpuinfo flags a reader needs to compare two runs: AVX-512 and the bfloat16 instructions
# that `--precision auto` looks for (cpu_settings.BF16_CPU_FLAGS).
CPU_FLAGS_OF_NOTE = ("avx2", "avx512f", *BF16_CPU_FLAGS)


def cpu_identity(cpuinfo_text):
    """{'model_name', 'family', 'model', 'flags'} of the first processor in /proc/cpuinfo's text.

    Two machines that Linux names alike ("AMD EPYC") measured 219 and 445-490
    GFLOP/s of float32 peak (benchmarks/NOTES.md, issue 53), so a result
    records the family and model numbers (AMD's family 25 is Zen 3 and 4, 26
    is Zen 5); `flags` keeps only `CPU_FLAGS_OF_NOTE`. Empty where the text
    names no processor (no /proc/cpuinfo: macOS, Windows).
    """
    identity = {}
    for line in cpuinfo_text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if not key and identity:
            break  # a blank line ends the first processor's entry
        if key == "model name":
            identity["model_name"] = value
        elif key in ("cpu family", "model") and value.isdigit():
            identity["family" if key == "cpu family" else "model"] = int(value)
        elif key == "flags":
            identity["flags"] = [flag for flag in CPU_FLAGS_OF_NOTE if flag in value.split()]
    return identity


def describe_cpu(identity):
    """'AMD EPYC, family 26 model 2: avx2, avx512f, avx512_bf16', or 'unknown' for an empty identity."""
    if not identity:
        return "unknown"
    numbers = (f", family {identity['family']} model {identity['model']}"
               if {"family", "model"} <= identity.keys() else "")
    flags = ", ".join(identity.get("flags", [])) or "none of " + ", ".join(CPU_FLAGS_OF_NOTE)
    return f"{identity.get('model_name', 'a CPU')}{numbers}: {flags}"


def _cpu_xla_default(track):
    import importlib

    return importlib.import_module(f"tracks.{track}.presets").CPU_XLA


def main(argv=None):
    args = parse_args(argv)
    load_before = os.getloadavg()
    print(f"load average (1, 5, 15 min): {', '.join(f'{value:.2f}' for value in load_before)}")
    peers_available = False
    if args.peers:
        peers_available = _torch_importable()
        if not peers_available:
            print("--peers: torch is not importable (pip install torch==2.13.0); running ours only")
    try:
        cpu = cpu_identity(pathlib.Path("/proc/cpuinfo").read_text())
    except OSError:
        cpu = {}
    environment, emulated_by = emulation(args.emulate_isa)
    emulated = (f"; emulating {args.emulate_isa.upper()} by {emulated_by} (benchmarks/emulate_isa.py)"
                if args.emulate_isa else "")
    print(f"CPU: {describe_cpu(cpu)} ({os.cpu_count()} cores){emulated}")
    print("fp32 peak (numpy's and TensorFlow's matrix products, 24 s) ...", flush=True)
    peak_before = machine_peak(environment)
    print(f"fp32 peak: {describe_peak(peak_before)}")
    results = []
    for name in args.models:
        # One process per model: separate peak memory, no shared compilation caches.
        command = [sys.executable, __file__, "--_one", name, *_forward(argv if argv is not None else sys.argv[1:])]
        finished = subprocess.run(command, capture_output=True, text=True, env=environment)
        lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
        if finished.returncode != 0 or not lines:
            print(f"{name}: failed\n{finished.stderr[-2000:]}")
            return 1
        results.append(json.loads(lines[-1]))
        results[-1]["fraction_of_peak"] = round(results[-1]["gflops"] / peak_before["best_gflops"], 3)
        print_table(results[-1:], header=not results[:-1])
        print(f"  {name}: {results[-1]['device']}")
    peak_after = machine_peak(environment)
    print(f"fp32 peak after the models: {describe_peak(peak_after)}")
    print(f"load average after (1, 5, 15 min): {', '.join(f'{value:.2f}' for value in os.getloadavg())}")
    meta = {"python": platform.python_version(), "cpu_count": os.cpu_count(), "cpu": cpu,
            "emulated_isa": args.emulate_isa, "emulated_by": emulated_by,
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "peers": peers_available, "fp32_peak_before": peak_before, "fp32_peak_after": peak_after}
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    print(f"written: {out}")
    return 0


def machine_peak(environment=None):
    """benchmarks/flops.py's fp32 peak, measured in a fresh process (no TensorFlow in this one), with
    `environment` (an emulation's caps) if given."""
    finished = subprocess.run([sys.executable, str(pathlib.Path(__file__).with_name("flops.py"))],
                              capture_output=True, text=True, check=True, env=environment)
    return json.loads(finished.stdout.strip().splitlines()[-1])


def describe_peak(peak):
    """'438.0 GFLOP/s (tensorflow 4096; numpy 1024: 230.1)': the peak, and each other library's best."""
    measured = peak["measured"]
    best_library = peak["best_of"].split()[0]
    others = []
    for library in sorted({name.split()[0] for name in measured} - {best_library}):
        name = max((name for name in measured if name.split()[0] == library),
                   key=lambda name: measured[name]["best_gflops"])
        others.append(f"; {name}: {measured[name]['best_gflops']}")
    return f"{peak['best_gflops']} GFLOP/s ({peak['best_of']}{''.join(others)})"


def _forward(argv):
    skip = {"--models"}
    forwarded, skipping = [], False
    for item in argv:
        if skipping:
            skipping = False
            continue
        if item in skip:
            skipping = True
            continue
        if item.startswith("--models="):
            continue
        forwarded.append(item)
    return forwarded


def print_table(results, header=True):
    if header:
        print(f"{'model':<10} {'throughput':>16} {'ms/step':>8} {'GFLOP/s':>8} {'of peak':>8} "
              f"{'compile s':>9} {'peak MB':>8} {'XLA':>5} {'prec':>5} {'spe':>4} {'vs eager':>9} "
              f"{'vs compile':>10}")
    for r in results:
        if "slowdown_ours" in r:
            peer = f", PyTorch eager {r['slowdown_torch_eager']:.2f}x" if "slowdown_torch_eager" in r else ""
            print(f"{r['model']}: with {r['competing_processes']} competing process(es), ours slows down "
                  f"{r['slowdown_ours']:.2f}x{peer} (a fair share of the cores: {r['fair_share_slowdown']}x)")
        unit = "images" if "images_per_s" in r else "tokens"
        rate = r[f"{unit}_per_s"]
        eager, compiled = r.get("ratio_vs_torch_eager"), r.get("ratio_vs_torch_compile")
        print(f"{r['model']:<10} {rate:>10.0f} {unit[:3]}/s {r['ms_per_step']:>8.1f} {r['gflops']:>8.1f} "
              f"{r.get('fraction_of_peak', 0):>8.0%} {r['compile_and_warmup_s']:>9.1f} "
              f"{r['peak_memory_mb']:>8} {str(r['xla']):>5} {r['precision']:>5} "
              f"{r['steps_per_execution']:>4} {'' if eager is None else f'{eager:.2f}x':>9} "
              f"{'' if compiled is None else f'{compiled:.2f}x':>10}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--_one":
        name = sys.argv[2]
        one_args = parse_args(sys.argv[3:])
        print(json.dumps(measure(name, one_args, _torch_importable())))
        sys.exit(0)
    sys.exit(main())
