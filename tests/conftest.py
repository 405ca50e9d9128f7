import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import pytest  # noqa: E402

# The tracks train with TensorFlow (tf.data, tf.distribute, tfds): their tests,
# and the notebooks' and the README's (which import or
# run the tracks), run on the TensorFlow backend.
# On JAX and PyTorch (`KERAS_BACKEND=jax pytest`, .ci/run) the library's
# tests run: layers, models, generate, plots, instruments.
TENSORFLOW_ONLY = [
    "test_benchmarks.py",
    "test_common.py",
    "test_data_identity.py",
    "test_diagnose_model.py",
    "test_docker.py",
    "test_fault_injection.py",
    "test_findings.py",
    "test_language_data.py",
    "test_language_track.py",
    "test_multiworker.py",
    "test_notebooks.py",
    "test_package.py",
    "test_readme.py",
    "test_report.py",
    "test_vision_data.py",
    "test_vision_pipeline.py",
    "test_vision_track.py",
    "test_xla.py",
]
collect_ignore = [] if keras.backend.backend() == "tensorflow" else TENSORFLOW_ONLY


@pytest.fixture(autouse=True)
def _seeded_and_clean(tmp_path_factory, monkeypatch):
    """Every test starts from the same seed and the default float32 policy,
    and caches decoded image folders in a temporary directory, not in ~/.cache."""
    monkeypatch.setenv("RESIDUAL_KERAS_CACHE", str(tmp_path_factory.mktemp("cache")))
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()
