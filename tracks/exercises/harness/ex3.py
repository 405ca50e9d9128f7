"""Exercise 3's probes: the student's `PreLNBlock` with weights drawn from the grader's seed, its outputs read
through `call` with one sublayer's parts at zero, in both modes, saved and reloaded."""

import numpy as np

from .values import attempt, plain, set_drawn_weights

# The sublayer measured alone, and the keras.layers class of the parts zeroed to silence the other one: the MLP's
# Dense layers (with zero kernels and biases it writes gelu(0) W2 + b2 = 0), or the MultiHeadAttention.
SILENCED = {"attention": "Dense", "mlp": "MultiHeadAttention"}


def _x(inputs, key="x"):
    return np.asarray(inputs[key], "float32")


def _block(module, inputs, **kwargs):
    cls = getattr(module, "PreLNBlock", None)
    if cls is None:
        raise AttributeError("no class PreLNBlock in the file")
    block = cls(inputs["heads"], inputs["hidden"], **kwargs)
    block(_x(inputs))
    return block


def _layers(block, kind):
    """The block's sublayers of the keras.layers class named `kind`, at any depth (a Sequential MLP too)."""
    import keras

    cls = getattr(keras.layers, kind)
    return [layer for layer in block._flatten_layers(include_self=False, recursive=True) if isinstance(layer, cls)]


def parts(block):
    """Where each part's weights are in `block.weights` (indices; None for a weight the part does not have)."""
    index = {id(weight): i for i, weight in enumerate(block.weights)}

    def where(weight):
        return index.get(id(weight)) if weight is not None else None

    found = {"attention": [], "norms": [], "dense": []}
    for layer in _layers(block, "MultiHeadAttention"):
        dense = {name: getattr(layer, f"_{name}_dense", None) for name in ("query", "key", "value", "output")}
        found["attention"].append({f"{name}_{kind}": where(getattr(part, kind, None))
                                   for name, part in dense.items() for kind in ("kernel", "bias")})
    for layer in _layers(block, "LayerNormalization"):
        found["norms"].append({"gamma": where(getattr(layer, "gamma", None)), "beta": where(getattr(layer, "beta", None)),
                               "epsilon": float(layer.epsilon), "rms": bool(getattr(layer, "rms_scaling", False))})
    for layer in _layers(block, "Dense"):
        found["dense"].append({"kernel": where(layer.kernel), "bias": where(getattr(layer, "bias", None))})
    return found


def _silenced(block, kind):
    """Zeroes the weights of the block's `kind` sublayers: (their indices, a function that restores every weight)."""
    saved = [weight.numpy() for weight in block.weights]
    silent = {id(weight) for layer in _layers(block, kind) for weight in layer.weights}
    zeroed = [i for i, weight in enumerate(block.weights) if id(weight) in silent]
    for i in zeroed:
        block.weights[i].assign(np.zeros(block.weights[i].shape, "float32"))
    return zeroed, lambda: [weight.assign(value) for weight, value in zip(block.weights, saved)]


def changed_input(inputs):
    """x with its positions after `split` replaced by `later` (the grader reads causality off it too)."""
    changed = _x(inputs).copy()
    changed[:, inputs["split"] + 1:] = _x(inputs, "later")
    return changed


def probe_block(module, inputs):
    """The block with the grader's drawn weights: call on x (both modes), on x with later positions changed, on
    an input of another length; with the MLP's or the attention's parts at zero; with every kernel and bias at 0."""
    block, x = _block(module, inputs), _x(inputs)
    found = {"weights": set_drawn_weights(block, inputs["weights_seed"]), "parts": parts(block),
             "full": attempt(lambda: block(x, training=False)), "training": attempt(lambda: block(x, training=True)),
             "other": attempt(lambda: block(_x(inputs, "other")))}
    for measured, kind in SILENCED.items():
        zeroed, restore = _silenced(block, kind)
        found[measured] = {"zeroed": zeroed, "parts": len(_layers(block, kind)), "x": attempt(lambda: block(x)),
                           "changed": attempt(lambda: block(changed_input(inputs)))}
        restore()
    norms = {index for norm in found["parts"]["norms"] for index in (norm["gamma"], norm["beta"])}
    for i, weight in enumerate(block.weights):  # every kernel and bias at 0, the LayerNorms kept: F = 0
        if i not in norms:
            weight.assign(np.zeros(weight.shape, "float32"))
    found["identity"] = attempt(lambda: block(x))
    return found


def probe_parameters(module, inputs):
    return [list(weight.shape) for weight in _block(module, inputs).trainable_weights]


def probe_saving(module, inputs):
    import keras

    block, x = _block(module, inputs, name="block"), _x(inputs)
    weights = set_drawn_weights(block, inputs["weights_seed"])
    config = block.get_config()
    clone = type(block).from_config(config)
    clone(x)
    clone.set_weights(block.get_weights())
    model_input = keras.Input(x.shape[1:])
    model = keras.Model(model_input, block(model_input))
    model.save("model.keras")  # in the submission's own empty working folder
    loaded = keras.saving.load_model("model.keras")
    return {"config": {key: plain(config.get(key)) for key in ("num_heads", "hidden")}, "name": clone.name,
            "weights": weights,
            "parts": parts(block), "output": plain(block(x)), "clone": plain(clone(x)), "loaded": plain(loaded(x))}


def probe_steps(module, inputs):
    """Optional: residual_steps()'s two branches, with two sets of drawn weights (the second after the first)."""
    block, x = _block(module, inputs), _x(inputs)
    found = []
    for seed in (inputs["weights_seed"], inputs["weights_seed"] + 1):
        weights = set_drawn_weights(block, seed)
        steps = list(block.residual_steps())
        if len(steps) != 2:
            raise ValueError(f"residual_steps() returned {len(steps)} steps, not 2 (attention, then feedforward)")
        update = steps[0].branch(x)
        found.append({"weights": weights, "parts": parts(block), "call": plain(block(x, training=False)),
                      "attention": plain(update), "feedforward": plain(steps[1].branch(x + update))})
    return found


PROBES = {"block": probe_block, "parameters": probe_parameters, "saving": probe_saving, "steps": probe_steps}
