"""A CPU of an older kind on this one: the environment that caps every library's instruction set.

    python benchmarks/throughput.py --emulate-isa avx2 --peers     # ours and the peers as on an AVX2 CPU
    python benchmarks/emulate_isa.py avx2 -- python -m tracks.vision # any command, capped the same way
    python benchmarks/emulate_isa.py avx2 --check                    # are the caps honoured here?

Most students' laptops have AVX2 and no AVX-512. On a machine with AVX-512
this runs a process as it would run on an AVX2 CPU, as far as each library
lets itself be capped (measured on this session's Intel Xeon with AMX,
benchmarks/NOTES.md, issue 67):

| library | variable | honoured |
| --- | --- | --- |
| oneDNN, in TensorFlow and in PyTorch (convolutions, BatchNorm, matrix products, and TensorFlow's own matrix products through oneDNN's sgemm, XLA's Eigen products included) | ONEDNN_MAX_CPU_ISA=AVX2 | yes (its verbose log names `avx2` kernels; float32 products at half the AVX-512 rate) |
| PyTorch's ATen kernels | ATEN_CPU_CAPABILITY=avx2 | yes (`torch.backends.cpu.get_cpu_capability()`) |
| PyTorch's BLAS (MKL) | MKL_ENABLE_INSTRUCTIONS=AVX2 | yes (rate halves) |
| numpy's OpenBLAS (the peak) | OPENBLAS_CORETYPE=Haswell | yes |
| XLA's compiled code (LLVM) | XLA_FLAGS=--xla_cpu_max_isa=AVX2 | yes |
| XLA's YNNPACK library (its matrix products by default) | none: it reads the CPU's own flags | **no**: it is switched off (`--xla_cpu_experimental_ynn_fusion_type=`), so XLA's products go to Eigen and oneDNN's sgemm, capped |
| glibc's string functions | GLIBC_TUNABLES (AVX-512 masked) | yes |
| TensorFlow's own (Eigen) kernels | none needed: the pip wheel is built without AVX2 and FMA for them, the same on any x86 CPU | |
| whether TensorFlow turns oneDNN on | none: it reads the CPU's flags | the package reads ONEDNN_MAX_CPU_ISA instead (tracks/common/cpu_settings.py: `cpu_kind`) and writes TF_ENABLE_ONEDNN_OPTS as it would on an AVX2 CPU |

What the caps cannot change: the cores themselves (clock, caches, memory,
two 256-bit FMA units per core as on AMD's Zen 2-3 and Intel's client cores
since Haswell). The one library the caps do not reach, YNNPACK, is replaced
by a capped path: a real AVX2 machine runs XLA's products through YNNPACK's
AVX2 kernels, so the emulated char GPT may be slower than a real one (on this
CPU at full AVX-512 width, YNNPACK off cost the GPT's step NOTES.md's figure).
`--check` runs each library's float32 matrix product with and without the
caps and prints the rates, so the caps can be seen to take effect.
"""

import argparse
import os
import subprocess
import sys

# glibc's string and memory functions use AVX-512 where the CPU has it; masked, as on an AVX2 CPU.
GLIBC_WITHOUT_AVX512 = ("glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX512_FP16,"
                        "-AVX512_BF16,-AVX512_VNNI,-AVX_VNNI")
EMULATIONS = {
    "avx2": {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "GLIBC_TUNABLES": GLIBC_WITHOUT_AVX512,
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX2 --xla_cpu_experimental_ynn_fusion_type=",
    },
}


def emulated_environment(isa, environ=None):
    """A copy of `environ` (default os.environ) capped to the instruction set `isa` ("avx2"; None: unchanged).

    XLA_FLAGS are appended to any already set; the other variables replace theirs. TF_ENABLE_ONEDNN_OPTS is
    not set here: the package chooses it from the capped CPU kind (`cpu_settings.apply_cpu_settings`), as
    it would on a real CPU of that kind.
    """
    environment = dict(os.environ if environ is None else environ)
    if isa is None:
        return environment
    if isa not in EMULATIONS:
        raise ValueError(f"unknown instruction set {isa!r} to emulate; choose from {', '.join(EMULATIONS)}")
    for name, value in EMULATIONS[isa].items():
        if name == "XLA_FLAGS" and environment.get(name):
            value = f"{environment[name]} {value}"
        environment[name] = value
    return environment


CHECK = """
import json, os, time
for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[name] = "1"  # one thread: a CPU-time rate then counts instructions, not threads waiting
def rate(multiply, size=1024, seconds=1.5):
    multiply(); start = time.process_time(); count = 0
    while time.process_time() - start < seconds:
        multiply(); count += 1
    return round(2 * size**3 * count / (time.process_time() - start) / 1e9, 1)
import numpy as np
a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
rates = {"numpy": rate(lambda: a @ a)}
import torch
t = torch.from_numpy(a); rates["torch"] = rate(lambda: t @ t)
rates["torch_capability"] = torch.backends.cpu.get_cpu_capability()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
x = tf.constant(a)
rates["tensorflow"] = rate(lambda: tf.matmul(x, x).numpy())
xla = tf.function(lambda x: tf.matmul(x, x), jit_compile=True)
rates["xla"] = rate(lambda: xla(x).numpy())
print(json.dumps(rates))
"""


def check(isa):
    """GFLOP/s per CPU-second of each library's float32 product on one thread, uncapped and capped (a CPU-time
    rate: it holds on a busy machine). Capped rates near half the uncapped ones mean the cap took effect (AVX2's FMA is 256
    bits wide, AVX-512's 512)."""
    import json

    for label, environment in (("uncapped", dict(os.environ)), (f"capped to {isa}", emulated_environment(isa))):
        finished = subprocess.run([sys.executable, "-c", CHECK], env=environment, capture_output=True, text=True)
        rates = json.loads(finished.stdout.strip().splitlines()[-1]) if finished.returncode == 0 else finished.stderr[-500:]
        print(f"{label}: {rates}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ours, command = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage="%(prog)s ISA (--check | -- COMMAND ...)")
    parser.add_argument("isa", choices=sorted(EMULATIONS))
    parser.add_argument("--check", action="store_true", help="compare each library's product rate with and without the caps")
    args = parser.parse_args(ours)
    if args.check:
        check(args.isa)
        return 0
    if not command:
        parser.error("give --check, or -- and the command to run capped")
    return subprocess.run(command, env=emulated_environment(args.isa)).returncode


if __name__ == "__main__":
    sys.exit(main())
