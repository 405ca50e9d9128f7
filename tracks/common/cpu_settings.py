"""The CPU's kind, and the TensorFlow settings chosen for it before TensorFlow loads (issue 67).

TensorFlow turns its oneDNN kernels on by itself only on CPUs with
AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX. On the AVX2 CPUs most laptops
have, it runs its own kernels, and ResNet-20 trained about half as fast
(benchmarks/NOTES.md). `apply_cpu_settings` reads the CPU's kind from
/proc/cpuinfo (capped by ONEDNN_MAX_CPU_ISA, as oneDNN is, so that an AVX2
CPU emulated on an AVX-512 machine is set up as a real one) and turns
oneDNN on where TensorFlow leaves it off. The tracks call it
(environment.configure_process); a student's own script calls it first:

    from tracks.common.cpu_settings import apply_cpu_settings; apply_cpu_settings()

Standard library only: nothing here loads TensorFlow except
`tensorflow_onednn_enabled` and `cpu_settings_in_effect`, which ask it.
"""

import dataclasses
import os
import sys

from tracks.common.config import ConfigError

# The CPU instructions oneDNN uses for bfloat16 convolutions and matrix products: AVX512_BF16 (Intel Cooper
# Lake and later, AMD Zen 4 and later) and AMX (Intel Sapphire Rapids and later), as Linux names them.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")

# The CPU's kind, read without TensorFlow: which instruction sets the CPU offers (/proc/cpuinfo's `flags`),
# capped where ONEDNN_MAX_CPU_ISA (or its older name DNNL_MAX_CPU_ISA) tells oneDNN to use no newer ones, so
# that a process capped to AVX2 on an AVX-512 machine (benchmarks/emulate_isa.py) is set up as on an AVX2 CPU.
ISA_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
_AVX2 = ("avx", "avx2", "fma")
_AVX512 = _AVX2 + ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd")
# oneDNN's names of its levels (dnnl_cpu_isa_t; the older names are aliases) and the flags each allows.
ONEDNN_ISA_FLAGS = {
    "SSE41": (),
    "AVX": ("avx",),
    "AVX2": _AVX2,
    "AVX2_VNNI": _AVX2 + ("avx_vnni",),
    "AVX2_VNNI_2": _AVX2 + ("avx_vnni", "avx_vnni_int8", "avx_ne_convert"),
    "AVX512_CORE": _AVX512,
    "AVX512_CORE_VNNI": _AVX512 + ("avx512_vnni",),
    "AVX512_CORE_BF16": _AVX512 + ("avx512_vnni", "avx512_bf16"),
    "AVX10_1_512": _AVX512 + ("avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni"),
    "AVX512_CORE_FP16": _AVX512 + ("avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni"),
    "AVX10_1_512_AMX": _AVX512 + ("avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
                                  "amx_int8", "amx_bf16"),
    "AVX512_CORE_AMX": _AVX512 + ("avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
                                  "amx_int8", "amx_bf16"),
}
NO_ISA_CAP = ("ALL", "DEFAULT", "AVX10_1_512_AMX_FP16", "AVX512_CORE_AMX_FP16")
# The flags an ISA cap can take away: the vector extensions above SSE4.1 (every avx*, fma, amx*).
_CAPPED_PREFIXES = ("avx", "fma", "amx")
# TensorFlow turns its oneDNN kernels on by itself on Linux only on CPUs with one of these (tensorflow/core/
# util/port.cc, DefaultOneDnnPolicy); elsewhere (AMD before Zen 4, Intel before Ice Lake and Alder Lake) it
# runs its own kernels, unless TF_ENABLE_ONEDNN_OPTS says otherwise.
TENSORFLOW_ONEDNN_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")


def read_cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The first processor's `flags` in /proc/cpuinfo, as a frozenset; None where the file has none (macOS,
    Windows, ARM's Linux, an unreadable file)."""
    try:
        with open(cpuinfo) as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def isa_cap(environ=None):
    """oneDNN's ISA cap in `environ` (ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA), upper case, or None.

    Raises:
        ConfigError: a value oneDNN does not know.
    """
    environ = os.environ if environ is None else environ
    for variable in ISA_CAP_VARIABLES:
        value = environ.get(variable, "").strip().upper()
        if value:
            if value not in ONEDNN_ISA_FLAGS and value not in NO_ISA_CAP:
                raise ConfigError(f"{variable}={environ[variable]!r}: not one of oneDNN's instruction-set levels "
                                  f"({', '.join((*ONEDNN_ISA_FLAGS, *NO_ISA_CAP))})")
            return None if value in NO_ISA_CAP else value
    return None


def capped_flags(flags, cap):
    """`flags` without the vector extensions the ISA level `cap` (oneDNN's name, or None) leaves out."""
    if cap is None:
        return frozenset(flags)
    allowed = set(ONEDNN_ISA_FLAGS[cap])
    return frozenset(flag for flag in flags if not flag.startswith(_CAPPED_PREFIXES) or flag in allowed)


@dataclasses.dataclass(frozen=True)
class CpuKind:
    """What a CPU offers the kernels that train the models, read without TensorFlow.

    Attributes:
        isa: "avx512" (AVX-512F), "avx2" (AVX2 and FMA, no AVX-512), "older" (an x86 CPU with neither), or
            "unknown" (no /proc/cpuinfo flags: macOS, Windows, ARM).
        tensorflow_onednn: whether TensorFlow turns its oneDNN kernels on by itself on this CPU
            (`TENSORFLOW_ONEDNN_FLAGS`; None where the kind is unknown).
        bf16: AVX512_BF16 or AMX (`BF16_CPU_FLAGS`): instructions for bfloat16 arithmetic.
        cap: the ISA cap the flags were read under (ONEDNN_MAX_CPU_ISA), or None.
    """

    isa: str
    tensorflow_onednn: bool | None
    bf16: bool
    cap: str | None = None

    def describe(self):
        """'AVX2 (capped by ONEDNN_MAX_CPU_ISA=AVX2)', 'AVX-512', ..."""
        name = {"avx512": "AVX-512", "avx2": "AVX2", "older": "no AVX2", "unknown": "instruction sets unknown"}
        return name[self.isa] + (f" (capped by ONEDNN_MAX_CPU_ISA={self.cap})" if self.cap else "")


def cpu_kind(cpuinfo="/proc/cpuinfo", environ=None):
    """The `CpuKind` of this machine's CPU, as capped by ONEDNN_MAX_CPU_ISA in `environ` (default os.environ)."""
    flags = read_cpu_flags(cpuinfo)
    cap = isa_cap(environ)
    if flags is None:
        return CpuKind("unknown", None, False, cap)
    flags = capped_flags(flags, cap)
    isa = "avx512" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags else "older"
    return CpuKind(isa, any(flag in flags for flag in TENSORFLOW_ONEDNN_FLAGS),
                   any(flag in flags for flag in BF16_CPU_FLAGS), cap)


def cpu_has_bf16(cpuinfo="/proc/cpuinfo", environ=None):
    """True when the CPU has an instruction set for bfloat16 arithmetic (`BF16_CPU_FLAGS`), read without
    TensorFlow from Linux's /proc/cpuinfo and capped by ONEDNN_MAX_CPU_ISA; False where that file is missing
    (macOS, Windows) or unreadable."""
    return cpu_kind(cpuinfo, environ).bf16


CPU_SETTINGS_VARIABLE = "RESIDUAL_KERAS_CPU_SETTINGS"
CPU_SETTINGS_MODES = ("auto", "tensorflow")
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
# The values TensorFlow's ReadBoolFromEnvVar takes (case-insensitive); anything else it ignores with a warning.
_TENSORFLOW_BOOLEANS = {"0": False, "false": False, "1": True, "true": True}
# The kinds on which oneDNN's kernels were measured faster than TensorFlow's own where TensorFlow leaves them
# off (benchmarks/NOTES.md, issue 67: AVX2, real and emulated: ResNet-20 about 2x, the char GPT about 2x).
ONEDNN_FASTER_ON = ("avx2", "avx512")


@dataclasses.dataclass(frozen=True)
class CpuSettings:
    """How TensorFlow computes on this CPU, chosen before it loads.

    Attributes:
        kind: the CPU's `CpuKind`.
        onednn: TensorFlow's oneDNN kernels on (TF_ENABLE_ONEDNN_OPTS), as chosen; None: left to TensorFlow
            on a CPU whose kind is unknown.
        chosen_by: "residual_keras" (this CPU kind trains faster with a setting TensorFlow does not pick
            itself), "tensorflow" (TensorFlow's own default for this kind), or "environment" (the user
            set TF_ENABLE_ONEDNN_OPTS).
        variables: the environment variables this choice sets ({} where it leaves them).
    """

    kind: CpuKind
    onednn: bool | None
    chosen_by: str
    variables: dict

    def describe(self):
        """'AVX2; oneDNN on (residual_keras's choice: TensorFlow's default here is off)', ..."""
        if self.onednn is None:
            return f"{self.kind.describe()}; oneDNN as TensorFlow chooses"
        state = "on" if self.onednn else "off"
        why = {"residual_keras": f"residual_keras's choice: TensorFlow's default here is "
                                 f"{'on' if self.kind.tensorflow_onednn else 'off'}",
               "tensorflow": "TensorFlow's default", "environment": f"{ONEDNN_VARIABLE} set"}[self.chosen_by]
        return f"{self.kind.describe()}; oneDNN {state} ({why})"

    def to_json(self):
        return {"cpu": self.kind.isa, "isa_cap": self.kind.cap, "tensorflow_onednn_default": self.kind.tensorflow_onednn,
                "onednn": self.onednn, "chosen_by": self.chosen_by, "variables": dict(self.variables)}


def check_cpu_variables(environ=None):
    """`ConfigError` for a value of RESIDUAL_KERAS_CPU_SETTINGS, TF_ENABLE_ONEDNN_OPTS or ONEDNN_MAX_CPU_ISA
    that would be ignored (TensorFlow warns and uses its default for a bad TF_ENABLE_ONEDNN_OPTS)."""
    environ = os.environ if environ is None else environ
    mode = environ.get(CPU_SETTINGS_VARIABLE, "")
    if mode not in ("", *CPU_SETTINGS_MODES):
        raise ConfigError(f"{CPU_SETTINGS_VARIABLE}={mode!r}: use auto (the settings measured fastest on this "
                          f"kind of CPU, the default) or tensorflow (TensorFlow's own defaults)")
    onednn = environ.get(ONEDNN_VARIABLE)
    if onednn is not None and onednn.strip().lower() not in _TENSORFLOW_BOOLEANS:
        raise ConfigError(f"{ONEDNN_VARIABLE}={onednn!r}: use 1 (TensorFlow's oneDNN kernels on) or 0 (off), "
                          f"or leave it unset (this CPU's setting is then chosen for you)")
    isa_cap(environ)


def choose_cpu_settings(kind, environ=None):
    """The `CpuSettings` for a CPU of `kind`: TensorFlow's oneDNN kernels on where TensorFlow leaves them
    off and they were measured faster (`ONEDNN_FASTER_ON`), else TensorFlow's default for the kind,
    written out (so that a process capped by ONEDNN_MAX_CPU_ISA gets the default of the CPU it stands
    for); the user's TF_ENABLE_ONEDNN_OPTS, or RESIDUAL_KERAS_CPU_SETTINGS=tensorflow, come first."""
    environ = os.environ if environ is None else environ
    check_cpu_variables(environ)
    given = environ.get(ONEDNN_VARIABLE)
    if given is not None:
        return CpuSettings(kind, _TENSORFLOW_BOOLEANS[given.strip().lower()], "environment", {})
    if kind.isa == "unknown":
        return CpuSettings(kind, None, "tensorflow", {})
    ours = (environ.get(CPU_SETTINGS_VARIABLE) or "auto") == "auto" and not kind.tensorflow_onednn and (
        kind.isa in ONEDNN_FASTER_ON)
    onednn = True if ours else kind.tensorflow_onednn
    return CpuSettings(kind, onednn, "residual_keras" if ours else "tensorflow",
                       {ONEDNN_VARIABLE: "1" if onednn else "0"})


# The variables that decide how TensorFlow computes on a CPU, recorded with every run.
CPU_VARIABLES = (ONEDNN_VARIABLE, *ISA_CAP_VARIABLES, CPU_SETTINGS_VARIABLE, "XLA_FLAGS")


def cpu_settings_in_effect(environ=None, cpuinfo="/proc/cpuinfo"):
    """How this process' TensorFlow computes on the CPU, for results.json (loads TensorFlow): the CPU's kind,
    TensorFlow's default for it, whether oneDNN's kernels really are on, and the variables that decided it."""
    environ = os.environ if environ is None else environ
    kind = cpu_kind(cpuinfo, environ)
    return {"cpu": kind.isa, "isa_cap": kind.cap, "tensorflow_onednn_default": kind.tensorflow_onednn,
            "onednn": tensorflow_onednn_enabled(),
            "variables": {name: environ[name] for name in CPU_VARIABLES if name in environ}}


def describe_cpu_settings(settings):
    """'AVX2; oneDNN on (TensorFlow's default here: off)' for `cpu_settings_in_effect`'s dict."""
    name = {"avx512": "AVX-512", "avx2": "AVX2", "older": "no AVX2", "unknown": "instruction sets unknown"}
    kind = name[settings["cpu"]] + (f", capped to {settings['isa_cap']}" if settings["isa_cap"] else "")
    default = settings["tensorflow_onednn_default"]
    note = "" if default is None or default == settings["onednn"] else (
        f" (TensorFlow's default here: {'on' if default else 'off'})")
    return f"{kind}; oneDNN {'on' if settings['onednn'] else 'off'}{note}"


def tensorflow_onednn_enabled():
    """Whether this process' TensorFlow runs its oneDNN kernels (loads TensorFlow)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def apply_cpu_settings(environ=None, cpuinfo="/proc/cpuinfo"):
    """Sets up this process to train as fast as the tracks do on this kind of CPU; call it first.

    The one line for your own script, before it imports keras, tensorflow or
    residual_keras (TensorFlow reads the setting once, when it loads):

        from tracks.common.cpu_settings import apply_cpu_settings; apply_cpu_settings()

    On a CPU without AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX (AMD before
    Zen 4, Intel before Ice Lake and Alder Lake) TensorFlow leaves its oneDNN
    kernels off; this turns them on (TF_ENABLE_ONEDNN_OPTS=1), which trained
    ResNet-20 and the char GPT about twice as fast there, and lets TensorFlow
    convolve `data_format="channels_first"` on a CPU (benchmarks/NOTES.md,
    issue 67). A value you set yourself is kept; so is TensorFlow's default
    with RESIDUAL_KERAS_CPU_SETTINGS=tensorflow. The tracks call it for you.

    Returns:
        The `CpuSettings` chosen (their `describe()` says what and why).

    Raises:
        RuntimeError: TensorFlow is already loaded with the other setting (restart Python and call this
            before any import of keras, tensorflow or residual_keras).
        ConfigError: a bad value of one of the variables it reads (`check_cpu_variables`).
    """
    environ = os.environ if environ is None else environ
    settings = choose_cpu_settings(cpu_kind(cpuinfo, environ), environ)
    if "tensorflow" in sys.modules and environ is os.environ:
        if settings.onednn is not None and tensorflow_onednn_enabled() != settings.onednn:
            raise RuntimeError(
                f"TensorFlow is already loaded, with its oneDNN kernels {'on' if tensorflow_onednn_enabled() else 'off'}"
                f": call apply_cpu_settings() before importing keras, tensorflow or residual_keras (in a notebook:"
                f" restart the kernel and run it in the first cell)")
        return settings
    environ.update(settings.variables)
    return settings


__all__ = ["BF16_CPU_FLAGS", "CPU_SETTINGS_MODES", "CPU_SETTINGS_VARIABLE", "CPU_VARIABLES", "CpuKind", "CpuSettings", "ISA_CAP_VARIABLES", "NO_ISA_CAP", "ONEDNN_FASTER_ON", "ONEDNN_ISA_FLAGS", "ONEDNN_VARIABLE", "TENSORFLOW_ONEDNN_FLAGS", "apply_cpu_settings", "capped_flags", "check_cpu_variables", "choose_cpu_settings", "cpu_has_bf16", "cpu_kind", "cpu_settings_in_effect", "describe_cpu_settings", "isa_cap", "read_cpu_flags", "tensorflow_onednn_enabled"]
