"""The test run a newcomer sees (issue 42): third-party noise filtered by exact message, ours visible.

A default suite printed 68,585 warnings, almost all Keras' NumPy-2 copy
DeprecationWarning; a new warning could not stand out. This runs pytest,
with the project's own configuration, on a small test file that triggers
that warning and fits a model on a dataset as the tracks do, and reads the
summary line.
"""

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent('''
    import warnings

    import keras
    import numpy as np
    import tensorflow as tf


    def test_keras_noise_and_a_fit_on_a_dataset():
        variable = tf.Variable([1.0, 2.0])
        for _ in range(50):
            keras.ops.convert_to_numpy(variable)  # Keras' np.array(x): NumPy 2's copy warning
        inputs = keras.Input((2,))
        model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
        model.compile(optimizer="sgd", loss="mse")
        data = tf.data.Dataset.from_tensor_slices((np.ones((8, 2), "float32"), np.ones((8, 1), "float32"))).batch(4)
        model.fit(data, epochs=1, shuffle=False, verbose=0)  # as fit_with_backup calls it


    def test_a_new_warning_still_shows():
        warnings.warn("a warning nobody filtered", UserWarning)
''')


def test_the_known_third_party_warnings_are_filtered_and_a_new_one_shows(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(ROOT), str(probe)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-2000:]
    assert "2 passed, 1 warning" in summary, result.stdout[-3000:]
    assert "a warning nobody filtered" in result.stdout
