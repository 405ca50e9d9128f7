"""A run's needs, estimated from its config alone, against this machine's; refused unless `--force`.

Before anything is imported or written, each track estimates a new run from
its config (`Track.resources`): the memory it holds (the training data in
the host's memory; the weights, gradients, optimizer slots and one batch's
activations wherever the model computes) and its training time on a CPU.
A run that needs more memory than the machine has, or more than a day on a
CPU, is refused with the estimate; `--force` runs it anyway.

The machine is read without TensorFlow:
- memory: MemTotal of /proc/meminfo, else os.sysconf (pages x page size);
- an accelerator: a GPU device file (/dev/nvidia0, /dev/nvidia1, ...; /dev/dxg
  on WSL2; /dev/kfd for ROCm) that CUDA_VISIBLE_DEVICES does not hide ("" or
  "-1" hides every GPU). With one, the model's memory lies on the GPU (its
  size is not known without loading a driver), so only the data are set
  against the host's memory, and there is no CPU-time limit.
"""

import dataclasses
import glob
import os

from tracks.common.config import ConfigError

DAY_SECONDS = 24 * 3600
GPU_DEVICE_FILES = ("/dev/nvidia[0-9]*", "/dev/dxg", "/dev/kfd")


def usable_cores():
    """The cores this process may run on (its affinity, which taskset and containers narrow), else the CPU's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What a run needs, from its config: bytes of data and of model, seconds on a CPU."""

    data_bytes: float
    model_bytes: float
    cpu_seconds: float


def machine_memory_bytes(meminfo="/proc/meminfo"):
    """The machine's memory in bytes, or None when it cannot be read."""
    try:
        with open(meminfo) as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def accelerator_present(environ=None):
    """(True/False, how it was decided): a GPU device file that CUDA_VISIBLE_DEVICES does not hide."""
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False, f"CUDA_VISIBLE_DEVICES={visible!r} hides the GPUs"
    found = sorted(path for pattern in GPU_DEVICE_FILES for path in glob.glob(pattern))
    if found:
        return True, f"{found[0]} is present"
    return False, "no /dev/nvidia*, /dev/dxg or /dev/kfd"


def _gib(count):
    return f"{count / 2**30:.3g} GiB"


def _duration(seconds):
    days = seconds / DAY_SECONDS
    return f"{days:.3g} days" if days >= 1 else f"{seconds / 3600:.3g} hours"


def refuse_beyond_machine(estimate, *, force, memory=None, accelerator=None):
    """`ConfigError` with the estimate when the run exceeds this machine (nothing, with `force`).

    Args:
        estimate: the run's `Estimate`.
        force: the user's `--force`.
        memory: the machine's bytes (default: `machine_memory_bytes()`).
        accelerator: (present, how) (default: `accelerator_present()`).
    """
    if force or estimate is None:
        return
    memory = machine_memory_bytes() if memory is None else memory
    present, how = accelerator_present() if accelerator is None else accelerator
    needed = estimate.data_bytes + (0 if present else estimate.model_bytes)
    if memory and needed > memory:
        parts = (f"{_gib(estimate.data_bytes)} of data" + ("" if present else
                 f" and {_gib(estimate.model_bytes)} of weights, optimizer state and activations"))
        raise ConfigError(f"this run needs about {_gib(needed)} of memory ({parts}), more than this machine's "
                          f"{_gib(memory)}: lower the sizes, or add --force to try anyway")
    if not present and estimate.cpu_seconds > DAY_SECONDS:
        raise ConfigError(f"this run would train for about {_duration(estimate.cpu_seconds)} on this CPU "
                          f"(no GPU found: {how}), more than a day: lower the sizes, or add --force to "
                          f"run it anyway")


__all__ = ["DAY_SECONDS", "Estimate", "accelerator_present", "machine_memory_bytes", "refuse_beyond_machine",
           "usable_cores"]
