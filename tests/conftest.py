import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seeded_and_clean(tmp_path_factory, monkeypatch):
    """Every test starts from the same seed and the default float32 policy,
    and caches decoded image folders in a temporary directory, not in ~/.cache."""
    monkeypatch.setenv("RESIDUAL_KERAS_CACHE", str(tmp_path_factory.mktemp("cache")))
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()
