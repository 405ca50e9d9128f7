"""The library on JAX and PyTorch without TensorFlow (issue 42).

.ci/run runs the whole library suite on JAX and PyTorch with TensorFlow
blocked (tests/tensorflow_blocker.py); these tests say so, and check the
blocker itself blocks, so that a green run means what it says.
"""

import os
import subprocess
import sys

import keras
import pytest

BLOCKING = os.environ.get("RESIDUAL_KERAS_TEST_WITHOUT_TENSORFLOW") == "1"


@pytest.mark.skipif(not BLOCKING, reason="TensorFlow is not blocked in this run (.ci/run blocks it on JAX and "
                                          "PyTorch: RESIDUAL_KERAS_TEST_WITHOUT_TENSORFLOW=1)")
def test_tensorflow_is_not_loaded_and_cannot_be():
    assert keras.backend.backend() in ("jax", "torch")
    import tensorflow_blocker

    assert tensorflow_blocker.blocked()
    assert not [name for name in sys.modules if name.split(".")[0] == "tensorflow" and sys.modules[name]]
    with pytest.raises(ModuleNotFoundError):
        import tensorflow  # noqa: F401


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_fresh_process_measures_a_model_with_tensorflow_blocked(backend):
    pytest.importorskip(backend, reason=f"{backend} is not installed (the 'backends' extra)")
    code = """
import tensorflow_blocker; tensorflow_blocker.install()
import numpy as np, residual_keras as rk, sys
model = rk.cifar_resnet(8, width=4)
x = np.random.default_rng(0).standard_normal((4, 32, 32, 3)).astype("float32")
y = np.arange(4) % 10
norms = rk.gradient_norms(model, x, y)
assert len(norms["names"]) == 3 and all(v > 0 for v in norms["stream_grad_norms"]), norms
assert np.isfinite(norms["loss"])
assert not [m for m in sys.modules if m.split(".")[0] == "tensorflow" and sys.modules[m]]
print("ok")
"""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "KERAS_BACKEND": backend,
           "PYTHONPATH": os.pathsep.join([os.path.dirname(tests), tests])}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]
