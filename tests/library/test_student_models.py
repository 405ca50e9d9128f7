"""Every instrument on the models students build (tests/student_models.py), on every backend.

Each (model, instrument) either works, with finite numbers and the model
unchanged, or fails with one clear error; the numbers that matter are then
checked against an independent computation: a hand-written autodiff
gradient, an exact SVD of the Jacobian, a forward pass written out by hand
with the masks, the block zeroed by hand.
"""

import re

import numpy as np
import pytest

import keras
import residual_keras as rk
from autodiff import gradient
from keras import ops
from residual_keras import diagnostics as d
from student_models import STUDENT_MODELS, GatedBlock, LoopNet, images, labels, masked_text_classifier

# The output the loss reads, for the models with several.
OUTPUT_INDEX = {"dict outputs": "cls", "list outputs": "cls"}


def _dynamics(model, x, y, output_index):
    callback = d.TrainingDynamics(x, y, output_index=output_index)
    callback.set_model(model)
    callback.on_epoch_begin(0)
    return {"names": [row["name"] for row in callback.rows], "gain": callback.rows[0]["gradient_gain"]}


def _landscape(model, x, y, output_index):
    """A 3 x 3 grid on four examples; `loss`, the description of the loss used (a string), left out."""
    result = d.loss_landscape(model, x[:4], keras.tree.map_structure(lambda target: target[:4], y), steps=3,
                              span=0.5, output_index=output_index)
    return {key: value for key, value in result.items() if key != "loss"}


INSTRUMENTS = {
    "gradient_norms": lambda m, x, y, o: d.gradient_norms(m, x, y, output_index=o),
    "gradient_norms(y=None)": lambda m, x, y, o: d.gradient_norms(m, x, output_index=o),
    "jacobian_norm": lambda m, x, y, o: d.jacobian_norm(m, x[:2], num_iterations=2, cumulative=True),
    "activation_norms": lambda m, x, y, o: d.activation_norms(m, x),
    "lesion": lambda m, x, y, o: d.lesion(m, x, y, output_index=o),
    "delete_blocks": lambda m, x, y, o: d.delete_blocks(m, x, y, draws=2, output_index=o),
    "swap_blocks": lambda m, x, y, o: d.swap_blocks(m, x, y, output_index=o),
    "lesion_sublayers": lambda m, x, y, o: d.lesion_sublayers(m, x, y, output_index=o),
    "path_gradients": lambda m, x, y, o: d.path_gradients(m, x, y, samples=2, output_index=o),
    "stream_contributions": lambda m, x, y, o: d.stream_contributions(m, x),
    "stream_decomposition": lambda m, x, y, o: d.stream_decomposition(m, x),
    "logit_lens": lambda m, x, y, o: d.logit_lens(m, x, y, output_index=o),
    "TrainingDynamics": _dynamics,
    "stream_delta_rank": lambda m, x, y, o: d.stream_delta_rank(m, x),
    "loss_landscape": _landscape,
}

SHAPE_CHANGING = "U-Net MSE"  # its down2 block halves the map
REFUSED = {
    **{("shared block", name): (ValueError, "'shared' of model 'shared_net' is called more than once")
       for name in INSTRUMENTS if name != "loss_landscape"},  # the loss landscape moves weights, not blocks
    (SHAPE_CHANGING, "gradient_norms(y=None)"): (ValueError, "random class labels.*mse.*pass y="),
    (SHAPE_CHANGING, "path_gradients"): (ValueError, "between 'bottom' and 'up1' changes the stream"),
    (SHAPE_CHANGING, "stream_decomposition"): (ValueError, "between 'bottom' and 'up1' changes the stream"),
    (SHAPE_CHANGING, "logit_lens"): (ValueError, "must keep the stream's shape"),
}


def _leaves(values):
    if isinstance(values, (list, tuple)):
        return [leaf for value in values for leaf in _leaves(value)]
    if isinstance(values, np.ndarray):
        return list(values.ravel())
    return [values]


def _finite(values):
    """Every number finite (an empty list, such as no swappable pair, has none to check)."""
    return bool(np.all(np.isfinite([float(v) for v in _leaves(values) if v is not None])))


def _variables(model):
    return [np.array(ops.convert_to_numpy(v), copy=True) for v in model.variables]


def _one(name, instrument):
    """Runs one instrument on a fresh student model: None when it behaved, else what went wrong."""
    keras.utils.set_random_seed(0)
    model, x, y = STUDENT_MODELS[name]()
    run = INSTRUMENTS[instrument]
    refused = REFUSED.get((name, instrument))
    if refused is not None:
        error, pattern = refused
        try:
            run(model, x, y, OUTPUT_INDEX.get(name))
        except error as caught:
            if not re.search(pattern, str(caught)):
                return f"refused with another message: {caught}"
            if "\n" in str(caught):
                return f"refused in more than one line: {caught}"
            return None
        return f"was expected to refuse with {pattern!r}, and did not"
    model(x)  # built (the never-called model has a test of its own below)
    before = _variables(model)
    result = run(model, x, y, OUTPUT_INDEX.get(name))
    if not all(np.array_equal(a, b) for a, b in zip(before, _variables(model))):
        return "the model changed"
    numbers = {key: value for key, value in result.items() if key not in (
        "model", "names", "weight_names", "labels", "steps", "metric", "removed_as", "pairs", "candidates",
        "removed", "training", "cumulative_depths", "per_branch", "converged", "iterations", "num_removed")}
    if not any(_leaves(value) for value in numbers.values()):
        return "measured nothing"
    if instrument == "stream_contributions":
        # Documented: no ratio (NaN or inf) where the stream entering a block is exactly 0. A ReLU after
        # the addition can zero a narrow stream: the gated net's 8 channels did for one example with
        # PyTorch's initial weights on a GPU, and for 1 seed in 60 on a CPU.
        dead = np.asarray(result["stream_rms"])[:-1] == 0  # (L, B): the stream entering each block
        numbers.update({step: np.where(dead, 0.0, numbers[step]) for step in result["steps"]})
    bad = [key for key, value in numbers.items() if value is not None and not _finite(value)]
    return f"numbers that are not finite: {bad}" if bad else None


def test_stream_contributions_has_no_ratio_where_the_stream_entering_a_block_is_zero():
    """As its docstring says: NaN where the stream is exactly 0 and the step writes 0 too; finite elsewhere."""
    keras.utils.set_random_seed(0)
    model, x, _ = STUDENT_MODELS["protocol layer"]()
    model.get_layer("stem").bias.assign(np.full(8, -100.0, "float32"))  # a stream below 0 everywhere
    model.get_layer("gated1").gate.assign(0.0)  # gated1 = ReLU(x + 0): every example's stream is zeroed
    result = d.stream_contributions(model, x)
    assert np.all(result["stream_rms"][1] == 0) and np.all(result["stream_rms"][0] > 0)
    assert np.all(result["branch"][0] == 0)  # gated1 writes 0 into a stream that is not 0
    assert np.all(np.isnan(result["branch"][1]))  # gated2 writes f(0) = 0 into a stream of 0: no ratio


@pytest.mark.parametrize("name", list(STUDENT_MODELS))
def test_every_instrument_on_every_student_model(name):
    """One model, every instrument: each works (finite numbers, the model unchanged) or refuses in one line."""
    problems = {instrument: _one(name, instrument) for instrument in INSTRUMENTS}
    problems = {instrument: problem for instrument, problem in problems.items() if problem}
    assert not problems, problems


# --------------------------------------------------------------------------
# The numbers, against independent computations
# --------------------------------------------------------------------------


def _numpy(tensor):
    return np.asarray(ops.convert_to_numpy(tensor))


def _crossentropy(y, logits):
    return float(ops.mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)))


def test_gradient_norms_of_an_mlp_resnet_match_a_hand_written_gradient():
    model, x, y = STUDENT_MODELS["Residual(Sequential)"]()
    result = d.gradient_norms(model, x, y, training=False)
    x0 = model.get_layer("stem")(x)
    blocks = [model.get_layer(f"res{index + 1}") for index in range(3)]

    def loss_from(z):
        for block in blocks:
            z = block(z)
        return ops.mean(keras.losses.sparse_categorical_crossentropy(y, model.get_layer("logits")(z),
                                                                     from_logits=True))

    expected = np.linalg.norm(gradient(loss_from, _numpy(x0)))
    assert result["stream_grad_norms"][0] == pytest.approx(expected, rel=1e-4)
    assert result["loss"] == pytest.approx(_crossentropy(y, model(x)), rel=1e-5)


def _exact_jacobian_norms(function, x0):
    """Per example, the largest singular value of d function / d x0 from the whole matrix (one VJP a row)."""
    outputs = _numpy(function(x0))
    norms = []
    for example in range(len(x0)):
        rows = []
        for unit in range(outputs.shape[1]):
            rows.append(gradient(lambda z, e=example, u=unit: function(z)[e, u], x0)[example])
        norms.append(np.linalg.svd(np.stack(rows), compute_uv=False)[0])
    return np.array(norms)


def test_jacobian_norm_of_a_protocol_layer_model_matches_an_exact_svd():
    model, x, _ = STUDENT_MODELS["protocol layer"]()
    x0 = _numpy(model.get_layer("stem")(x[:2]))
    blocks = [model.get_layer("gated1"), model.get_layer("gated2")]

    def stream(z):
        for block in blocks:
            z = block(z)
        return z

    result = d.jacobian_norm(model, x[:2], num_iterations=200, tolerance=1e-7)
    assert result["converged"]
    np.testing.assert_allclose(result["total"], _exact_jacobian_norms(stream, x0), rtol=1e-4)


def test_a_never_called_subclassed_model_is_built_and_measured():
    model = LoopNet(name="fresh")
    assert not model.built
    x, y = images(), labels()
    result = d.gradient_norms(model, x, y)
    assert result["names"] == ["block1", "block2", "block3"] and np.all(result["stream_grad_norms"] > 0)


def test_training_dynamics_in_fit_on_a_never_called_subclassed_model():
    model = LoopNet(name="fresh")
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = images(16), labels(16)
    dynamics = d.TrainingDynamics(x[:4], y[:4])
    model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[dynamics])
    assert sorted({row["epoch"] for row in dynamics.rows}) == [0, 1, 2]
    assert all(row["branch_ratio"] is not None for row in dynamics.rows)


def test_masked_text_decomposition_is_exact_on_padded_input():
    model, ids, _ = masked_text_classifier()
    assert (ids == 0).any()  # there is padding
    result = d.stream_decomposition(model, ids)
    assert result["relative_error"] < 1e-5


def _masked_forward(model, ids, remove_feedforward_of=None):
    """The text classifier written out by hand, the padding mask passed to every block and the pool."""
    embed, pool, head = model.get_layer("embed"), model.get_layer("pool"), model.get_layer("logits")
    mask = ops.not_equal(ops.convert_to_tensor(ids), 0)
    x = embed(ids)
    for name in ("block1", "block2"):
        block = model.get_layer(name)
        if name == remove_feedforward_of:
            x = x + block.attention_branch(x, padding_mask=mask)  # Pre-LN: x + F(LN(x)), no feed-forward
        else:
            x = block(x, padding_mask=mask)
    return head(pool(x, mask=mask))


def test_masked_text_sublayer_lesion_matches_the_masked_computation():
    model, ids, y = masked_text_classifier()
    np.testing.assert_allclose(_numpy(model(ids)), _numpy(_masked_forward(model, ids)), rtol=1e-5, atol=1e-6)
    result = d.lesion_sublayers(model, ids, y)
    expected = _crossentropy(y, _masked_forward(model, ids, remove_feedforward_of="block1"))
    assert result["feedforward"][0] == pytest.approx(expected, rel=1e-5)
    assert result["intact"] == pytest.approx(_crossentropy(y, model(ids)), rel=1e-5)


def test_masked_text_contributions_count_the_real_positions_only():
    model, ids, _ = masked_text_classifier()
    result = d.stream_contributions(model, ids)
    mask = (ids != 0)[..., None].astype("float32")
    x0 = _numpy(model.get_layer("embed")(ids))
    update = _numpy(model.get_layer("block1").attention_branch(x0, padding_mask=ids != 0))
    expected = np.linalg.norm((update * mask).reshape(len(ids), -1), axis=1) / np.linalg.norm(
        (x0 * mask).reshape(len(ids), -1), axis=1)
    np.testing.assert_allclose(result["attention"][0], expected, rtol=1e-5)


def test_training_dynamics_on_padded_text_counts_the_real_positions_only():
    """branch_ratio and the x_L - x_0 columns, against the blocks written out by hand over the real positions."""
    model, ids, y = masked_text_classifier()
    assert (ids == 0).any() and (ids != 0).all(axis=1).any()  # padded rows, and one without padding
    dynamics = d.TrainingDynamics(ids, y)
    dynamics.set_model(model)
    dynamics.on_epoch_begin(0)
    rows = {row["name"]: row for row in dynamics.rows}
    mask = ids != 0
    real = mask[..., None].astype("float32")  # (B, T, 1)

    def ratio(update, stream):  # per example, ||update|| / ||stream|| over the real positions
        return np.linalg.norm((update * real).reshape(len(ids), -1), axis=1) / np.linalg.norm(
            (stream * real).reshape(len(ids), -1), axis=1)

    x0 = x = _numpy(model.get_layer("embed")(ids))  # (B, T, C)
    for name in ("block1", "block2"):
        block = model.get_layer(name)
        attention = _numpy(block.attention_branch(x, padding_mask=mask))  # Pre-LN: x + F(LN(x))
        h = x + attention
        feedforward = _numpy(block.feedforward_branch(h))
        np.testing.assert_allclose(h + feedforward, _numpy(block(x, padding_mask=mask)), rtol=1e-5, atol=1e-6)
        expected = np.mean([ratio(attention, x), ratio(feedforward, h)])  # the mean over examples and steps
        assert rows[name]["branch_ratio"] == pytest.approx(expected, rel=1e-5)
        x = h + feedforward
    # x_L - x_0 as a (real positions, channels) matrix.
    final, start = x[mask].astype("float64"), x0[mask].astype("float64")
    singular = np.linalg.svd(final - start, compute_uv=False)
    shares = singular / singular.sum()
    rank = int(np.sum(singular > 1e-3 * np.linalg.norm(final, 2)))
    for row in rows.values():
        assert row["delta_size"] == pytest.approx(np.linalg.norm(final - start) / np.linalg.norm(start), rel=1e-5)
        assert row["delta_effective_rank"] == pytest.approx(np.exp(-np.sum(shares * np.log(shares))), rel=1e-4)
        assert row["delta_rank"] == rank


def test_dict_outputs_are_read_by_name_in_output_names_order():
    model, x, y = STUDENT_MODELS["dict outputs"]()
    # model(x) returns the dict in the order it was defined on TensorFlow and JAX (sorted on
    # PyTorch); Keras' output_names are sorted: positions count in that order everywhere.
    assert sorted(model(x)) == model.output_names == ["aux", "cls"]
    outputs = model(x)
    mse = float(np.mean((_numpy(outputs["aux"]) - y["aux"]) ** 2))
    def loss(index):  # inference mode, as model(x) above
        return d.gradient_norms(model, x, y, output_index=index, training=False)["loss"]

    assert loss("aux") == pytest.approx(mse, rel=1e-5)
    assert loss(0) == pytest.approx(mse, rel=1e-5)  # "aux", first in model.output_names
    crossentropy = _crossentropy(y["cls"], outputs["cls"])
    assert loss("cls") == pytest.approx(crossentropy, rel=1e-5)
    assert loss(1) == pytest.approx(crossentropy, rel=1e-5)
    regression = d.lesion(model, x, y, output_index="aux")
    assert regression["metric"] == "loss" and regression["intact"] == pytest.approx(mse, rel=1e-5)
    classifier = d.lesion(model, (x, y), output_index="cls")  # (x, {dict of y}) as a tuple too
    accuracy = float(np.mean(np.argmax(_numpy(outputs["cls"]), axis=-1) == y["cls"]))
    assert classifier["metric"] == "accuracy" and classifier["intact"] == pytest.approx(accuracy)
    with pytest.raises(ValueError, match="no output named 'main'; its outputs: 0 'aux'.*1 'cls'"):
        d.gradient_norms(model, x, y, output_index="main")


def test_list_outputs_are_read_by_the_names_keras_gives_them():
    model, x, y = STUDENT_MODELS["list outputs"]()
    assert model.output_names == ["cls", "aux"]
    by_name = d.gradient_norms(model, x, y, output_index="cls", training=False)
    assert by_name["loss"] == pytest.approx(_crossentropy(y[0], model(x)[0]), rel=1e-5)
    assert d.gradient_norms(model, x, y, output_index="aux", training=False)["loss"] == pytest.approx(
        float(np.mean((_numpy(model(x)[1]) - y[1]) ** 2)), rel=1e-5)


def test_an_image_output_trained_with_mse_is_scored_by_its_loss():
    model, x, clean = STUDENT_MODELS["U-Net MSE"]()
    result = d.lesion(model, x, clean)
    assert result["metric"] == "loss"
    assert result["intact"] == pytest.approx(float(np.mean((_numpy(model(x)) - clean) ** 2)), rel=1e-5)
    uncompiled = keras.Model(model.inputs, model.outputs)  # a sigmoid image output, no loss compiled
    assert d.lesion(uncompiled, x, (clean > 0.5).astype("float32"))["metric"] == "loss"


def test_a_protocol_layer_is_lesioned_as_it_says_and_gets_every_column():
    model, x, y = STUDENT_MODELS["protocol layer"]()
    result = d.lesion(model, x, y)
    assert result["removed_as"] == ["ReLU(shortcut(x))"] * 2
    stem, second, head = (model.get_layer(name) for name in ("stem", "gated2", "logits"))
    without_first = _numpy(head(second(ops.relu(stem(x)))))  # gated1 removed: ReLU(x), its post kept
    accuracy = float(np.mean(np.argmax(without_first, axis=-1) == y))
    assert result["lesioned"][0] == pytest.approx(accuracy)
    dynamics = d.TrainingDynamics(x, y)
    dynamics.set_model(model)
    dynamics.on_epoch_begin(0)
    assert [row["identity_scalar"] for row in dynamics.rows] == [0.5, 0.5]
    assert all(row["branch_ratio"] > 0 for row in dynamics.rows)
    paths = d.path_gradients(model, x, y, samples=1)
    flow = d.gradient_norms(model, x, y, training=False)
    assert paths["full_gradient"] == pytest.approx(flow["stream_grad_norms"][0], rel=1e-4)


def test_residual_blocks_start_as_the_identity_and_save(tmp_path):
    inputs = keras.Input((6,))
    x = inputs
    for index in range(4):
        branch = keras.Sequential([keras.layers.Dense(12, activation="relu"), keras.layers.Dense(6)])
        x = rk.Residual(branch, rezero=True, name=f"res{index + 1}")(x)
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    batch = images(4, shape=(6,))
    np.testing.assert_allclose(d.jacobian_norm(model, batch, num_iterations=3)["total"], 1.0, rtol=1e-6)
    assert d.gradient_norms(model, batch)["gain"] == pytest.approx(1.0, rel=1e-6)
    model.get_layer("res2").rezero_alpha.assign(0.3)
    model.save(tmp_path / "mlp.keras")
    loaded = keras.saving.load_model(tmp_path / "mlp.keras")
    np.testing.assert_allclose(_numpy(loaded(batch)), _numpy(model(batch)), rtol=1e-6)
    assert loaded.get_layer("res2").identity_scale() == pytest.approx(0.3)
    protocol, x, _ = STUDENT_MODELS["protocol layer"]()  # GatedBlock is registered ("student>GatedBlock")
    protocol.save(tmp_path / "gated.keras")
    reloaded = keras.saving.load_model(tmp_path / "gated.keras")
    assert isinstance(reloaded.get_layer("gated1"), GatedBlock)
    np.testing.assert_allclose(_numpy(reloaded(x)), _numpy(protocol(x)), rtol=1e-6)


def test_a_dataset_is_taken_by_every_instrument_as_batches():
    tf = pytest.importorskip("tensorflow")
    model, x, y = STUDENT_MODELS["functional softmax"]()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    first = d.gradient_norms(model, x[:4], y[:4], training=False)
    assert d.gradient_norms(model, dataset, training=False)["loss"] == pytest.approx(first["loss"], rel=1e-6)
    assert d.lesion(model, dataset)["intact"] == pytest.approx(d.lesion(model, x, y)["intact"])
    assert d.jacobian_norm(model, dataset, num_iterations=3)["total"].shape == (4,)
    with pytest.raises(ValueError, match="yields x without y"):
        d.lesion(model, tf.data.Dataset.from_tensor_slices(x).batch(4))


def test_what_an_instrument_needs_is_said_in_one_line():
    model, ids, _ = masked_text_classifier()
    with pytest.raises(ValueError, match="logit_lens needs y="):
        d.logit_lens(model, ids)
    with pytest.raises(ValueError, match="pass x and y .*got x alone"):
        d.lesion(model, ids)
    with pytest.raises(ValueError, match="x and y differ in length: 8 != 3"):
        d.lesion(model, ids, labels(3))


def test_swap_blocks_across_functional_stages_matches_a_hand_swap():
    """Issue 40, case 5: a swap across the boundary of two functional stages (BasicBlock <-> Residual)."""
    keras.utils.set_random_seed(0)
    model, x, y = STUDENT_MODELS["functional stages"]()
    result = d.swap_blocks(model, x, y, metric="loss")
    assert ["stage1_block2", "stage2_block1"] in result["pairs"]
    order = ["stage1_block1", "stage2_block1", "stage1_block2", "stage2_block2"]
    stage1, stage2 = model.get_layer("stage1"), model.get_layer("stage2")
    blocks = {**{layer.name: layer for layer in stage1.layers}, **{layer.name: layer for layer in stage2.layers}}
    stream = model.get_layer("stem")(x)
    for name in order:
        stream = blocks[name](stream, training=False)
    logits = model.get_layer("logits")(model.get_layer("pool")(stream))
    swapped = result["swapped"][result["pairs"].index(["stage1_block2", "stage2_block1"])]
    assert swapped == pytest.approx(_crossentropy(y, logits), rel=1e-5)
