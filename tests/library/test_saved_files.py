"""A `.keras` file saved by residual_keras 0.2.0 (a student's trained model) loads with the same outputs.

The files were made on the 0.2.0 commit by tests/fixtures/keras_0_2_0/make.py:
one small model per public block (every option that changes the layers it
holds), two whole `cifar_resnet`s and a Post-LN `transformer_lm`, with every
weight set to random values, and the outputs 0.2.0 computed from them.
"""

import pathlib

import numpy as np
import pytest

import keras
import residual_keras  # noqa: F401  (registers the layers the files name)

FOLDER = pathlib.Path(__file__).parents[1] / "fixtures" / "keras_0_2_0"
OUTPUTS = np.load(FOLDER / "outputs.npz")
NAMES = sorted(path.stem for path in FOLDER.glob("*.keras"))


def test_every_file_the_maker_lists_is_there():
    assert len(NAMES) == 16 and {key.split("/")[0] for key in OUTPUTS.files} == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_file_saved_by_0_2_0_loads_and_computes_what_0_2_0_computed(name):
    model = keras.saving.load_model(FOLDER / f"{name}.keras")
    x, expected = OUTPUTS[f"{name}/x"], OUTPUTS[f"{name}/y"]
    got = keras.ops.convert_to_numpy(model(x, training=False))
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-4 * scale)
