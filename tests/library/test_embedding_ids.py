"""Out-of-range token ids (issue 42): refused in eager calls; traced behaviour as the docstring says.

On JAX an id outside the table gave NaN silently; TokenAndPositionEmbedding
now checks the ids wherever they have values. The traced cases pin the
per-backend behaviour its docstring states, so the docstring fails with it.
"""

import keras
import numpy as np
import pytest

from residual_keras import TokenAndPositionEmbedding


def _layer(**kwargs):
    return TokenAndPositionEmbedding(vocab_size=5, sequence_length=4, embed_dim=2, **kwargs)


@pytest.mark.parametrize("ids, bad", [([[1, 7]], 7), ([[-1, 2]], -1), ([[5, 5, 0]], 5)])
def test_an_id_outside_the_table_is_refused_in_an_eager_call(ids, bad):
    with pytest.raises(ValueError, match=rf"token id {bad} is outside \[0, 5\)"):
        _layer()(np.array(ids))


def test_ids_inside_the_table_are_looked_up_unchanged():
    layer = _layer(mask_zero=True)
    out = keras.ops.convert_to_numpy(layer(np.array([[0, 4, 2]])))
    table = keras.ops.convert_to_numpy(layer.token_embedding.embeddings)
    positions = keras.ops.convert_to_numpy(layer.position_embedding.embeddings)
    np.testing.assert_allclose(out[0], table[[0, 4, 2]] + positions[:3], rtol=1e-6)


def test_traced_lookups_behave_as_the_docstring_says():
    backend = keras.backend.backend()
    if backend == "torch":
        pytest.skip("PyTorch runs the layer eagerly: the eager check applies (tested above)")
    layer = _layer()
    model = keras.Sequential([keras.Input((2,), dtype="int32"), layer])
    model.compile(jit_compile=True)
    out = model.predict(np.array([[1, 7]]), verbose=0)
    if backend == "jax":
        assert np.isnan(out[0, 1]).all() and np.isfinite(out[0, 0]).all()
    else:  # TensorFlow under XLA clamps id 7 to the last row, 4: a finite, wrong row
        table = keras.ops.convert_to_numpy(layer.token_embedding.embeddings)
        positions = keras.ops.convert_to_numpy(layer.position_embedding.embeddings)
        np.testing.assert_allclose(out[0, 1], table[4] + positions[1], rtol=1e-6)
