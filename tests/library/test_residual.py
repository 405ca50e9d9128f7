"""`Residual(branch)`: any branch as a block, and the residual protocol every block follows."""

import numpy as np
import pytest

import keras
from keras import layers
from layer_checks import run_layer_test
from residual_keras import (
    BasicBlock,
    BottleneckBlock,
    FixupBasicBlock,
    PreActBasicBlock,
    Residual,
    ResidualStep,
    TransformerBlock,
    check_residual_steps,
)
from residual_keras.steps import lesioned, residual_steps

X = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
IMAGES = np.random.default_rng(1).standard_normal((2, 8, 8, 4)).astype("float32")
SEQUENCES = np.random.default_rng(2).standard_normal((2, 5, 8)).astype("float32")


def _numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(tensor))


def _serialized(layer):
    return keras.saving.serialize_keras_object(layer)


def _mlp(width=6):
    return keras.Sequential([layers.Dense(12, activation="relu"), layers.Dense(width)], name="mlp")


@pytest.mark.parametrize(
    "kwargs, expected_shape",
    [
        ({"branch": _serialized(layers.Dense(6))}, (4, 6)),
        ({"branch": _serialized(layers.Dense(6)), "post": "relu"}, (4, 6)),
        ({"branch": _serialized(layers.Dense(6)), "residual": False}, (4, 6)),
        ({"branch": _serialized(layers.Dense(6)), "rezero": True}, (4, 6)),
        ({"branch": _serialized(layers.Dense(3)), "shortcut": _serialized(layers.Dense(3, use_bias=False)),
          "post": _serialized(layers.LayerNormalization())}, (4, 3)),
    ],
    ids=["x+f", "relu-after", "plain", "identity-init", "projection-post-ln"],
)
def test_residual_passes_the_layer_checks(tmp_path, kwargs, expected_shape):
    # Mixed precision on: the branch is deserialized under float32, the block computes in bfloat16/float16.
    run_layer_test(Residual, kwargs, X, expected_shape, tmp_path)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_branch_made_under_float32_works_in_a_mixed_block(policy):
    """Issue 40, case 3: Residual(Dense(8), dtype="mixed_bfloat16") failed on its first call (bf16 + f32)."""
    keras.utils.set_random_seed(0)
    branch = layers.Dense(6)
    block = Residual(branch, shortcut=layers.Dense(6, use_bias=False), post=layers.LayerNormalization(),
                     rezero=True, dtype=policy)
    block.build(X.shape)
    block.rezero_alpha.assign(0.5)
    output = block(X)
    compute = policy.removeprefix("mixed_")
    assert keras.backend.standardize_dtype(output.dtype) == compute
    x = keras.ops.convert_to_tensor(X)
    by_hand = block.post(block.shortcut(x) + 0.5 * branch(x))  # all in float32
    np.testing.assert_allclose(_numpy(keras.ops.cast(output, "float32")), _numpy(by_hand), atol=0.05)
    plain = Residual(layers.Dense(6), dtype=policy)
    assert keras.backend.standardize_dtype(plain(X).dtype) == compute


def test_under_a_mixed_policy_the_block_computes_in_bfloat16_and_alpha_stays_float32():
    keras.config.set_dtype_policy("mixed_bfloat16")
    block = Residual(_mlp(), rezero=True)
    output = block(keras.ops.cast(X, "bfloat16"))
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert all(variable.dtype == "float32" for variable in block.weights)


def test_the_equations():
    branch = _mlp()
    x = keras.ops.convert_to_tensor(X)
    f = _numpy(branch(x))
    np.testing.assert_allclose(_numpy(Residual(branch)(x)), X + f, rtol=1e-6)
    np.testing.assert_allclose(_numpy(Residual(branch, post="relu")(x)), np.maximum(X + f, 0), rtol=1e-6)
    np.testing.assert_allclose(_numpy(Residual(branch, residual=False)(x)), f, rtol=1e-6)  # same weights
    gated = Residual(branch, rezero=True)
    np.testing.assert_array_equal(_numpy(gated(x)), X)  # alpha = 0: exactly the identity
    gated.rezero_alpha.assign(0.5)
    np.testing.assert_allclose(_numpy(gated(x)), X + 0.5 * f, rtol=1e-6)
    assert gated.identity_scale() == 0.5


def test_rezero_starts_as_the_identity_and_alpha_learns():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    outputs = layers.Dense(1)(Residual(_mlp(), rezero=True, name="block")(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert model.get_layer("block").identity_scale() == 0.0
    model.fit(X, X[:, :1] ** 2, epochs=3, verbose=0)
    assert model.get_layer("block").identity_scale() != 0.0


@keras.saving.register_keras_serializable(package="test_residual")
class NormDense(layers.Layer):
    """A student's branch as Keras' guide writes one: sublayers made in __init__, no build, no output shape."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.norm = layers.LayerNormalization(name="norm")
        self.dense = layers.Dense(units, activation="relu", name="dense")

    def call(self, x):
        return self.dense(self.norm(x))

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_a_branch_without_build_or_output_shape_is_traced_built_and_saved(tmp_path, recwarn):
    inputs = keras.Input((6,))
    block = Residual(NormDense(6, name="branch"), name="block")
    model = keras.Model(inputs, block(inputs))
    assert tuple(model.output.shape) == (None, 6) and block.branch.dense.kernel.shape == (6, 6)
    x = keras.ops.convert_to_tensor(X)
    f = _numpy(block.branch.dense(block.branch.norm(x)))
    np.testing.assert_allclose(_numpy(model(x)), X + f, rtol=1e-6)
    with pytest.raises(ValueError, match=r"branch maps \(None, 6\) to \(None, 3\)"):
        Residual(NormDense(3))(inputs)
    assert not [w for w in recwarn if "build()" in str(w.message)], [str(w.message) for w in recwarn]
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(_numpy(loaded(x)), _numpy(model(x)), rtol=1e-6)


def test_bad_arguments_are_refused_with_what_to_do():
    with pytest.raises(TypeError, match="branch must be a Keras layer or model.*Sequential"):
        Residual(lambda x: x)
    with pytest.raises(TypeError, match="shortcut must be None"):
        Residual(layers.Dense(4), shortcut="identity")
    with pytest.raises(ValueError, match="rezero=True needs residual=True"):
        Residual(layers.Dense(4), residual=False, rezero=True)
    with pytest.raises(ValueError, match=r"branch maps \(4, 6\) to \(4, 3\), the shortcut to \(4, 6\).*1x1"):
        Residual(layers.Dense(3))(X)
    with pytest.raises(TypeError, match="post must be None, a Keras layer or an activation"):
        Residual(layers.Dense(6), post=3)


def test_a_keras_mask_reaches_the_branch_and_is_passed_on():
    tokens = keras.Input((5,), dtype="int32")
    embedding = layers.Embedding(10, 8, mask_zero=True)
    attention = TransformerBlock(num_heads=2, causal=False)
    x = Residual(attention, name="wrapped")(embedding(tokens))  # the TransformerBlock reads the mask
    model = keras.Model(tokens, layers.GlobalAveragePooling1D()(x))  # which the pool gets, passed on
    ids = np.array([[3, 4, 5, 0, 0], [1, 2, 3, 4, 5]], "int32")
    mask = ids != 0
    embedded = embedding(ids)
    stream = _numpy(embedded + attention(embedded, padding_mask=mask))  # x + f(x), f masked
    expected = (stream * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(_numpy(model(ids)), expected, rtol=1e-5, atol=1e-6)
    unmasked = _numpy(embedded + attention(embedded)).mean(axis=1)  # guard: the mask matters here
    assert not np.allclose(unmasked[0], expected[0], atol=1e-3)


# ---------------------------------------------------------------------------
# The protocol: every block's steps compute what the block computes
# ---------------------------------------------------------------------------

PROTOCOL_BLOCKS = {
    "basic": (lambda: BasicBlock(4), IMAGES),
    "basic-downsample-A": (lambda: BasicBlock(8, strides=2), IMAGES),
    "basic-plain": (lambda: BasicBlock(4, residual=False), IMAGES),
    "basic-no-final-relu": (lambda: BasicBlock(4, final_activation=False), IMAGES),
    "bottleneck-B": (lambda: BottleneckBlock(2, strides=2, shortcut="B"), IMAGES),
    "preact": (lambda: PreActBasicBlock(4), IMAGES),
    "preact-plain": (lambda: PreActBasicBlock(4, residual=False), IMAGES),
    "fixup": (lambda: FixupBasicBlock(8, strides=2, num_blocks=2), IMAGES),
    "pre-ln": (lambda: TransformerBlock(num_heads=2), SEQUENCES),
    "post-ln": (lambda: TransformerBlock(num_heads=2, norm_position="post"), SEQUENCES),
    "plain-post-ln": (lambda: TransformerBlock(num_heads=2, norm_position="post", residual=False), SEQUENCES),
    "rezero": (lambda: TransformerBlock(num_heads=2, rezero=True), SEQUENCES),
    "residual-post-ln": (lambda: Residual(layers.Dense(8), post=layers.LayerNormalization()), SEQUENCES),
}


@pytest.mark.parametrize("name", list(PROTOCOL_BLOCKS))
def test_every_block_describes_itself_exactly(name):
    make, x = PROTOCOL_BLOCKS[name]
    block = make()
    block(x)  # built
    if isinstance(block, FixupBasicBlock):  # conv2 starts at 0: give the branch a say
        block.conv2.kernel.assign(np.full(block.conv2.kernel.shape, 0.05, "float32"))
    if isinstance(block, TransformerBlock) and block.rezero:
        block.rezero_alpha.assign(0.7)
    assert check_residual_steps(block, x) < 1e-4


def test_masked_steps_compute_the_masked_block():
    block = TransformerBlock(num_heads=2, causal=False)
    padding = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32")
    block(SEQUENCES)
    assert check_residual_steps(block, SEQUENCES, padding_mask=padding) < 1e-4
    # Guard: the steps of an unmasked call describe another computation.
    x = keras.ops.convert_to_tensor(SEQUENCES)
    for step in residual_steps(block):
        x = step(x)
    masked = _numpy(block(SEQUENCES, padding_mask=padding))
    assert not np.allclose(_numpy(x)[0, :3], masked[0, :3], atol=1e-3)


def test_a_layer_whose_steps_lie_is_caught():
    class Lying(layers.Layer):
        def build(self, input_shape):
            self.dense = layers.Dense(input_shape[-1])

        def call(self, x):
            return keras.ops.relu(x + self.dense(x))

        def residual_steps(self, **unused):
            return [ResidualStep("", self.dense)]  # forgets the ReLU after the addition

    block = Lying()
    block(X)
    with pytest.raises(ValueError, match="do not compute what the layer computes"):
        check_residual_steps(block, X)


def test_lesioned_blocks_keep_what_follows_the_addition():
    relu_block = Residual(layers.Dense(6), post="relu")
    relu_block(X)
    function, description = lesioned(relu_block)
    np.testing.assert_array_equal(_numpy(function(keras.ops.convert_to_tensor(X))), np.maximum(X, 0))
    assert description == "ReLU(shortcut(x))"
    transformer = TransformerBlock(num_heads=2, norm_position="post")
    transformer(SEQUENCES)
    function, description = lesioned(transformer)
    assert description == "identity" and function(SEQUENCES) is SEQUENCES
    plain = BasicBlock(4, residual=False)
    plain(IMAGES)
    assert lesioned(plain) == (None, "plain")


def test_a_layer_without_the_protocol_is_named():
    with pytest.raises(TypeError, match="does not implement the residual protocol.*residual_keras.Residual"):
        residual_steps(layers.Dense(3))
