"""`run_layer_test`: the checks every public layer of residual_keras must pass.

In the spirit of keras-hub's `TestCase.run_layer_test`: for one layer class
and a set of constructor arguments it checks

1. eager and symbolic calls give the shape `compute_output_shape` promises;
2. `get_config` round-trips through `from_config` and through Keras'
   registered serialization (no `custom_objects` needed);
3. a `.keras` file saved and loaded again gives identical outputs;
4. a `fit` step with `jit_compile=True` runs, and XLA really compiled it;
5. under the `mixed_bfloat16` policy outputs are bfloat16 and variables float32.
"""

import numpy as np

import keras
from tracks.common.xla import xla_step_ran


def _assert_shape(actual, expected, what):
    assert tuple(actual) == tuple(expected), f"{what}: {tuple(actual)} != {tuple(expected)}"


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    tmp_path,
    *,
    call_kwargs=None,
    expected_num_trainable_weights=None,
    run_mixed_precision=True,
):
    """Runs the shared checks on `layer_cls(**init_kwargs)`; raises AssertionError on failure."""
    call_kwargs = call_kwargs or {}
    input_data = keras.ops.convert_to_tensor(input_data)
    input_shape = tuple(input_data.shape)

    # 1. Eager and symbolic calls agree with compute_output_shape.
    layer = layer_cls(**init_kwargs)
    output = layer(input_data, **call_kwargs)
    _assert_shape(output.shape, expected_output_shape, "eager output shape")
    _assert_shape(
        layer.compute_output_shape(input_shape), expected_output_shape, "compute_output_shape"
    )
    inputs = keras.Input(batch_shape=input_shape, dtype=input_data.dtype)
    symbolic = layer_cls(**init_kwargs)(inputs, **call_kwargs)
    _assert_shape(symbolic.shape, expected_output_shape, "symbolic output shape")
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights

    # 2. Config round trip, directly and through the registered name.
    config = layer.get_config()
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config, "from_config(get_config()) changed the config"
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == f"residual_keras>{layer_cls.__name__}", (
        "layer is not registered with package='residual_keras'"
    )
    deserialized = keras.saving.deserialize_keras_object(serialized)
    assert type(deserialized) is layer_cls
    assert deserialized.get_config() == config

    # 3. A .keras file reloads to identical outputs (inference mode).
    model = keras.Model(inputs, layer_cls(**init_kwargs)(inputs, **call_kwargs))
    path = tmp_path / f"{layer_cls.__name__}.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model(input_data, training=False)),
        keras.ops.convert_to_numpy(reloaded(input_data, training=False)),
        rtol=1e-6,
        atol=1e-6,
    )

    # 4. One XLA-compiled training step.
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    target = np.zeros(expected_output_shape, dtype="float32")
    history = model.fit(input_data, target, batch_size=input_shape[0], epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert xla_step_ran(model), "the training step did not run under XLA"

    # 5. Mixed precision: compute in bfloat16, keep variables in float32.
    if run_mixed_precision:
        mixed = layer_cls(**init_kwargs, dtype="mixed_bfloat16")
        if "float" in str(input_data.dtype):
            mixed_input = keras.ops.cast(input_data, "bfloat16")
        else:
            mixed_input = input_data
        mixed_output = mixed(mixed_input, **call_kwargs)
        assert keras.backend.standardize_dtype(mixed_output.dtype) == "bfloat16"
        for variable in mixed.weights:
            assert variable.dtype == "float32", f"{variable.path} is {variable.dtype}"
