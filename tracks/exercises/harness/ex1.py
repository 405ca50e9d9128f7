"""Exercise 1's probes: build the student's `ResidualMLP`, give it the grader's weights, send back its outputs."""

import numpy as np

from .values import assign_by_shape, attempt, plain, weights_of


def _layer(module):
    cls = getattr(module, "ResidualMLP", None)
    if cls is None:
        raise AttributeError("no class ResidualMLP in the file")
    return cls


def _inputs(inputs):
    """The two inputs, (batch, width) and (batch, seq, width), by rank."""
    return {"2": np.asarray(inputs["x"], "float32"), "3": np.asarray(inputs["x3"], "float32")}


def probe_shapes(module, inputs):
    """The output's shape for each input, each layer built on that input (first call)."""
    cls = _layer(module)
    return {rank: attempt(lambda: list(cls(inputs["hidden"])(x).shape)) for rank, x in _inputs(inputs).items()}


def probe_outputs(module, inputs):
    """Both twins, built on each input, with the grader's weights: outputs in inference and training mode."""
    cls, found = _layer(module), {}

    def twin(residual, x):
        layer = cls(inputs["hidden"], residual=residual)
        layer(x)  # builds it, whether the Dense layers are made in __init__ or build()
        initial = weights_of(layer)
        return {"initial": initial, "assigned": assign_by_shape(layer, inputs["new"]),
                "inference": attempt(lambda: layer(x, training=False)),
                "training": attempt(lambda: layer(x, training=True))}

    for residual in (True, False):
        for rank, x in _inputs(inputs).items():
            found[f"{residual}/{rank}"] = attempt(lambda: twin(residual, x))
    return found


def probe_parameters(module, inputs):
    layer = _layer(module)(inputs["hidden"])
    layer(np.asarray(inputs["x"], "float32"))  # built by its first call: weights made in build() exist from here
    return [list(weight.shape) for weight in layer.trainable_weights]


def probe_saving(module, inputs):
    import keras

    cls, x = _layer(module), np.asarray(inputs["x"], "float32")
    found = {}
    for residual in (True, False):
        layer = cls(inputs["hidden"], residual=residual, name="block")
        layer(x)
        assign_by_shape(layer, inputs["new"])
        config = layer.get_config()
        clone = cls.from_config(config)
        clone(x)
        assign_by_shape(clone, inputs["new"])
        revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        model_input = keras.Input((inputs["width"],))
        model = keras.Model(model_input, layer(model_input))
        model.save("model.keras")  # in the submission's own empty working folder
        loaded = keras.saving.load_model("model.keras")
        found[str(residual)] = {"config": {key: plain(config.get(key)) for key in ("hidden", "residual")},
                                "keys": sorted(map(str, config)), "clone": plain(clone(x)), "name": clone.name,
                                "revived": type(revived).__name__, "loaded": plain(loaded(x))}
    return found


def probe_stack(module, inputs):
    import keras

    cls = _layer(module)
    model = keras.Sequential([keras.Input((inputs["width"],)),
                              *(cls(inputs["hidden"], name=f"block{i}") for i in range(len(inputs["stack"])))])
    for layer, weights in zip(model.layers, inputs["stack"]):
        assign_by_shape(layer, weights)
    return plain(model(np.asarray(inputs["x"], "float32")))


PROBES = {"shapes": probe_shapes, "outputs": probe_outputs, "parameters": probe_parameters, "saving": probe_saving,
          "stack": probe_stack}
