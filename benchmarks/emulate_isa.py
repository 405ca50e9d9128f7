"""A CPU of an older kind on this one: the environment that caps every library's instruction set.

    python benchmarks/throughput.py --emulate-isa avx2 --peers     # ours and the peers as on an AVX2 CPU
    python benchmarks/emulate_isa.py avx2 -- python -m tracks.vision # any command, capped the same way
    python benchmarks/emulate_isa.py avx2 --check                    # are the caps honoured here?

Most students' laptops have AVX2 and no AVX-512. On a machine with AVX-512
this runs a process as it would run on an AVX2 CPU, in one of two ways.

**CPUID masked (where Linux can trap CPUID: `cpuid_fault` in /proc/cpuinfo's
flags).** Libraries pick their kernels from the CPUID instruction's feature
bits. benchmarks/cpuid_avx2.c, built here with the system's C compiler and
preloaded (LD_PRELOAD), makes CPUID trap in the process and its children and
answers it with AVX-512's, AMX's and AVX10's bits cleared. Every library then
sees an AVX2 CPU of this one's family, as on AMD's Zen 2-3: oneDNN (in
TensorFlow and PyTorch), XLA's LLVM and its YNNPACK library, PyTorch's ATen
and inductor, MKL, OpenBLAS, numpy, and TensorFlow's own choice to turn oneDNN
on (off on AVX2, as on a real one). The variables below are set too; they
change nothing more there. glibc reads CPUID before a preloaded library loads,
so GLIBC_TUNABLES caps its string functions.

**Variables only (elsewhere, or with no C compiler).** Each library capped by
its own variable, as far as it lets itself be capped (measured on an Intel
Xeon with AMX, benchmarks/NOTES.md, issue 67):

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

There YNNPACK is replaced by a capped path: a real AVX2 machine runs XLA's
products through YNNPACK's AVX2 kernels, so the char GPT's step may be slower
than on a real one (on this CPU at full AVX-512 width, YNNPACK off cost the
GPT's step NOTES.md's figure).

What neither way changes: the cores themselves (clock, caches, memory, two
FMA units per core that AVX2 uses at 256 bits, as on AMD's Zen 2-3 and
Intel's client cores since Haswell). `--check` runs each library's float32
matrix product with and without the emulation and prints the rates, so the
caps can be seen to take effect.
"""

import argparse
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script: the repository's tracks/
from tracks.common.cpu_settings import read_cpu_flags  # noqa: E402  (standard library only: no TensorFlow)

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
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX2",
    },
}
# Where CPUID is not masked, YNNPACK (which reads it) is switched off and XLA's products take the capped path.
YNNPACK_OFF = "--xla_cpu_experimental_ynn_fusion_type="
# The C source of the CPUID mask for each emulation.
CPUID_MASKS = {"avx2": pathlib.Path(__file__).with_name("cpuid_avx2.c")}


def emulated_environment(isa, environ=None, cpuid_mask=None):
    """A copy of `environ` (default os.environ) capped to the instruction set `isa` ("avx2"; None: unchanged).

    `cpuid_mask`: the built CPUID mask (`build_cpuid_mask`), preloaded ahead of any LD_PRELOAD already set;
    without one, YNNPACK is switched off in XLA_FLAGS, since nothing else caps it. XLA_FLAGS are appended to
    any already set; the other variables replace theirs. TF_ENABLE_ONEDNN_OPTS is not set here: the package
    chooses it from the capped CPU kind (`cpu_settings.apply_cpu_settings`), as it would on a real CPU of
    that kind.
    """
    environment = dict(os.environ if environ is None else environ)
    if isa is None:
        return environment
    if isa not in EMULATIONS:
        raise ValueError(f"unknown instruction set {isa!r} to emulate; choose from {', '.join(EMULATIONS)}")
    for name, value in EMULATIONS[isa].items():
        if name == "XLA_FLAGS":
            value = value if cpuid_mask else f"{value} {YNNPACK_OFF}"
            if environment.get(name):
                value = f"{environment[name]} {value}"
        environment[name] = value
    if cpuid_mask:
        environment["LD_PRELOAD"] = " ".join(filter(None, (str(cpuid_mask), environment.get("LD_PRELOAD"))))
    return environment


def build_cpuid_mask(isa, cache=None, cpuinfo="/proc/cpuinfo"):
    """(path of the built CPUID mask for `isa`, None), or (None, why not): no `cpuid_fault` in `cpuinfo`'s
    flags (CPUID cannot be made to trap), no C compiler, or a failed build. Built once per source text into
    `cache` (default: this user's cache folder, not a shared temporary one, where another user could leave
    a library of the same name to be preloaded)."""
    if "cpuid_fault" not in (read_cpu_flags(cpuinfo) or ()):
        return None, "this CPU or kernel cannot trap CPUID (no cpuid_fault in /proc/cpuinfo)"
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None, "no C compiler (cc) to build benchmarks/cpuid_avx2.c"
    source = CPUID_MASKS[isa]
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    cache = pathlib.Path(cache or os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "residual_keras"
    library = cache / f"{source.stem}_{digest}.so"
    if library.exists():
        return library, None
    partial = library.with_suffix(f".{os.getpid()}.partial")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        built = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(partial), str(source), "-ldl"],
                               capture_output=True, text=True)
        if built.returncode != 0:
            return None, f"{source.name} did not build: {built.stderr.strip()[-300:]}"
        os.replace(partial, library)
    except OSError as error:  # a cache folder that cannot be written
        return None, f"{source.name} could not be built in {cache}: {error.strerror or error}"
    return library, None


def emulation(isa, environ=None):
    """(environment, how) for `isa`: CPUID masked where it can be, else the variables only; `how` says which."""
    if isa is None:
        return emulated_environment(None, environ), None
    library, why_not = build_cpuid_mask(isa)
    if library:
        how = f"CPUID masked ({CPUID_MASKS[isa].name}) and the caps' variables"
        return emulated_environment(isa, environ, library), how
    return emulated_environment(isa, environ), f"the caps' variables only, YNNPACK off ({why_not})"


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
from tensorflow.python.util import _pywrap_util_port
rates["tensorflow_onednn"] = bool(_pywrap_util_port.IsMklEnabled())  # TensorFlow's own choice, from CPUID
from numpy._core._multiarray_umath import __cpu_features__
rates["numpy_sees_avx512f"] = __cpu_features__["AVX512F"]
print(json.dumps(rates))
"""


def check(isa):
    """GFLOP/s per CPU-second of each library's float32 product on one thread, uncapped and capped (a CPU-time
    rate: it holds on a busy machine), and what the libraries say they see.

    Where AVX-512 runs 512 bits wide (Intel's Xeons), capped rates near half the uncapped ones show the caps
    took effect (AVX2's FMA is 256 bits wide). AMD's Zen 4 runs AVX-512 as two 256-bit halves, so there the
    rates stay close, and the libraries' own answers show it: PyTorch's capability, TensorFlow's choice of
    oneDNN, whether numpy sees AVX512F."""
    import json

    capped, how = emulation(isa)
    print(f"emulating {isa.upper()} by {how}")
    for label, environment in (("uncapped", dict(os.environ)), (f"capped to {isa}", capped)):
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
    environment, how = emulation(args.isa)
    print(f"emulating {args.isa.upper()} by {how}", file=sys.stderr)
    try:
        return subprocess.run(command, env=environment).returncode
    except OSError as error:  # no such program, or not one that can be run
        print(f"emulate_isa.py: cannot run {command[0]}: {error.strerror or error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
