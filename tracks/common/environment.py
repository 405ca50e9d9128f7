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
  (`cpu_settings.apply_cpu_settings`, also the one line for a student's own script): its
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
`runtime.setup_runtime` for each run, from its config and its track.
"""

import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import sys
import tempfile

from tracks.common.config import ConfigError
from tracks.common.cpu_settings import apply_cpu_settings, check_cpu_variables
from tracks.common.option_ranges import place_problem, whole_number

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
        cpu_replicas = whole_number(replicas)
        if cpu_replicas is None or not 1 <= cpu_replicas <= MAX_CPU_REPLICAS:
            raise ConfigError(f"{REPLICAS_VARIABLE}={replicas!r}: use a whole number of logical CPU devices "
                              f"from 1 to {MAX_CPU_REPLICAS}, or leave it unset")
    check_cpu_variables(environ)
    fused = environ.get(FUSED_VARIABLE, "")
    if fused.strip().lower() not in FUSED_SWITCH:
        raise ConfigError(f"{FUSED_VARIABLE}={fused!r}: use 0 (Keras' own batch norm ops) or 1 (TensorFlow's fused "
                          f"kernel, the default), or leave it unset")
    return Environment(thread_spinning=spinning == "1", cpu_replicas=cpu_replicas)


def check_tensorflow_installed():
    """`ConfigError` saying what to install when TensorFlow is missing (the tracks train with it)."""
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


__all__ = ["Environment", "check_cache_directory", "check_strategy", "check_tensorflow_installed", "choose_tensorflow", "configure_process", "disable_thread_spinning", "read_environment", "thread_spinning", "use_tensorflow_backend"]
