"""The instruments of residual_keras.diagnostics, each on a case with a known answer."""

import numpy as np
import pytest

import keras
import residual_keras as rk
from autodiff import gradient
from keras import layers, ops
from residual_keras import BasicBlock
from residual_keras.diagnostics import (
    activation_norms,
    gradient_norms,
    jacobian_norm,
    lesion,
    scalar_chain,
)
from residual_keras.models import cifar_resnet



# --------------------------------------------------------------------------
# Helpers: linear and hand-built stacks whose answers are known
# --------------------------------------------------------------------------


def dense_with_kernel(matrix):
    """A bias-free Dense layer computing `x @ matrix`."""
    dense = layers.Dense(matrix.shape[1], use_bias=False)
    dense.build((None, matrix.shape[0]))
    dense.kernel.assign(matrix)
    return dense


def residual(function):
    return lambda x: x + function(x)


class ConstantLinearBlock(layers.Layer):
    """`y = x + x @ A` (or `x @ A` when plain) with a fixed matrix A."""

    def __init__(self, matrix, residual=True, **kwargs):
        super().__init__(**kwargs)
        self.matrix = np.asarray(matrix, dtype="float32")
        self.residual = residual

    def call(self, x):
        branch = ops.matmul(x, self.matrix)
        return x + branch if self.residual else branch


class UnitRandomBranch(layers.Layer):
    """`y = x + (x / rms(x)) @ W`, W ~ N(0, 1/d): every branch adds RMS ~1."""

    def __init__(self, width, seed, **kwargs):
        super().__init__(**kwargs)
        self.matrix = np.random.default_rng(seed).normal(
            0.0, 1.0 / np.sqrt(width), (width, width)
        ).astype("float32")

    def call(self, x):
        rms = ops.sqrt(ops.mean(ops.square(x), axis=-1, keepdims=True))
        return x + ops.matmul(x / rms, self.matrix)


def block_stack(blocks, input_shape, num_classes=None):
    """A functional model: input -> blocks -> (optional pool + classifier)."""
    inputs = keras.Input(input_shape)
    x = inputs
    for block in blocks:
        x = block(x)
    if num_classes is not None:
        if len(input_shape) == 3:
            x = layers.GlobalAveragePooling2D(name="pool")(x)
        x = layers.Dense(num_classes, name="classifier")(x)
    return keras.Model(inputs, x)


# --------------------------------------------------------------------------
# scalar_chain
# --------------------------------------------------------------------------


def test_scalar_chain_worked_example_is_exact():
    chain = scalar_chain(-0.1, 50)
    assert chain["plain_gain"] == 1e-50  # exactly, not 1.0000000000000027e-50
    assert chain["residual_gain"] == pytest.approx(5.1537752e-3, rel=1e-8)
    assert chain["residual_gain"] == pytest.approx(0.9**50, rel=1e-14)
    np.testing.assert_array_equal(chain["depths"], np.arange(51))
    assert chain["plain"][0] == chain["residual"][0] == 1.0
    assert chain["plain"][2] == 0.01 and chain["residual"][2] == 0.81
    assert scalar_chain(-0.1, 51)["plain_gain"] == -1e-51  # the sign alternates
    assert scalar_chain("1/2", 3)["residual_gain"] == 3.375


@pytest.mark.parametrize(
    "alpha, depth, error",
    [(0.1, 0, ValueError), (float("nan"), 3, ValueError), (None, 3, TypeError)],
)
def test_scalar_chain_rejects_bad_input(alpha, depth, error):
    with pytest.raises(error):
        scalar_chain(alpha, depth)


# --------------------------------------------------------------------------
# jacobian_norm
# --------------------------------------------------------------------------


def test_jacobian_norm_of_linear_residual_stack_matches_numpy():
    rng = np.random.default_rng(0)
    width, depth = 12, 6
    scale = 0.4 / np.sqrt(width)
    matrices = [rng.normal(0, scale, (width, width)) for _ in range(depth)]
    stack = [residual(dense_with_kernel(matrix)) for matrix in matrices]
    x = rng.normal(size=(3, width)).astype("float32")
    result = jacobian_norm(stack, x, cumulative=True)

    # Row vectors: x_l = x_{l-1} (I + A_l), so x_L = x_0 (I + A_1) ... (I + A_L).
    identity = np.eye(width)
    product, prefix_norms = identity, []
    for matrix in matrices:
        product = product @ (identity + matrix)
        prefix_norms.append(np.linalg.norm(product, 2))
    expected_blocks = [np.linalg.norm(identity + matrix, 2) for matrix in matrices]

    assert result["total"].shape == (3,)  # one norm per example
    np.testing.assert_allclose(result["total"], prefix_norms[-1], rtol=1e-3)
    per_example = np.ones((1, 3))
    np.testing.assert_allclose(
        result["cumulative"], np.array(prefix_norms)[:, None] * per_example, rtol=1e-3
    )
    np.testing.assert_allclose(
        result["per_block"], np.array(expected_blocks)[:, None] * per_example, rtol=1e-3
    )
    assert result["names"] == [f"block{i}" for i in range(1, depth + 1)]
    assert result["converged"]


@pytest.mark.skipif(keras.backend.backend() == "jax",
                    reason="JAX's autodiff traces every function: one that reads a value in Python never runs there")
def test_jacobian_norm_of_a_function_that_cannot_be_traced_runs_it_eagerly():
    # Long power iterations are traced on TensorFlow; Python that reads a tensor's value cannot be traced.
    matrix = np.random.default_rng(5).normal(size=(6, 6)).astype("float32")

    def reads_its_input(x):
        if float(keras.ops.max(keras.ops.abs(x))) > 1e30:  # a value read in Python: no graph for this
            raise AssertionError("unreachable")
        return keras.ops.matmul(x, matrix)

    x = np.ones((2, 6), "float32")
    result = jacobian_norm([reads_its_input], x, num_iterations=40, tolerance=1e-7, per_block=False)
    np.testing.assert_allclose(result["total"], np.linalg.norm(matrix, 2), rtol=1e-4)
    assert result["iterations"] > 3  # past the eager start, where tracing is tried


def test_jacobian_bounds_with_small_branch_jacobians():
    """||J_f|| <= 0.2: residual norm in [0.8^L, 1.2^L], plain norm <= 0.2^L."""
    rng = np.random.default_rng(0)
    width, depth = 16, 20
    branches = []
    for _ in range(depth):
        matrix = rng.normal(size=(width, width))
        matrix /= np.linalg.norm(matrix, 2)  # ||W|| = 1, so ||J|| <= 0.2 * 1
        dense = dense_with_kernel(matrix)
        branches.append(lambda x, dense=dense: 0.2 * ops.tanh(dense(x)))
    x = rng.normal(size=(4, width)).astype("float32")

    residual_result = jacobian_norm([residual(f) for f in branches], x)
    plain_result = jacobian_norm(branches, x, per_block=False)

    assert np.all(residual_result["total"] >= 0.8**depth)
    assert np.all(residual_result["total"] <= 1.2**depth)
    assert np.all(residual_result["per_block"] >= 0.8 - 1e-6)
    assert np.all(residual_result["per_block"] <= 1.2 + 1e-6)
    assert np.all(plain_result["total"] <= 0.2**depth)
    assert np.all(plain_result["total"] > 0)  # tiny, but no underflow to 0


def test_jacobian_norm_of_tiny_plain_gain_does_not_underflow():
    """0.2^20 ~ 1e-14 times a product of random unit-norm matrices: ~1e-19."""
    rng = np.random.default_rng(0)
    width, depth = 16, 20
    matrices = [rng.normal(size=(width, width)) for _ in range(depth)]
    matrices = [0.2 * m / np.linalg.norm(m, 2) for m in matrices]
    x = rng.normal(size=(2, width)).astype("float32")
    result = jacobian_norm([dense_with_kernel(m) for m in matrices], x, per_block=False)
    expected = np.linalg.norm(np.linalg.multi_dot(matrices), 2)
    assert expected < 1e-18
    np.testing.assert_allclose(result["total"], expected, rtol=1e-3)


@pytest.mark.parametrize(
    "kwargs", [{"block": rk.blocks.zero_gamma_basic()}, {"block": rk.blocks.fixup()}], ids=["zero_gamma", "fixup"]
)
def test_zero_branch_resnets_start_as_the_identity(kwargs):
    rng = np.random.default_rng(0)
    model = cifar_resnet(20, width=4, input_shape=(16, 16, 3), **kwargs)
    x = rng.normal(size=(2, 16, 16, 3)).astype("float32")
    result = jacobian_norm(model, x)
    assert result["names"][0] == "stage1_block1" and len(result["names"]) == 9
    np.testing.assert_allclose(result["total"], 1.0, atol=1e-4)
    np.testing.assert_allclose(result["per_block"], 1.0, atol=1e-4)


def test_jacobian_norm_rejects_bad_input():
    with pytest.raises(TypeError):
        jacobian_norm([], np.zeros((1, 2), "float32"))
    with pytest.raises(ValueError, match="has no blocks: no layer implements the residual protocol"):
        jacobian_norm(block_stack([layers.Dense(2)], (2,)), np.zeros((1, 2), "float32"))


# --------------------------------------------------------------------------
# gradient_norms
# --------------------------------------------------------------------------


def test_gradient_norms_shapes_order_and_zero_gamma_branches():
    rng = np.random.default_rng(0)
    model = cifar_resnet(14, block=rk.blocks.zero_gamma_basic(), width=4, input_shape=(8, 8, 3))
    x = rng.normal(size=(4, 8, 8, 3)).astype("float32")
    result = gradient_norms(model, x)

    names = [f"stage{s}_block{b}" for s in (1, 2, 3) for b in (1, 2)]
    assert result["names"] == names
    assert result["stream_grad_norms"].shape == (7,)
    assert result["weight_names"] == [w.path for w in model.trainable_weights]
    assert result["weight_grad_norms"].shape == result["weight_norms"].shape == (
        len(model.trainable_weights),
    )
    assert result["loss"] > 0 and result["training"] is True
    labels = rng.integers(0, 10, size=4)
    crossentropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    expected_loss = float(crossentropy(labels, model(x, training=True)))
    for loss in (None, crossentropy):  # None: the default is this loss
        given = gradient_norms(model, x, labels, loss=loss)
        assert given["loss"] == pytest.approx(expected_loss, rel=1e-5)
    grads = dict(zip(result["weight_names"], result["weight_grad_norms"]))
    for name in names:  # the last gamma is 0, so nothing reaches the convolutions
        assert grads[f"{name}/branch1_conv/kernel"] == 0.0
        assert grads[f"{name}/branch2_conv/kernel"] == 0.0
        assert grads[f"{name}/branch2_norm/gamma"] > 0.0


def test_gradient_norms_of_linear_residual_stack_match_closed_form():
    rng = np.random.default_rng(0)
    width, depth, batch = 6, 5, 3
    scale = 0.5 / np.sqrt(width)
    matrices = [rng.normal(0, scale, (width, width)) for _ in range(depth)]
    blocks = [ConstantLinearBlock(m, name=f"linear{i}") for i, m in enumerate(matrices)]
    model = block_stack(blocks, (width,))
    direction = rng.normal(size=width).astype("float32")
    x = rng.normal(size=(batch, width)).astype("float32")

    result = gradient_norms(
        model,
        x,
        loss=lambda y_true, y_pred: ops.sum(y_pred * ops.convert_to_tensor(direction)),
        blocks=[block.name for block in blocks],
    )

    # dL/dx_L = direction for each example; dL/dx_{l-1} = dL/dx_l (I + A_l)^T.
    grad = np.tile(direction, (batch, 1)).astype("float64")
    expected = [np.linalg.norm(grad)]
    for matrix in reversed(matrices):
        grad = grad @ (np.eye(width) + matrix).T
        expected.append(np.linalg.norm(grad))
    np.testing.assert_allclose(result["stream_grad_norms"], expected[::-1], rtol=1e-5)
    assert result["gain"] == pytest.approx(expected[-1] / expected[0], rel=1e-5)


def test_gradient_gain_at_depth_residual_vs_plain():
    """50 BasicBlocks, width 8: the plain net's training-mode gain explodes."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4, 4, 8)).astype("float32")
    gains = {}
    for is_residual in (True, False):
        model = block_stack(
            [BasicBlock(8, residual=is_residual) for _ in range(50)], (4, 4, 8), 10
        )
        gains[is_residual] = gradient_norms(model, x)["gain"]
        if not is_residual:
            frozen = gradient_norms(model, x, training=False)["gain"]
    assert 3 < gains[True] < 300  # about 30
    assert gains[False] > 1e5  # about 6e6: BN batch statistics amplify
    assert gains[False] / gains[True] > 1e3
    assert frozen < 1e-3  # frozen statistics: the same gradient vanishes


# --------------------------------------------------------------------------
# activation_norms
# --------------------------------------------------------------------------


def test_activation_norms_grow_like_sqrt_depth_without_normalisation():
    rng = np.random.default_rng(0)
    width, depth = 256, 64
    blocks = [UnitRandomBranch(width, seed=i, name=f"unit{i}") for i in range(depth)]
    model = block_stack(blocks, (width,))
    x = rng.normal(size=(8, width)).astype("float32")  # RMS ~1
    result = activation_norms(model, x, blocks=[block.name for block in blocks])

    assert result["rms"].shape == (depth + 1, 8)
    np.testing.assert_array_equal(result["depths"], np.arange(depth + 1))
    rms = result["rms"].mean(axis=1)
    expected = np.sqrt(rms[0] ** 2 + np.arange(depth + 1))  # branches add in quadrature
    np.testing.assert_allclose(rms, expected, rtol=0.1)
    slope = np.polyfit(np.log(np.arange(16, depth + 1)), np.log(rms[16:]), 1)[0]
    assert 0.4 < slope < 0.6


def test_unnormalised_residual_stream_grows_exponentially_with_depth():
    """He-initialised branches as large as the stream: its variance roughly doubles per block.

    (The sqrt(L) law of the test above needs branches of a fixed size.)
    """
    x = np.random.default_rng(0).normal(size=(4, 32, 32, 3)).astype("float32")
    growth = {}
    for depth in (8, 20, 32):  # 3, 9, 15 blocks
        keras.utils.set_random_seed(0)
        rms = activation_norms(cifar_resnet(depth, block=rk.blocks.basic(norm="none"), width=8), x)["rms"]
        growth[depth] = float(rms.mean(axis=1)[-1] / rms.mean(axis=1)[0])
    per_block = [(growth[b] / growth[a]) ** (1 / 6) for a, b in ((8, 20), (20, 32))]
    assert all(factor > 1.25 for factor in per_block), per_block  # a factor per block: geometric
    keras.utils.set_random_seed(0)
    plain = activation_norms(cifar_resnet(32, block=rk.blocks.plain(norm="none"), width=8), x)["rms"].mean(axis=1)
    assert plain[-1] / plain[0] < growth[32] / 100


def test_activation_norms_of_cifar_resnet_match_block_outputs():
    rng = np.random.default_rng(0)
    model = cifar_resnet(8, width=4, input_shape=(8, 8, 3))
    x = rng.normal(size=(2, 8, 8, 3)).astype("float32")
    result = activation_norms(model, x, training=False)
    last = keras.Model(model.input, model.get_layer("stage3_block1").output)(x)
    expected = np.sqrt(np.mean(np.square(ops.convert_to_numpy(last)), axis=(1, 2, 3)))
    np.testing.assert_allclose(result["rms"][-1], expected, rtol=1e-5)


# --------------------------------------------------------------------------
# lesion
# --------------------------------------------------------------------------


def test_lesion_of_dead_block_changes_nothing_live_block_does():
    rng = np.random.default_rng(0)
    inputs = keras.Input((8, 8, 4))
    x = layers.Conv2D(4, 3, padding="same", name="stem")(inputs)
    x = BasicBlock(4, zero_gamma=True, name="dead")(x)  # branch == 0
    x = BasicBlock(4, name="live")(x)
    outputs = layers.Dense(5, name="classifier")(layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    # The same kernels and biases on every backend (their random streams differ):
    # on PyTorch's draw the classifier predicted one class for every image.
    for weight in model.trainable_weights:
        if weight.path.endswith(("kernel", "bias")):
            weight.assign(rng.normal(scale=0.3, size=weight.shape).astype("float32"))
    images = rng.normal(size=(64, 8, 8, 4)).astype("float32")
    logits_before = ops.convert_to_numpy(model(images))
    labels = logits_before.argmax(axis=-1)  # the intact model is 100% right

    accuracy = lesion(model, (images, labels), batch_size=32)
    crossentropy = lesion(model, (images, labels), metric="crossentropy")

    assert accuracy["names"] == ["dead", "live"]
    assert accuracy["intact"] == 1.0
    assert accuracy["lesioned"][0] == 1.0
    assert accuracy["lesioned"][1] < 0.9
    intact = crossentropy["intact"]
    assert crossentropy["lesioned"][0] == pytest.approx(intact, abs=1e-6)
    assert abs(crossentropy["lesioned"][1] - intact) > 0.01
    assert accuracy["removed_as"] == ["ReLU(shortcut(x))"] * 2
    np.testing.assert_array_equal(ops.convert_to_numpy(model(images)), logits_before)


def test_lesion_of_plain_net_skips_blocks_that_change_shape():
    rng = np.random.default_rng(0)
    model = cifar_resnet(8, block=rk.blocks.plain(), width=4, input_shape=(8, 8, 3))
    images = rng.normal(size=(6, 8, 8, 3)).astype("float32")
    labels = rng.integers(0, 10, size=6)
    batches = [(images[:4], labels[:4]), (images[4:], labels[4:])]  # any iterable
    result = lesion(model, batches)
    assert result["names"] == ["stage1_block1", "stage2_block1", "stage3_block1"]
    assert isinstance(result["lesioned"][0], float)
    assert result["lesioned"][1:] == [None, None]
    assert result["removed_as"][0] == "identity"
    assert result["removed_as"][1].startswith("shape changes")
    assert result["metric"] == "accuracy" and 0.0 <= result["intact"] <= 1.0


# --------------------------------------------------------------------------
# calibrate_batchnorm
# --------------------------------------------------------------------------


def test_calibrate_batchnorm_makes_inference_equal_training_on_the_batch():
    from residual_keras import cifar_resnet
    from residual_keras.diagnostics import calibrate_batchnorm

    model = cifar_resnet(8, width=4)
    x = np.random.default_rng(0).normal(size=(8, 32, 32, 3)).astype("float32")
    train = keras.ops.convert_to_numpy(model(x, training=True))
    before = keras.ops.convert_to_numpy(model(x, training=False))
    assert not np.allclose(before, train, atol=1e-3)
    assert calibrate_batchnorm(model, x) == 7  # stem + 2 per block x 3 blocks
    after = keras.ops.convert_to_numpy(model(x, training=False))
    # Keras' moving variance is the biased batch variance, as used in training.
    np.testing.assert_allclose(after, train, rtol=1e-3, atol=1e-4)
    assert all(layer.momentum == 0.9 for layer in model._flatten_layers()
               if isinstance(layer, keras.layers.BatchNormalization))


def test_a_zero_gamma_network_loses_the_gradient_on_the_streams_zero_entries():
    """Zero-gamma blocks start as ReLU(x): the gain is the share of the gradient where x_0 > 0, not 1."""
    inputs = keras.Input((8, 8, 3))
    x0 = keras.layers.ReLU(name="stem_relu")(keras.layers.Conv2D(4, 3, padding="same", name="stem")(inputs))
    x = x0
    for index in range(3):
        x = BasicBlock(4, zero_gamma=True, name=f"block{index + 1}")(x)
    model = keras.Model(inputs, keras.layers.Dense(5)(keras.layers.GlobalAveragePooling2D()(x)))
    images = np.random.default_rng(0).normal(size=(8, 8, 8, 3)).astype("float32")
    labels = np.random.default_rng(1).integers(0, 5, size=8)
    flow = gradient_norms(model, images, labels, training=False)
    stream = keras.ops.convert_to_numpy(keras.Model(inputs, x0)(images))
    head = keras.Sequential([model.layers[-2], model.layers[-1]])

    def loss_from(z):
        return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(labels, head(z), from_logits=True))

    at_output = gradient(loss_from, stream)  # x_L = ReLU(x_0) = x_0 at initialisation
    expected = np.linalg.norm(at_output * (stream > 0)) / np.linalg.norm(at_output)
    assert flow["gain"] == pytest.approx(expected, rel=1e-4)
    assert 0.3 < flow["gain"] < 0.9  # about half of the stem's ReLU outputs are 0
