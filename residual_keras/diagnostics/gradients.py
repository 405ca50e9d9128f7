"""The loss gradient along the residual stream and for every weight (`gradient_norms`)."""

import math

import numpy as np
from keras import ops

from residual_keras.diagnostics._blocks import _Chain
from residual_keras.diagnostics._tensors import _resolve_loss, _to_numpy


def gradient_norms(model, x, y=None, *, loss=None, training=True, blocks=None, seed=0):
    """Norms of the loss gradient along the residual stream and for every weight.

    Runs one forward and backward pass and records `||dLoss/dx_l||` at every
    stream point (`x_0` = first block's input, `x_l` = block l's output) and
    `||dLoss/dW||` for every trainable weight. The residual identity path
    keeps `||dLoss/dx_0||` within a modest factor of `||dLoss/dx_L||`; a
    plain stack multiplies L Jacobians.

    BatchNorm mode matters; `training=True` (the default) measures what a
    training step sees: batch statistics, whose own gradient is part of the
    chain. At initialisation:

    - training mode: in a plain BatchNorm network the input gradient grows
      with depth (each BN divides by the batch standard deviation of its
      input, and backpropagation through the batch statistics amplifies;
      Yang et al. 2019): tests/test_models.py measures a 50-block width-8
      stack, whose plain gain is more than 1000 times its residual twin's.
    - inference mode (`training=False`, moving statistics at their initial
      mean 0 and variance 1): the BNs are nearly identities and the network
      behaves like an unnormalised He-initialised one, `cifar_resnet(...,
      norm="none")`: there the residual stream, and with it the residual
      gain, grows exponentially with depth, and the plain gain drifts away
      from 1 as a product of L Jacobians (`python -m tracks.vision diagnose`
      measures both at 20, 56 and 110 layers).

    Uses `tf.GradientTape` (TensorFlow backend only).

    Args:
        model: keras.Model built from residual_keras blocks (see the module
            docstring; `blocks` chooses others).
        x: a batch of model inputs.
        y: targets for `loss`, or None. With y=None the targets are random
            integer labels (uniform over the last axis of the model output,
            numpy seed `seed`): the loss is then the cross-entropy a network
            sees on data it cannot have learnt, which at initialisation is
            typical of real data.
        loss: None (mean sparse categorical cross-entropy of logits), a Keras
            loss (name or object) or a callable `loss(y_true, y_pred)`;
            per-example values are averaged.
        training: bool. Mode of BatchNorm/Dropout in the pass. Default True.
        blocks: optional list of layer names (or layers) to use as blocks.
        seed: int. Seed of the random labels. Default 0.

    Returns:
        dict with
        - `model` (str) and `names` (L block names);
        - `stream_grad_norms`: float64 array (L+1,), Frobenius norm over the
          whole batch of dLoss/dx_l, l = 0..L;
        - `gain`: `stream_grad_norms[0] / stream_grad_norms[-1]`
          (nan if the latter is 0);
        - `weight_names` (variable paths), `weight_grad_norms` and
          `weight_norms`: one entry per trainable weight, in the model's
          (input -> output) order;
        - `block_weight_grad_norms`: float64 array (L,), the norm of the
          gradient of all of block l's weights together (Xiong et al. 2020
          compare these across layers: at initialisation Post-LN's grow
          towards the output, Pre-LN's stay level);
        - `loss` (float) and `training` (bool).
    """
    import tensorflow as tf

    chain = _Chain(model, blocks)
    loss_fn = _resolve_loss(loss)
    x = ops.convert_to_tensor(x)
    weights = list(model.trainable_weights)
    with tf.GradientTape() as tape:
        stream = chain.first_input(x, training)
        tape.watch(stream)  # needed when x_0 is the model input itself
        points = [stream]
        for index in range(len(chain.blocks)):
            stream = chain.step(index, stream, training)
            points.append(stream)
        outputs = chain.output(stream, training)
        targets = y
        if targets is None:
            rng = np.random.default_rng(seed)
            targets = rng.integers(0, outputs.shape[-1], size=tuple(outputs.shape[:-1]))
        value = loss_fn(ops.convert_to_tensor(targets), outputs)
        value = ops.mean(ops.cast(value, "float32"))  # per-example losses -> mean
    gradients = tape.gradient(value, points + weights)
    stream_grads = gradients[: len(points)]
    weight_grads = gradients[len(points) :]

    def norm(tensor):
        if tensor is None:
            return 0.0
        return float(np.linalg.norm(_to_numpy(ops.cast(tensor, "float32")).ravel()))

    stream_norms = np.array([norm(grad) for grad in stream_grads], dtype="float64")
    weight_grad_norms = np.array([norm(grad) for grad in weight_grads])
    block_norms = []
    for block in chain.blocks:
        mine = {id(weight) for weight in block.trainable_weights}
        block_norms.append(math.sqrt(sum(
            value**2 for weight, value in zip(weights, weight_grad_norms) if id(weight) in mine
        )))
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = stream_norms[0] / stream_norms[-1] if stream_norms[-1] else float("nan")
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "stream_grad_norms": stream_norms,
        "gain": float(gain),
        "weight_names": [weight.path for weight in weights],
        "weight_grad_norms": weight_grad_norms,
        "block_weight_grad_norms": np.array(block_norms, dtype="float64"),
        "weight_norms": np.array([norm(weight) for weight in weights]),
        "loss": float(_to_numpy(value)),
        "training": bool(training),
    }
