"""Where and how a run computes: device, precision, XLA and tf.distribute strategy.

Defaults follow measurement and the known Keras pitfalls: XLA (`jit_compile=True`) on GPUs; bfloat16 mixed
precision on GPUs that support it (compute capability >= 8.0); on a CPU the
track says whether bfloat16 is faster where the CPU has instructions for it
(AVX512_BF16 or AMX: benchmarks/NOTES.md, issue 53), whether XLA is faster, and whether TensorFlow's graph optimizer
(Grappler) is worth its time: on a small model's few hundred steps it is not
(a 20-layer MLP of 32 units: the first call of its training step 13.5 s with
Grappler, 7.3 s without, later steps equally fast). `jit_compile="auto"` is
never used, since Keras resolves it to "off" on a CPU and with tf.distribute.

TensorFlow's thread pools wait for work by spinning before they sleep; on a
machine shared with another CPU-bound program a spinning thread burns the
time slice its partner needs (benchmarks/NOTES.md, fourth pass), so
`environment.configure_process` turns spinning off (`environment.disable_thread_spinning`)
before TensorFlow makes its thread pools; `RESIDUAL_KERAS_THREAD_SPINNING=1`
keeps it. This module imports TensorFlow: a command imports it after
`configure_process`.
"""

import dataclasses
import os
import platform

import keras
import tensorflow as tf

from tracks.common.config import STRATEGIES
from tracks.common.cpu_settings import cpu_has_bf16, cpu_settings_in_effect, describe_cpu_settings
from tracks.common.environment import check_strategy, read_environment, thread_spinning


@dataclasses.dataclass(frozen=True)
class Runtime:
    device: str
    accelerator: bool
    precision: str  # "bf16" or "fp32", as resolved
    xla: bool
    strategy_name: str
    strategy: object = dataclasses.field(repr=False, compare=False)
    cpu_settings: dict | None = None  # cpu_settings.cpu_settings_in_effect(), on a CPU

    @property
    def num_replicas(self):
        return self.strategy.num_replicas_in_sync

    def steps_per_execution(self, requested):
        """`requested`, or 1 under a multi-replica strategy: Keras 3.15's multi-step
        loop fails inside tf.distribute (InvalidArgumentError in
        multi_step_on_iterator), so distributed runs take one step per call."""
        return 1 if self.num_replicas > 1 else requested

    def describe(self):
        return {
            "device": self.device,
            "precision": self.precision,
            "xla": self.xla,
            "strategy": self.strategy_name,
            "replicas": self.num_replicas,
            "thread_spinning": thread_spinning(),
            **({"cpu_settings": self.cpu_settings} if self.cpu_settings else {}),
            "versions": versions(),
        }


def versions():
    import numpy

    return {
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "numpy": numpy.__version__,
    }


def _gpu_details():
    gpus = tf.config.list_physical_devices("GPU")
    details = []
    for gpu in gpus:
        info = tf.config.experimental.get_device_details(gpu)
        details.append((info.get("device_name", gpu.name), info.get("compute_capability")))
    return details


def make_strategy(name, cpu_replicas=None):
    """The tf.distribute strategy for `name` ("none", "mirrored", "multiworker").

    `cpu_replicas` (tests): split the CPU into that many logical devices for a
    mirrored strategy, so data parallelism can be exercised without GPUs. Must
    be called before TensorFlow initialises its devices.
    """
    if name == "none":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        if cpu_replicas:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_replicas
            )
            devices = [f"/cpu:{i}" for i in range(cpu_replicas)]
            return tf.distribute.MirroredStrategy(devices)
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        check_strategy(name)
        return _reduce_per_tensor(tf.distribute.MultiWorkerMirroredStrategy())
    raise ValueError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")


def _reduce_per_tensor(strategy):
    """Lets Keras 3.15's `fit` run under MultiWorkerMirroredStrategy.

    Keras calls `strategy.reduce` on a whole (x, y) batch (its symbolic build)
    and with `axis=0` on scalar metrics; MultiWorkerMirroredStrategy accepts
    neither (keras-team/keras#20585: "Attempt to convert a value (PerReplica
    ...)", "Invalid reduction dimension 0"). This reduces each tensor of the
    structure on its own, and scalars across the replicas only, which is
    what Keras means in both places.
    """
    reduce = strategy.reduce

    def reduce_each(reduce_op, value, axis=None):
        def one(tensor):
            local = strategy.experimental_local_results(tensor)
            scalar = all(getattr(part, "shape", None) is not None and part.shape.rank == 0
                         for part in local)
            return reduce(reduce_op, tensor, axis=None if scalar else axis)

        return tf.nest.map_structure(one, value)

    strategy.reduce = reduce_each
    return strategy


def setup_runtime(precision="auto", xla="auto", strategy="none", *, cpu_xla=False, cpu_graph_optimizer=True,
                  cpu_bf16=False, seed=0, cpu_replicas=None):
    """Seeds everything, sets the global dtype policy and returns the `Runtime`.

    Args:
        precision: "auto" (bf16 on GPUs with compute capability >= 8, and on CPUs with AVX512_BF16 or AMX
            where `cpu_bf16`), "bf16", "fp32".
        xla: "auto" (on for GPUs, `cpu_xla` on a CPU), "on", "off".
        strategy: "none", "mirrored", "multiworker".
        cpu_xla: the track's measured choice of XLA on a CPU.
        cpu_bf16: the track's measured choice of bfloat16 on a CPU that has instructions for it
            (`cpu_settings.cpu_has_bf16`, read without TensorFlow).
        cpu_graph_optimizer: the track's measured choice of Grappler on a CPU
            (always on with an accelerator). Set for the whole process, every
            run: a run after another track's gets its own track's choice.
        seed: seeds Python, NumPy and the backend.
        cpu_replicas: logical CPU devices for a mirrored strategy, to try data
            parallelism without GPUs (default: $RESIDUAL_KERAS_CPU_REPLICAS, checked
            by `environment.read_environment`).
    """
    if cpu_replicas is None:
        cpu_replicas = read_environment().cpu_replicas
    strategy_object = make_strategy(strategy, cpu_replicas)  # before devices initialise
    keras.utils.set_random_seed(seed)
    gpus = _gpu_details()
    cpu_settings = None
    if gpus:
        name, capability = gpus[0]
        device = f"{len(gpus)} x GPU {name} (compute capability {capability})"
        bf16_ok = capability is not None and tuple(capability) >= (8, 0)
    else:
        cpu_settings = cpu_settings_in_effect()
        device = f"CPU ({os.cpu_count()} cores, {describe_cpu_settings(cpu_settings)})"
        bf16_ok = cpu_bf16 and cpu_has_bf16()
    if precision == "auto":
        precision = "bf16" if bf16_ok else "fp32"
    keras.config.set_dtype_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    use_xla = {"on": True, "off": False, "auto": bool(gpus) or cpu_xla}[xla]
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not (gpus or cpu_graph_optimizer)})
    return Runtime(
        device=device,
        accelerator=bool(gpus),
        precision=precision,
        xla=use_xla,
        strategy_name=strategy,
        strategy=strategy_object,
        cpu_settings=cpu_settings,
    )
