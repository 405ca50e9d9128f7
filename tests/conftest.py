"""What every test shares: the backend (TensorFlow unless KERAS_BACKEND says otherwise), a seeded,
clean Keras per test, and fixtures.

tests/library/ tests the package students import, on every Keras backend
(`KERAS_BACKEND=jax pytest`); tests/tracks/ tests the command lines and the
project around them (docs, Docker, notebooks), on TensorFlow only: its
conftest.py leaves itself out on other backends. The helpers the tests
import (layer_checks.py, track_helpers.py, ...) live here, in tests/.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# JAX compiles each function a test calls, and most are called once: its LLVM optimisation costs more than
# it saves (backend level 0; XLA's graph passes still run). Set it to 0 to test what a user's JAX compiles.
# The processes the tests start (test_cross_backend.py) inherit it. TensorFlow's XLA is left as it is: the
# same cut made the default suite slower. The timings of both are in docs/maintainers.md.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

if os.environ.get("RESIDUAL_KERAS_TEST_WITHOUT_TENSORFLOW") == "1":  # .ci/run, JAX and PyTorch
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        raise RuntimeError("RESIDUAL_KERAS_TEST_WITHOUT_TENSORFLOW=1 needs KERAS_BACKEND=jax or torch")
    import tensorflow_blocker  # noqa: E402  (tests/ is on the path: pyproject's pythonpath)

    tensorflow_blocker.install()

import contextlib  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import re  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from residual_keras.diagnostics import full_float32  # noqa: E402


# On an NVIDIA GPU since Ampere, TensorFlow and JAX multiply float32 matrices in TensorFloat-32 by
# default (and PyTorch convolves in it): products accurate to 1e-3, where the tests compare with float32
# answers to 1e-5 or 2e-4. The suite tests the package's arithmetic, so it runs inside the library's own
# switch for the whole session (held open, never closed); tests/library/test_precision.py allows
# TensorFloat-32 again to test the instruments' switch. On a CPU this changes nothing. Found on an H100:
# benchmarks/NOTES.md, "GPU: the library's tests on an H100".
_PRODUCTS_IN_FLOAT32 = contextlib.ExitStack()
_PRODUCTS_IN_FLOAT32.enter_context(full_float32())


def pytest_collection_finish(session):
    """Everything imported so far (TensorFlow, Keras, matplotlib, the package and its tests) lives as
    long as the process: out of the garbage collector's sight. `keras.backend.clear_session()` after
    every test runs a full collection, which otherwise scans those millions of objects each time
    (0.24 s a test here; 0.03 s after the freeze)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _seeded_and_clean(request, tmp_path_factory, monkeypatch):
    """Every test starts from the same seed and the default float32 policy,
    and caches decoded image folders in a temporary directory, not in ~/.cache.

    A module that builds no model opts out with `pytestmark = pytest.mark.no_keras_reset`
    (the reset costs about 0.03 s a test, once the imports are frozen).
    """
    if request.node.get_closest_marker("no_keras_reset"):
        yield
        return
    monkeypatch.setenv("RESIDUAL_KERAS_CACHE", str(tmp_path_factory.mktemp("cache")))
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()


@functools.cache
def _channels_first_conv_refusal():
    """Why a channels_first (NCHW) float32 convolution cannot run here, or None.

    TensorFlow's CPU kernels run NCHW only through oneDNN, which TensorFlow
    turns on by itself only on CPUs with AVX-512 (or with
    TF_ENABLE_ONEDNN_OPTS=1); elsewhere Conv2D refuses NCHW on the CPU."""
    try:
        keras.layers.Conv2D(1, 1, data_format="channels_first")(np.zeros((1, 1, 2, 2), "float32"))
    except Exception as error:  # the backend's own "unimplemented" error type
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        said = [line for line in lines if "NHWC" in line or "NCHW" in line] or lines[:1]
        return re.sub(r"\x1b\[[0-9;]*m|\{\{[^}]*\}\}", "", said[0]).strip()[:200]
    return None


@pytest.fixture
def channels_first_conv():
    """Skips a test, with the backend's own words, where NCHW convolutions cannot run."""
    refusal = _channels_first_conv_refusal()
    if refusal is not None:
        pytest.skip(f"no channels_first convolution on this machine ({keras.backend.backend()}, "
                    f"CPU without oneDNN): {refusal}")
