"""Makes TensorFlow unimportable in this process, as if it were not installed.

The library must work on JAX and PyTorch without TensorFlow (issue 42).
tests/conftest.py calls `install()` first when RESIDUAL_KERAS_TEST_WITHOUT_TENSORFLOW=1
(.ci/run's JAX and PyTorch runs), so that an import of TensorFlow or of a package that
needs it fails the way it does where TensorFlow is missing.

A `None` in `sys.modules` is Python's own way to say "this module cannot be imported":
`import tensorflow` then raises `ModuleNotFoundError`, and `importlib.util.find_spec`
returns None, which is how other libraries (PyTorch's dynamo, Keras) probe for it.
"""

import sys

BLOCKED = ("tensorflow", "tensorflow_datasets", "tensorflow_text", "tf_keras", "tensorboard")


def install():
    """Blocks the packages in `BLOCKED`; refuses if one of them is imported already."""
    loaded = sorted(name for name in sys.modules
                    if name.split(".")[0] in BLOCKED and sys.modules[name] is not None)
    if loaded:
        raise RuntimeError(f"TensorFlow was imported before the blocker: {loaded[:3]}")
    for name in BLOCKED:
        sys.modules[name] = None


def blocked():
    """True when `install()` ran in this process."""
    return all(name in sys.modules and sys.modules[name] is None for name in BLOCKED)
