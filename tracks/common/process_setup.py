"""The process a command runs in: its environment read and checked, then TensorFlow set up, once.

Importing the tracks changes nothing in the process (no environment
variable, no TensorFlow, no Keras). A command first reads its arguments and
its environment with the standard library only (`read_environment` refuses a
bad value in one line), and only then calls `configure_process`, which:

- keeps TensorFlow's C++ info and warning lines out of the terminal
  (`TF_CPP_MIN_LOG_LEVEL=2` unless set; errors still show);
- makes Keras use TensorFlow (`use_tensorflow_backend`): the tracks train
  with tf.data and tf.distribute, while the library runs on any backend;
- sets TensorFlow up for this kind of CPU before it loads
  (`apply_cpu_settings`, also the one line for a student's own script): its
  oneDNN kernels on where TensorFlow leaves them off (CPUs without AVX512_VNNI,
  AVX512_BF16, AVX_VNNI or AMX: most AVX2 laptops), where they trained the
  models about twice as fast (benchmarks/NOTES.md, issue 67); the CPU's kind
  is read from /proc/cpuinfo, capped by ONEDNN_MAX_CPU_ISA as oneDNN is;
- imports TensorFlow and asks for thread pools that sleep instead of
  spinning (benchmarks/NOTES.md, fourth pass: beside another CPU-bound
  program a spinning pool burns the time slice its partner needs), unless
  `RESIDUAL_KERAS_THREAD_SPINNING=1`.

What belongs to one run rather than to the process (XLA, the dtype policy,
Grappler on a CPU, the tf.distribute strategy) is set by
`device_setup.setup_runtime` for each run, from its config and its track.
"""

import contextlib
import dataclasses
import json
import os
import re
import sys
import tempfile

from tracks.common.checks import place_problem
from tracks.common.config import ConfigError

SPINNING_VARIABLE = "RESIDUAL_KERAS_THREAD_SPINNING"
REPLICAS_VARIABLE = "RESIDUAL_KERAS_CPU_REPLICAS"
MAX_CPU_REPLICAS = 64  # logical CPU devices of a mirrored strategy on one CPU (a test of data parallelism)

WHY_TENSORFLOW = ("the tracks train with TensorFlow (tf.data, tf.distribute), while the residual_keras "
                  "layers and models work on any Keras backend")


@dataclasses.dataclass(frozen=True)
class Environment:
    """The environment variables a command reads, checked.

    Attributes:
        thread_spinning: $RESIDUAL_KERAS_THREAD_SPINNING is "1" (keep TensorFlow's
            spinning thread pools); "0" or unset: pools that sleep.
        cpu_replicas: $RESIDUAL_KERAS_CPU_REPLICAS, logical CPU devices for a
            mirrored strategy (to try data parallelism without GPUs), or None.
    """

    thread_spinning: bool = False
    cpu_replicas: int | None = None


FUSED_VARIABLE = "RESIDUAL_KERAS_FUSED_BATCHNORM"
# The spellings residual_keras/batchnorm.py reads (tests/tracks/test_bad_input.py keeps the two equal).
FUSED_SWITCH = {"0": False, "false": False, "off": False, "no": False,
                "": True, "1": True, "true": True, "on": True, "yes": True}
CACHE_VARIABLE = "RESIDUAL_KERAS_CACHE"


def check_cache_directory(environ=None):
    """`ConfigError` when $RESIDUAL_KERAS_CACHE (where decoded image folders are cached) cannot be one:
    a file, or under no writable directory. Read only where an image folder is the data."""
    environ = os.environ if environ is None else environ
    value = environ.get(CACHE_VARIABLE)
    if value is None:
        return
    if not value.strip():
        raise ConfigError(f"{CACHE_VARIABLE}='' names no directory: give one, or unset it (~/.cache/residual_keras)")
    problem = place_problem(value)
    if problem:
        raise ConfigError(f"{CACHE_VARIABLE}={value}: {problem}; give a directory you can write")


def read_environment(environ=None):
    """The checked `Environment` of `environ` (default: os.environ); `ConfigError` names a bad variable."""
    environ = os.environ if environ is None else environ
    spinning = environ.get(SPINNING_VARIABLE, "")
    if spinning not in ("", "0", "1"):
        raise ConfigError(f"{SPINNING_VARIABLE}={spinning!r}: use 1 (TensorFlow's thread pools spin) or 0 "
                          f"(they sleep, the default)")
    replicas = environ.get(REPLICAS_VARIABLE, "")
    cpu_replicas = None
    if replicas != "":
        if not replicas.strip().isdigit() or not 1 <= int(replicas) <= MAX_CPU_REPLICAS:
            raise ConfigError(f"{REPLICAS_VARIABLE}={replicas!r}: use a whole number of logical CPU devices "
                              f"from 1 to {MAX_CPU_REPLICAS}, or leave it unset")
        cpu_replicas = int(replicas)
    check_cpu_variables(environ)
    fused = environ.get(FUSED_VARIABLE, "")
    if fused.strip().lower() not in FUSED_SWITCH:
        raise ConfigError(f"{FUSED_VARIABLE}={fused!r}: use 0 (Keras' own batch norm ops) or 1 (TensorFlow's fused "
                          f"kernel, the default), or leave it unset")
    return Environment(thread_spinning=spinning == "1", cpu_replicas=cpu_replicas)


def check_tensorflow_installed():
    """`ConfigError` saying what to install when TensorFlow is missing (the tracks train with it)."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        raise ConfigError("the tracks train with TensorFlow, which is not installed here: pip install "
                          "tensorflow (the package's default install has it; the residual_keras library "
                          "alone runs on JAX and PyTorch too)")


def check_strategy(name, environ=None):
    """`ConfigError` when the strategy `name` cannot run here (before anything is written).

    multiworker needs TF_CONFIG: a JSON object with the cluster's workers and
    this process' task, e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]},
    "task": {"type": "worker", "index": 0}}.
    """
    from tracks.common.config import STRATEGIES

    environ = os.environ if environ is None else environ
    if name not in STRATEGIES:
        raise ConfigError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    if name != "multiworker":
        return
    text = environ.get("TF_CONFIG")
    if not text:
        raise ConfigError(
            "--strategy multiworker needs the TF_CONFIG environment variable describing the "
            "cluster (see the README's multi-machine section)"
        )
    try:
        tf_config = json.loads(text)
        workers = tf_config["cluster"]["worker"]
        index = tf_config["task"]["index"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ConfigError(
            'TF_CONFIG must be JSON like {"cluster": {"worker": ["host:port", ...]}, '
            f'"task": {{"type": "worker", "index": 0}}}}; got {text[:200]!r}'
        ) from None
    if not isinstance(workers, list) or isinstance(index, bool) or not isinstance(index, int) or not (
            0 <= index < len(workers)):
        raise ConfigError(f"TF_CONFIG's task index {index!r} does not name one of its "
                          f"{len(workers) if isinstance(workers, list) else 0} workers")


def _configured_backend():
    """The backend a user chose: KERAS_BACKEND, else keras.json's, else None."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    try:
        with open(os.path.join(home, "keras.json")) as handle:
            return json.load(handle).get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def use_tensorflow_backend():
    """Makes Keras use TensorFlow in this process, or raises `ImportError` when it cannot.

    With another backend chosen (KERAS_BACKEND or keras.json) it says so in
    one line and uses TensorFlow. Once Keras runs on another backend in this
    process (a notebook, a test session) the tracks cannot run there.
    """
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        backend = keras.backend.backend()
        if backend != "tensorflow":
            raise ImportError(
                f"Keras already runs on the {backend} backend in this process, and {WHY_TENSORFLOW}. "
                f"Run the tracks in a new process (they choose TensorFlow themselves)."
            )
        return
    chosen = _configured_backend()
    if chosen and chosen != "tensorflow":
        print(f"note: Keras backend {chosen!r} chosen, but {WHY_TENSORFLOW}: this run uses TensorFlow.",
              file=sys.stderr, flush=True)
    os.environ["KERAS_BACKEND"] = "tensorflow"


def choose_tensorflow():
    """TensorFlow's log level and Keras' backend, set in the environment; imports nothing.

    The part of `configure_process` that `python -m tracks check` (the
    exercises' grader, which imports Keras only to grade) needs too.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    use_tensorflow_backend()


def disable_thread_spinning():
    """Asks TensorFlow for thread pools that sleep when idle instead of spinning; True if it took effect.

    Only possible before TensorFlow's runtime starts (its first operation):
    the pools are made then, from the context's ConfigProto, and no public
    API sets `experimental.disable_thread_spinning` in eager mode, so this
    writes the context's pending config. False once the runtime is running
    (the pools stay as they are).
    """
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.eager import context

    eager = context.context()
    if eager._initialized:
        return False
    config = config_pb2.ConfigProto()
    if eager._config is not None:
        config.CopyFrom(eager._config)
    config.experimental.disable_thread_spinning = True
    eager._config = config
    return True


def thread_spinning():
    """Whether TensorFlow's thread pools spin when idle (as its runtime was or will be made)."""
    from tensorflow.python.eager import context

    return not context.context().config.experimental.disable_thread_spinning


# A line of TensorFlow's C++ logging (absl's format: severity letter, date, time, thread, file:line]).
# Before absl is initialised the time is "00:00:<seconds since 1970>", after it "HH:MM:SS".
_NATIVE_LOG = re.compile(r"^([IWEF])\d{4} [\d:.]+ +\d+ [^ \]]+:\d+\] ")
# Start-up messages that are errors to TensorFlow and not to a run: no GPU on a machine that has CUDA's
# libraries (the tracks say which device they use themselves). Left out at any level above 0.
_START_UP_ERRORS = ("failed call to cuInit",)
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def filter_native_log(text, level):
    """The lines of `text` that TF_CPP_MIN_LOG_LEVEL=`level` lets through.

    TensorFlow's libraries log with absl before anything initialises absl's
    logging, and absl then writes every message to stderr whatever
    TF_CPP_MIN_LOG_LEVEL says (abseil-cpp#1718, tensorflow#102212): the
    "oneDNN custom operations are on" and "Could not find cuda drivers"
    lines, twice (each of TensorFlow's two shared libraries logs its own),
    and the failed cuInit on a machine without a GPU. A message below the
    level is dropped with the lines that continue it, and so is the cuInit
    error above level 0 (no GPU is not an error to a run); everything else
    (Python's warnings, other errors at or above the level) is kept.
    """
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        found = _NATIVE_LOG.match(line)
        if found:
            dropping = _SEVERITY[found.group(1)] < level or (level > 0 and any(
                message in line for message in _START_UP_ERRORS))
        elif line.strip() == _ABSL_BANNER:
            dropping = level > 0
        if not dropping:
            kept.append(line)
        elif not found and not line.strip() == _ABSL_BANNER and not line.startswith((" ", "To enable")):
            dropping = False  # not a continuation: a line of its own
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def native_log_filtered():
    """Within: what is written to file descriptor 2 (native code included) is held, then written back
    through `filter_native_log` at TF_CPP_MIN_LOG_LEVEL (the level the user set, or 2)."""
    try:
        level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    except ValueError:
        level = 2
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = filter_native_log(held.read().decode("utf-8", errors="replace"), level)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()


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

        from tracks.common.process_setup import apply_cpu_settings; apply_cpu_settings()

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


def configure_process(environment):
    """Sets up TensorFlow and Keras for the tracks in this process (see the module's docstring).

    Called once by a command, after its arguments and its `environment`
    (`read_environment`) were checked; calling it again changes nothing.
    TensorFlow's start-up lines below TF_CPP_MIN_LOG_LEVEL are left out
    (`native_log_filtered`): it loads, and finds its devices, in here.
    """
    choose_tensorflow()
    if "tensorflow" not in sys.modules:  # TensorFlow reads its settings once, when it loads
        apply_cpu_settings()
    with native_log_filtered():
        if not environment.thread_spinning:
            disable_thread_spinning()
        import tensorflow as tf

        tf.config.list_physical_devices()  # the device platforms start here, with their log lines


__all__ = ["CpuKind", "CpuSettings", "Environment", "apply_cpu_settings", "choose_cpu_settings", "cpu_kind", "check_cache_directory", "check_strategy", "check_tensorflow_installed", "choose_tensorflow", "configure_process", "disable_thread_spinning", "read_environment", "thread_spinning", "use_tensorflow_backend"]
