"""`run_layer_test`: the checks every public layer of residual_keras must pass.

In the spirit of keras-hub's `TestCase.run_layer_test`, for one layer class
and a set of constructor arguments:

1. eager and symbolic calls give the shape `compute_output_shape` promises,
   also with unknown (None) batch and sequence dimensions;
2. the numbers of trainable and non-trainable weights, when given;
3. `get_config` round-trips through `from_config` and through Keras'
   registered serialization (no `custom_objects` needed), compared as JSON;
4. a `.keras` file saved and loaded again gives identical outputs;
5. a `fit` step with `jit_compile=True` runs, and XLA really compiled it
   (Keras' public `model.jit_compile` stays True: it turns False when Keras
   falls back, tests/tracks/test_xla.py); on TensorFlow and JAX, the backends with
   XLA (on PyTorch Keras' `jit_compile` means `torch.compile`, minutes of
   C++ compilation per layer on a CPU: the step runs eagerly there);
6. under `mixed_bfloat16` and `mixed_float16` outputs are in the compute dtype
   and variables float32.

The harness uses Keras only: it does not import the tracks.
"""

import json

import numpy as np

import keras

# The backends on which `jit_compile=True` means XLA.
XLA = keras.backend.backend() in ("tensorflow", "jax")


def _assert_shape(actual, expected, what):
    assert tuple(actual) == tuple(expected), f"{what}: {tuple(actual)} != {tuple(expected)}"


def _as_json(config):
    return json.dumps(keras.saving.serialize_keras_object(config), sort_keys=True, default=str)


def _symbolic_shapes(input_shape):
    """The input shape with unknown batch, and with unknown batch and sequence (rank 3+)."""
    shapes = [(None, *input_shape[1:])]
    if len(input_shape) >= 3:
        shapes.append((None, None, *input_shape[2:]))
    return shapes


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    tmp_path,
    *,
    call_kwargs=None,
    expected_num_trainable_weights=None,
    expected_num_non_trainable_weights=None,
    run_mixed_precision=True,
    mixed_precision_policies=("mixed_bfloat16", "mixed_float16"),
    unknown_spatial_dims=True,
):
    """Runs the shared checks on `layer_cls(**init_kwargs)`; raises AssertionError on failure.

    `unknown_spatial_dims=False` skips the symbolic call with an unknown
    second dimension (for layers that need it, e.g. image height, or the
    channels of a channels_first image). `mixed_precision_policies` narrows
    step 6 where a backend lacks a kernel (TensorFlow's CPU Conv2D has no
    float16 NCHW kernel).
    """
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
    shapes = _symbolic_shapes(input_shape)
    for shape in shapes if unknown_spatial_dims else shapes[:1]:
        unknown = keras.Input(batch_shape=shape, dtype=input_data.dtype)
        result = layer_cls(**init_kwargs)(unknown, **call_kwargs)
        expected = tuple(None if known is None else dim for known, dim in zip(shape, expected_output_shape))
        expected = expected + tuple(expected_output_shape[len(shape):])
        # Dimensions that are None in the input may stay None; known ones must match.
        for got, want in zip(result.shape, expected):
            assert want is None or got == want, f"shape with unknown dims {shape}: {result.shape}"

    # 2. Weight counts.
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights
    if expected_num_non_trainable_weights is not None:
        assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights

    # 3. Config round trip, directly and through the registered name, compared as JSON.
    config = layer.get_config()
    revived = layer_cls.from_config(config)
    assert _as_json(revived.get_config()) == _as_json(config), "from_config(get_config()) changed the config"
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == f"residual_keras>{layer_cls.__name__}", (
        "layer is not registered with package='residual_keras'"
    )
    json.dumps(serialized)  # the serialized layer is plain JSON
    deserialized = keras.saving.deserialize_keras_object(serialized)
    assert type(deserialized) is layer_cls
    assert _as_json(deserialized.get_config()) == _as_json(config)

    # 4. A .keras file reloads to identical outputs (inference mode).
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

    # 5. One XLA-compiled training step.
    model.compile(optimizer="sgd", loss="mse", jit_compile=XLA)
    target = np.zeros(expected_output_shape, dtype="float32")
    history = model.fit(input_data, target, batch_size=input_shape[0], epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert model.jit_compile == XLA and model.train_function is not None, "Keras fell back from XLA"

    # 6. Mixed precision: compute in bfloat16 / float16, keep variables in float32.
    if run_mixed_precision:
        for policy in mixed_precision_policies:
            compute = policy.removeprefix("mixed_")
            mixed = layer_cls(**init_kwargs, dtype=policy)
            if "float" in str(input_data.dtype):
                mixed_input = keras.ops.cast(input_data, compute)
            else:
                mixed_input = input_data
            mixed_output = mixed(mixed_input, **call_kwargs)
            assert keras.backend.standardize_dtype(mixed_output.dtype) == compute, policy
            assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(mixed_output, "float32"))))
            for variable in mixed.weights:
                assert variable.dtype == "float32", f"{policy}: {variable.path} is {variable.dtype}"
