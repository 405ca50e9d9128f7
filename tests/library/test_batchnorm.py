"""The library's BatchNormalization (residual_keras/batchnorm.py): TensorFlow's fused kernel, Keras' numbers.

On TensorFlow the fused path (FusedBatchNormV3) is compared with Keras' own
ops (the switch off): outputs, gradients and moving statistics agree to
float32 rounding. On every other backend the layer is Keras'
BatchNormalization, and equal to it to the last bit.

Tolerances. The two paths compute the same sums in another order (the fused
kernel reduces each channel in one pass, tf.nn.moments in two; the gradient
sums n = N*H*W products per channel). A float32 sum of n terms in another
order differs by a few units of 2^-24 times sqrt(n) relative to the sum of
the magnitudes: for the n <= 288 here that is < 1e-6, so rtol 1e-5 with atol
1e-5 (the quantities are O(1) to O(100)) leaves a 10x margin. bfloat16
outputs are rounded once from float32 values that agree to ~1e-6, so they
differ by at most one bfloat16 step, 2^-7 (0.8 %) of the value: rtol and atol
1e-2 there. A few SGD steps of a whole network let the rounding of one step
move the next, but over 4 steps the losses still agree to ~1e-7: rtol 1e-5.
"""

import numpy as np
import pytest

import keras
import residual_keras as rk
from layer_checks import run_layer_test
from residual_keras import batchnorm, cifar_resnet, count_trainable_params
from residual_keras.batchnorm import BatchNormalization

TENSORFLOW = keras.backend.backend() == "tensorflow"
tensorflow_only = pytest.mark.skipif(
    not TENSORFLOW,
    reason=f"the fused kernel is TensorFlow's FusedBatchNormV3; on {keras.backend.backend()} the layer "
    "is Keras' BatchNormalization (test_equals_keras_batchnorm_where_not_fused)",
)
FLOAT32 = {"rtol": 1e-5, "atol": 1e-5}
BFLOAT16 = {"rtol": 1e-2, "atol": 1e-2}
SHAPES = {"channels_last": ((8, 6, 6, 3), -1), "channels_first": ((8, 3, 6, 6), 1)}


@pytest.fixture(autouse=True)
def _default_switch(monkeypatch):
    """Each test starts from the default switch (no environment variable, no use_fused), and leaves it so."""
    monkeypatch.delenv(batchnorm.ENVIRONMENT_VARIABLE, raising=False)
    batchnorm.use_fused(None)
    yield
    batchnorm.use_fused(None)


def _images(shape, seed=0):
    # Mean 0.5, standard deviation 2: statistics far from the initial (0, 1).
    return np.random.default_rng(seed).normal(0.5, 2.0, size=shape).astype("float32")


def _numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def _built(layer_class, shape, axis=-1, **kwargs):
    """A built layer with gamma, beta and moving statistics that are not the initial ones."""
    layer = layer_class(axis=axis, momentum=0.9, epsilon=1e-5, **kwargs)
    layer.build(shape)
    rng = np.random.default_rng(7)
    channels = shape[axis]
    values = {
        "gamma": rng.uniform(0.5, 1.5, channels),
        "beta": rng.normal(0, 0.5, channels),
        "moving_mean": rng.normal(0, 0.5, channels),
        "moving_variance": rng.uniform(0.5, 2.0, channels),
    }
    for variable in layer.weights:
        if variable.name in values:
            variable.assign(values[variable.name].astype(variable.dtype))
    return layer


# On every backend.


@pytest.mark.parametrize("fused", [False, True], ids=["switch-off", "switch-on"])
@pytest.mark.parametrize("layout", SHAPES)
def test_equals_keras_batchnorm_where_not_fused(layout, fused):
    """Where the fused kernel does not run (switch off; JAX, PyTorch), the layer is Keras' to the last bit."""
    if fused and TENSORFLOW:
        pytest.skip("on TensorFlow the switch on runs the fused kernel (test_fused_equals_keras_ops)")
    shape, axis = SHAPES[layout]
    ours, theirs = _built(BatchNormalization, shape, axis), _built(keras.layers.BatchNormalization, shape, axis)
    with batchnorm.use_fused(fused):
        for step in range(3):
            x = _images(shape, seed=step)
            np.testing.assert_array_equal(_numpy(ours(x, training=True)), _numpy(theirs(x, training=True)))
        x = _images(shape, seed=9)
        np.testing.assert_array_equal(_numpy(ours(x, training=False)), _numpy(theirs(x, training=False)))
    for mine, keras_own in zip(ours.weights, theirs.weights):
        assert mine.name == keras_own.name and mine.shape == keras_own.shape
        np.testing.assert_array_equal(_numpy(mine), _numpy(keras_own))


def test_config_and_weights_are_keras_own():
    kwargs = {"axis": 1, "momentum": 0.9, "epsilon": 1e-5, "gamma_initializer": "zeros", "name": "norm"}
    ours, theirs = BatchNormalization(**kwargs), keras.layers.BatchNormalization(**kwargs)
    assert ours.get_config() == theirs.get_config()
    revived = BatchNormalization.from_config(ours.get_config())
    assert type(revived) is BatchNormalization and revived.get_config() == ours.get_config()
    assert keras.saving.serialize_keras_object(ours)["registered_name"] == "residual_keras>BatchNormalization"
    ours.build((2, 5, 4, 4))
    assert [(w.name, tuple(w.shape), w.trainable) for w in ours.weights] == [
        ("gamma", (5,), True), ("beta", (5,), True), ("moving_mean", (5,), False), ("moving_variance", (5,), False)]


@pytest.mark.parametrize("layout", ["channels_last", "channels_first"])
def test_layer_checks(tmp_path, layout):
    """The shared checks: shapes, config, registered serialization, .keras round trip, XLA fit, mixed precision."""
    shape, axis = SHAPES[layout]
    run_layer_test(
        BatchNormalization,
        {"axis": axis, "momentum": 0.9, "epsilon": 1e-5},
        _images(shape),
        shape,
        tmp_path,
        expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=2,
        unknown_spatial_dims=layout == "channels_last",  # channels_first: axis 1 is the channels
    )


@pytest.mark.parametrize(
    "kwargs, trainable, total, projections",
    [({}, 269_722, 271_098, 0), ({"block": rk.blocks.preact()}, 269_722, 271_098, 0),
     ({"block": rk.blocks.basic(shortcut="B")}, 272_474, 274_042, 2)],
    ids=["basic", "preact", "option-B"],
)
def test_cifar_resnet_uses_it_and_keeps_its_parameters(kwargs, trainable, total, projections):
    """ResNet-20's counts as before the change (trainable: He et al.'s 269,722; total with the statistics)."""
    model = cifar_resnet(20, **kwargs)
    assert count_trainable_params(model) == trainable
    assert sum(int(np.prod(weight.shape)) for weight in model.weights) == total
    norms = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.BatchNormalization)]
    assert len(norms) == 19 + projections  # stem or final, 2 per block, 1 per option-B projection
    assert all(type(layer) is BatchNormalization for layer in norms)


def _trained_once(model, seed=0):
    model(_images((4, 32, 32, 3), seed), training=True)  # moves the moving statistics
    return model


def test_a_model_saves_and_loads_with_identical_predictions(tmp_path):
    model = _trained_once(cifar_resnet(8, width=4))
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(loaded.get_layer("stem_norm")) is BatchNormalization
    x = _images((4, 32, 32, 3), seed=1)
    np.testing.assert_array_equal(_numpy(loaded(x, training=False)), _numpy(model(x, training=False)))


def test_files_saved_with_keras_batchnorm_still_load(tmp_path, monkeypatch):
    """A .keras file from before the library had its own BatchNorm: Keras' layers in the stem and the blocks."""
    from residual_keras import batchnorm

    # Every block, shortcut and stem builds batchnorm.BatchNormalization when it is built.
    monkeypatch.setattr(batchnorm, "BatchNormalization", keras.layers.BatchNormalization)
    old = _trained_once(cifar_resnet(8, block=rk.blocks.basic(shortcut="B"), width=4))
    assert type(old.get_layer("stage1_block1").norm1) is keras.layers.BatchNormalization
    old.save(tmp_path / "old.keras")
    old.save_weights(tmp_path / "old.weights.h5")
    old_config = old.get_layer("stage2_block1").get_config()
    monkeypatch.undo()

    # Weights alone, into the network built today (its stem a residual_keras BatchNormalization).
    new = cifar_resnet(8, block=rk.blocks.basic(shortcut="B"), width=4)
    assert type(new.get_layer("stem_norm")) is BatchNormalization
    new.load_weights(tmp_path / "old.weights.h5")
    for weight, saved in zip(new.weights, old.weights):
        np.testing.assert_array_equal(_numpy(weight), _numpy(saved))

    loaded = keras.saving.load_model(tmp_path / "old.keras")
    assert type(loaded.get_layer("stem_norm")) is keras.layers.BatchNormalization  # as the file says
    block = loaded.get_layer("stage2_block1")
    assert type(block.norm1) is BatchNormalization  # a block's sublayers are its own business
    assert block.get_config() == old_config
    assert len(loaded.weights) == len(old.weights)
    for new, saved in zip(loaded.weights, old.weights):
        assert new.path == saved.path
        np.testing.assert_array_equal(_numpy(new), _numpy(saved))
    x = _images((4, 32, 32, 3), seed=1)
    np.testing.assert_allclose(_numpy(loaded(x, training=False)), _numpy(old(x, training=False)), **FLOAT32)


def test_the_switch():
    assert batchnorm.fused_enabled()  # default on
    with batchnorm.use_fused(False):
        assert not batchnorm.fused_enabled()
        with batchnorm.use_fused(True):
            assert batchnorm.fused_enabled()
        assert not batchnorm.fused_enabled()
    assert batchnorm.fused_enabled()
    batchnorm.use_fused(False)  # without `with`: from now on
    assert not batchnorm.fused_enabled()
    batchnorm.use_fused(None)
    assert batchnorm.fused_enabled()
    with pytest.raises(TypeError, match="True, False or None"):
        batchnorm.use_fused("no")


@pytest.mark.parametrize("value, enabled", [("0", False), ("off", False), ("False", False), ("1", True), ("", True)])
def test_the_environment_variable(monkeypatch, value, enabled):
    monkeypatch.setenv("RESIDUAL_KERAS_FUSED_BATCHNORM", value)
    assert batchnorm.fused_enabled() is enabled
    with batchnorm.use_fused(not enabled):  # an explicit setting wins
        assert batchnorm.fused_enabled() is not enabled


def test_an_unknown_environment_value_is_an_error(monkeypatch):
    monkeypatch.setenv("RESIDUAL_KERAS_FUSED_BATCHNORM", "maybe")
    with pytest.raises(ValueError, match="RESIDUAL_KERAS_FUSED_BATCHNORM must be one of"):
        batchnorm.fused_enabled()


# TensorFlow: the fused kernel.


def _forward_and_gradients(layer, x, training, mode):
    """The layer's output and the gradients of a weighted sum of it w.r.t. x, gamma and beta.

    mode: "eager", "graph" (tf.function) or "xla" (tf.function(jit_compile=True))."""
    import tensorflow as tf

    weights = tf.constant(np.random.default_rng(3).normal(size=x.shape).astype("float32"))

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=training)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * weights)
        return (y, *tape.gradient(loss, [x, layer.gamma.value, layer.beta.value]))

    if mode != "eager":
        step = tf.function(step, jit_compile=mode == "xla")
    return [_numpy(value) for value in step(tf.constant(x))]


def _op_types(function, *args):
    import tensorflow as tf

    return {op.type for op in tf.function(function).get_concrete_function(*args).graph.get_operations()}


@tensorflow_only
@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("layout", SHAPES)
def test_fused_equals_keras_ops(layout, training, mode):
    """Outputs, gradients (x, gamma, beta) and moving statistics after 3 calls: fused = Keras' ops, in float32."""
    shape, axis = SHAPES[layout]
    results = {}
    for fused in (True, False):
        layer = _built(BatchNormalization, shape, axis)
        with batchnorm.use_fused(fused):
            for step in range(3):
                outputs = _forward_and_gradients(layer, _images(shape, seed=step), training, mode)
        results[fused] = outputs + [_numpy(layer.moving_mean), _numpy(layer.moving_variance)]
    names = ["output", "d/dx", "d/dgamma", "d/dbeta", "moving_mean", "moving_variance"]
    for name, fused, reference in zip(names, results[True], results[False]):
        np.testing.assert_allclose(fused, reference, **FLOAT32, err_msg=name)
    if not training:  # inference leaves the statistics alone
        np.testing.assert_array_equal(results[True][4], _numpy(_built(BatchNormalization, shape, axis).moving_mean))


@tensorflow_only
def test_the_moving_variance_is_keras_biased_one():
    """TensorFlow's kernel returns the Bessel-corrected batch variance; the layer keeps Keras' (divided by n)."""
    shape = (4, 3, 5, 2)  # n = 60 values per channel: n / (n - 1) would show as 1.7 %
    x = _images(shape)
    layer = BatchNormalization(momentum=0.0)
    layer(x, training=True)
    np.testing.assert_allclose(_numpy(layer.moving_mean), x.mean(axis=(0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(_numpy(layer.moving_variance), x.var(axis=(0, 1, 2)), rtol=1e-5)
    one = _images((1, 1, 1, 2))  # n = 1: variance 0, as Keras has it
    layer(one, training=True)
    np.testing.assert_array_equal(_numpy(layer.moving_variance), [0.0, 0.0])


@tensorflow_only
@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("layout", SHAPES)
def test_the_fused_kernel_runs(layout, training):
    """FusedBatchNormV3 (and its gradient) in the traced graph with the switch on, Keras' ops with it off."""
    import tensorflow as tf

    shape, axis = SHAPES[layout]
    layer = _built(BatchNormalization, shape, axis)

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=training)
        return tape.gradient(y, [x, layer.gamma.value])

    x = tf.constant(_images(shape))
    with batchnorm.use_fused(True):
        on = _op_types(step, x)
    assert {"FusedBatchNormV3", "FusedBatchNormGradV3"} <= on
    assert "Rsqrt" not in on  # none of Keras' own normalisation
    with batchnorm.use_fused(False):
        off = _op_types(step, x)
    assert not {op for op in off if op.startswith("FusedBatchNorm")}
    assert "Rsqrt" in off


@tensorflow_only
def test_the_environment_variable_turns_it_off(monkeypatch):
    layer = _built(BatchNormalization, (2, 4, 4, 3))
    x = _images((2, 4, 4, 3))
    monkeypatch.setenv("RESIDUAL_KERAS_FUSED_BATCHNORM", "0")
    assert "FusedBatchNormV3" not in _op_types(lambda x: layer(x, training=True), x)
    monkeypatch.delenv("RESIDUAL_KERAS_FUSED_BATCHNORM")
    assert "FusedBatchNormV3" in _op_types(lambda x: layer(x, training=True), x)


@tensorflow_only
def test_every_batchnorm_of_cifar_resnet_is_fused():
    import tensorflow as tf

    model = cifar_resnet(8, block=rk.blocks.basic(shortcut="B"), width=4)  # stem, 2 per block, 2 projections
    x = tf.constant(_images((2, 32, 32, 3)))
    graph = tf.function(lambda x: model(x, training=True)).get_concrete_function(x).graph
    fused = [op for op in graph.get_operations() if op.type == "FusedBatchNormV3"]
    assert len(fused) == 1 + 2 * 3 + 2


@tensorflow_only
@pytest.mark.parametrize(
    "case",
    ["mask", "rank 3", "rank 2", "axis 2", "renorm", "float64"],
)
def test_uncovered_inputs_fall_back_to_keras(case):
    """Inputs the fused kernel does not cover run Keras' own call: the same numbers, no FusedBatchNormV3."""
    shape, kwargs, call_kwargs = (4, 5, 6, 3), {}, {}
    if case == "mask":
        call_kwargs = {"mask": np.random.default_rng(1).random((4, 5, 6)) > 0.3}
    elif case == "rank 3":
        shape = (4, 5, 3)
    elif case == "rank 2":
        shape = (8, 3)
    elif case == "axis 2":
        kwargs = {"axis": 2}
    elif case == "renorm":
        kwargs = {"renorm": True}
    else:
        kwargs = {"dtype": "float64"}
    x = _images(shape)
    ours = BatchNormalization(**kwargs)
    theirs = keras.layers.BatchNormalization(**kwargs)
    with batchnorm.use_fused(True):
        assert "FusedBatchNormV3" not in _op_types(lambda x: ours(x, training=True, **call_kwargs), x)
        np.testing.assert_array_equal(
            _numpy(ours(x, training=True, **call_kwargs)), _numpy(theirs(x, training=True, **call_kwargs)))
    for mine, keras_own in zip(ours.weights, theirs.weights):
        np.testing.assert_array_equal(_numpy(mine), _numpy(keras_own))


@tensorflow_only
@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("layout", SHAPES)
def test_mixed_bfloat16(layout, training):
    """bfloat16 in and out, float32 gamma, beta and statistics; within a bfloat16 step of Keras' ops."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    shape, axis = SHAPES[layout]
    results = {}
    for fused in (True, False):
        layer = _built(BatchNormalization, shape, axis)
        assert layer.compute_dtype == "bfloat16" and all(w.dtype == "float32" for w in layer.weights)
        with batchnorm.use_fused(fused):
            for step in range(3):
                x = keras.ops.cast(_images(shape, seed=step), "bfloat16")
                y = layer(x, training=training)
                assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"
            outputs = _forward_and_gradients(layer, x, training, "graph")
        results[fused] = outputs, [_numpy(layer.moving_mean), _numpy(layer.moving_variance)]
    for name, fused, reference in zip(["output", "d/dx", "d/dgamma", "d/dbeta"], results[True][0], results[False][0]):
        np.testing.assert_allclose(fused, reference, **BFLOAT16, err_msg=name)
    # The statistics come from the same bfloat16 inputs, upcast: float32 rounding only.
    for name, fused, reference in zip(["moving_mean", "moving_variance"], results[True][1], results[False][1]):
        np.testing.assert_allclose(fused, reference, **FLOAT32, err_msg=name)


@tensorflow_only
def test_mixed_bfloat16_cifar_resnet_is_fused():
    import tensorflow as tf

    keras.config.set_dtype_policy("mixed_bfloat16")
    model = cifar_resnet(8, width=4)
    x = tf.constant(_images((2, 32, 32, 3)))
    graph = tf.function(lambda x: model(x, training=True)).get_concrete_function(x).graph
    fused = [op for op in graph.get_operations() if op.type == "FusedBatchNormV3"]
    assert len(fused) == 7 and all(op.get_attr("T") == tf.bfloat16 for op in fused)
    assert np.all(np.isfinite(_numpy(model(x, training=True))))


@tensorflow_only
def test_xla_training_of_a_resnet_matches_keras_ops():
    """jit_compile=True fit steps of cifar_resnet(8, width=4): the same losses and statistics either way."""
    images = _images((16, 32, 32, 3))
    labels = np.random.default_rng(1).integers(0, 10, size=16)
    runs = {}
    for fused in (True, False):
        with batchnorm.use_fused(fused):
            keras.utils.set_random_seed(0)
            model = cifar_resnet(8, width=4)
            model.compile(keras.optimizers.SGD(0.05, momentum=0.9),
                          keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
            losses = [float(model.train_on_batch(images[i % 2 * 8:][:8], labels[i % 2 * 8:][:8]))
                      for i in range(4)]
            assert model.jit_compile, "Keras fell back from XLA"
            runs[fused] = losses, _numpy(model.get_layer("stem_norm").moving_variance)
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-5)
    np.testing.assert_allclose(runs[True][1], runs[False][1], **FLOAT32)
