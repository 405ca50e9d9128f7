"""Every instrument on every model shape a student builds: it works, or says clearly why not.

The shapes (tests/model_shapes.py) are small versions of keras-io examples
ported onto the library's blocks: a miniature GPT returning [logits, x], an
EDSR-style global skip, nested stages, a subclassed ResNet, plus a
Sequential model and a functional model with one output.
"""

import numpy as np
import pytest

import keras
from keras import layers, ops
from model_shapes import SHAPES, SmallResNet, images, labels
from residual_keras import BasicBlock, PreActBasicBlock
from residual_keras import diagnostics as d


def _dynamics(model, x, y):
    callback = d.TrainingDynamics(x, y)
    callback.set_model(model)
    callback.on_epoch_begin(0)  # records epoch 0
    return {"names": [row["name"] for row in callback.rows],
            "gain": callback.rows[0]["gradient_gain"]}


INSTRUMENTS = {
    "gradient_norms": lambda m, x, y: d.gradient_norms(m, x, y),
    "gradient_norms(y=None)": lambda m, x, y: d.gradient_norms(m, x),
    "jacobian_norm": lambda m, x, y: d.jacobian_norm(
        m, x[:2], num_iterations=4, per_branch=True, cumulative=2),
    "activation_norms": lambda m, x, y: d.activation_norms(m, x),
    "lesion": lambda m, x, y: d.lesion(m, (x, y)),
    "delete_blocks": lambda m, x, y: d.delete_blocks(m, (x, y), draws=2),
    "swap_blocks": lambda m, x, y: d.swap_blocks(m, (x, y)),
    "lesion_sublayers": lambda m, x, y: d.lesion_sublayers(m, (x, y)),
    "path_gradients": lambda m, x, y: d.path_gradients(m, x, y, samples=2),
    "stream_contributions": lambda m, x, y: d.stream_contributions(m, x),
    "stream_decomposition": lambda m, x, y: d.stream_decomposition(m, x),
    "logit_lens": lambda m, x, y: d.logit_lens(m, x, y),
    "TrainingDynamics": _dynamics,
}

# Shapes whose blocks change the stream's shape (a downsampling block): the stream's sum
# and the logit lens need one shape along the stream.
DOWNSAMPLING = ("functional one output", "nested", "subclassed")
# Blocks x + f(x) with identity shortcuts and nothing after the addition: x_L = x_0 + sum f.
EXACT_SUM = ("two outputs", "global skip")

# (error type, message pattern) where an instrument cannot measure a shape; works elsewhere.
REFUSED = {
    **{(shape, "stream_decomposition"): (ValueError, "keep the stream's shape") for shape in DOWNSAMPLING},
    **{(shape, "logit_lens"): (ValueError, "must keep the stream's shape") for shape in DOWNSAMPLING},
    ("global skip", "gradient_norms(y=None)"): (ValueError, "random class labels.*mae.*pass y="),
}

BLOCK_NAMES = {
    "functional one output": ["block1", "block2", "block3"],
    "two outputs": ["transformer1", "transformer2"],
    "global skip": ["resblock1", "resblock2", "resblock3"],
    "nested": ["stage1/block1", "stage1/block2", "stage2/block1", "stage2/block2"],
    "Sequential": ["block1", "block2"],
    "subclassed": ["block1", "block2", "block3"],
}


def _finite(values):
    values = np.asarray([v for v in np.ravel(np.asarray(values, dtype=object)) if v is not None],
                        dtype="float64")
    return values.size > 0 and bool(np.all(np.isfinite(values)))


@pytest.mark.parametrize("instrument", list(INSTRUMENTS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_instrument_on_every_model_shape(shape, instrument):
    keras.utils.set_random_seed(0)
    model, x, y = SHAPES[shape]()
    before = [ops.convert_to_numpy(v).copy() for v in model.variables]
    refused = REFUSED.get((shape, instrument))
    if refused is not None:
        error, pattern = refused
        with pytest.raises(error, match=pattern):
            INSTRUMENTS[instrument](model, x, y)
        return
    result = INSTRUMENTS[instrument](model, x, y)
    names = BLOCK_NAMES[shape]
    count = len(names)
    if instrument == "path_gradients" and shape == "two outputs":  # paths choose at every step
        assert result["names"] == [f"{name} {step}" for name in names for step in ("attention", "feedforward")]
    else:
        assert result["names"][:count] == names if instrument == "TrainingDynamics" else result["names"] == names
    if instrument.startswith("gradient_norms"):
        assert result["stream_grad_norms"].shape == (count + 1,)
        assert _finite(result["stream_grad_norms"]) and np.all(result["stream_grad_norms"] > 0)
        assert np.isfinite(result["loss"]) and result["loss"] > 0
    elif instrument == "jacobian_norm":
        assert result["per_block"].shape == (count, 2) and _finite(result["per_block"])
        assert result["cumulative_depths"][-1] == count
        np.testing.assert_array_equal(result["cumulative"][-1], result["total"])
    elif instrument == "activation_norms":
        assert result["rms"].shape == (count + 1, len(x)) and np.all(result["rms"] > 0)
    elif instrument == "lesion":
        assert len(result["lesioned"]) == count and _finite(result["lesioned"] + [result["intact"]])
    elif instrument == "delete_blocks":
        assert result["candidates"] and _finite(result["mean"])
    elif instrument == "swap_blocks":
        assert len(result["swapped"]) == len(result["pairs"]) and np.isfinite(result["intact"])
    elif instrument == "path_gradients":
        assert result["gradient_share"].sum() == pytest.approx(1.0)
        steps = 2 * count if shape == "two outputs" else count  # a Transformer block: two steps
        assert len(result["gradient_per_path"]) == steps + 1
    elif instrument == "logit_lens":
        assert result["loss"].shape == (count + 1,) and _finite(result["loss"])
    elif instrument == "stream_decomposition":
        if shape in EXACT_SUM:
            assert result["relative_error"] < 1e-5  # Pre-LN, x + f(x): x_L is x_0 plus every update
        else:
            assert result["relative_error"] > 1e-3  # ReLU(x + f(x)): not a sum
    elif instrument in ("stream_contributions", "lesion_sublayers"):
        steps = ["attention", "feedforward"] if shape == "two outputs" else ["branch"]
        assert result["steps"] == steps and all(len(result[step]) == count for step in steps)
        assert _finite([result[step] for step in steps])
    elif instrument == "TrainingDynamics":
        assert len(result["names"]) == count and np.isfinite(result["gain"])
    after = [ops.convert_to_numpy(v) for v in model.variables]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))  # nothing changed


# --------------------------------------------------------------------------
# What each shape's numbers are, against a computation by hand
# --------------------------------------------------------------------------


def _numpy(tensor):
    return np.asarray(ops.convert_to_numpy(tensor))


def _rms(tensor):
    tensor = _numpy(tensor)
    return np.sqrt(np.mean(np.square(tensor.reshape(len(tensor), -1)), axis=1))


def test_two_outputs_use_the_logits_the_compiled_loss_is_for():
    model, x, y = SHAPES["two outputs"]()
    logits = model(x)[0]
    crossentropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    assert d.gradient_norms(model, x, y)["loss"] == pytest.approx(float(crossentropy(y, logits)), rel=1e-5)
    accuracy = np.mean(np.argmax(_numpy(logits), axis=-1) == y)
    assert d.lesion(model, (x, y))["intact"] == pytest.approx(accuracy)
    lens = d.logit_lens(model, x, y)
    assert lens["loss"][-1] == pytest.approx(float(crossentropy(y, logits)), rel=1e-5)
    with pytest.raises(ValueError, match="no loss for its output 1"):
        d.gradient_norms(model, x, y, output_index=1)  # the hidden state x: compiled with None
    uncompiled = keras.Model(model.inputs, model.outputs)
    with pytest.raises(ValueError, match="2 outputs.*output_index="):
        d.gradient_norms(uncompiled, x, y)
    assert d.gradient_norms(uncompiled, x, y, output_index=0)["loss"] == pytest.approx(
        float(crossentropy(y, logits)), rel=1e-5)


def test_a_global_skip_is_not_counted_as_a_path_through_the_blocks():
    """EDSR with zero-initialised blocks: through the blocks x_L = x_0, whatever the skip adds."""
    inputs = keras.Input((8, 8, 3))
    stem = layers.Conv2D(4, 3, padding="same")(inputs)
    x = stem
    for index in range(3):
        x = PreActBasicBlock(4, norm="none", zero_last_conv=True, name=f"resblock{index + 1}")(x)
    x = layers.Add()([layers.Conv2D(4, 3, padding="same")(x), stem])
    model = keras.Model(inputs, layers.Conv2D(3, 3, padding="same")(x))
    x, target = images(4), images(4, seed=5)
    jacobian = d.jacobian_norm(model, x, num_iterations=3)
    np.testing.assert_allclose(jacobian["total"], 1.0, rtol=1e-5)
    flow = d.gradient_norms(model, x, target, loss="mse")
    np.testing.assert_allclose(flow["stream_grad_norms"], flow["stream_grad_norms"][-1], rtol=1e-5)
    mse = float(np.mean((_numpy(model(x)) - target) ** 2))
    assert flow["loss"] == pytest.approx(mse, rel=1e-5)


def test_global_skip_lesion_uses_the_compiled_loss():
    model, x, y = SHAPES["global skip"]()
    result = d.lesion(model, (x, y))
    assert result["metric"] == "loss"
    assert result["intact"] == pytest.approx(float(np.mean(np.abs(_numpy(model(x)) - y))), rel=1e-5)
    with pytest.raises(ValueError, match="needs a classifier output"):
        d.lesion(model, (x, y), metric="accuracy")


def test_nested_stages_are_followed_into():
    model, x, _ = SHAPES["nested"]()
    result = d.activation_norms(model, x, training=False)
    stage2 = model.get_layer("stage2")
    stage1_out = model.get_layer("stage1")(model.get_layer("stem")(x))
    np.testing.assert_allclose(result["rms"][2], _rms(stage1_out), rtol=1e-5)  # x_2 = stage 1's output
    np.testing.assert_allclose(result["rms"][-1], _rms(stage2(stage1_out)), rtol=1e-5)
    with pytest.raises(ValueError, match="2 layers named 'block1' \\(stage1/block1, stage2/block1\\)"):
        d.activation_norms(model, x, blocks=["block1"])
    chosen = d.activation_norms(model, x, blocks=["stage2/block1", "stage2/block2"], training=False)
    assert chosen["names"] == ["block1", "block2"]
    np.testing.assert_allclose(chosen["rms"][0], result["rms"][2], rtol=1e-6)


@pytest.mark.filterwarnings("ignore:`build\\(\\)` was called")  # block1 of `skipping` never runs
def test_subclassed_blocks_are_ordered_as_the_forward_pass_calls_them():
    class Skipping(SmallResNet):
        def call(self, inputs, training=None):
            x = self.stem(inputs)
            x = self.stages[2](self.stages[1](keras.ops.tile(x, (1, 1, 1, 2))))  # block1 unused
            return self.head(self.pool(x))

    class Shuffled(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.late = BasicBlock(4, name="late")  # defined first, called second
            self.early = BasicBlock(4, name="early")
            self.head = layers.Dense(5)

        def call(self, inputs):
            x = self.late(self.early(inputs))
            return self.head(layers.GlobalAveragePooling2D()(x))

    model = Shuffled(name="shuffled")
    x = images()[..., :1].repeat(4, axis=-1)
    model(x)
    assert list(d.blocks(model)) == ["late", "early"]  # Keras' order
    assert d.gradient_norms(model, x, labels())["names"] == ["early", "late"]  # the forward pass's
    x = images()
    skipping = Skipping(name="skipping")
    skipping(x)
    with pytest.raises(ValueError, match="block1 of model 'skipping' did not run"):
        d.activation_norms(skipping, x)
    assert d.activation_norms(skipping, x, blocks=["block2", "block3"])["names"] == ["block2", "block3"]


def test_what_cannot_be_measured_is_named():
    shared = BasicBlock(4, name="shared")
    inputs = keras.Input((8, 8, 4))
    twice = keras.Model(inputs, shared(shared(inputs)), name="twice")
    with pytest.raises(ValueError, match="'shared' of model 'twice' is called more than once"):
        d.gradient_norms(twice, images(2)[..., :1].repeat(4, axis=-1))

    inputs = keras.Input((8, 8, 4))
    x = BasicBlock(4, name="first")(inputs)
    x = layers.Conv2D(4, 1, name="mixer")(x)
    x = BasicBlock(4, name="second")(x)
    model = keras.Model(inputs, layers.Dense(3)(layers.GlobalAveragePooling2D()(x)), name="mixed")
    batch = np.random.default_rng(0).normal(size=(2, 8, 8, 4)).astype("float32")
    with pytest.raises(ValueError, match="between 'first' and 'second' changes the stream"):
        d.path_gradients(model, batch)
    assert d.gradient_norms(model, batch)["names"] == ["first", "second"]  # the others measure it
