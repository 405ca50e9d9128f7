"""The loss gradient along the residual stream and for every weight (`gradient_norms`)."""

import math
from typing import Optional

import keras
import numpy as np
from keras import ops

from residual_keras._types import ArrayLike, BlockNames, LossLike, Results
from residual_keras.diagnostics import _autodiff, _inputs, _losses
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import instrument
from residual_keras.diagnostics._tensors import _to_numpy


@instrument
def gradient_norms(
    model: keras.Model,
    x: ArrayLike,
    y: Optional[ArrayLike] = None,
    *,
    loss: LossLike = None,
    training: bool = True,
    blocks: BlockNames = None,
    seed: int = 0,
    output_index: Optional[int] = None,
) -> Results:
    """Norms of the loss gradient along the residual stream and for every weight.

    Runs one forward and backward pass of the whole model and records
    `||dLoss/dx_l||` at every stream point (`x_0` = first block's input,
    `x_l` = block l+1's input, `x_L` = last block's output) and
    `||dLoss/dW||` for every trainable weight. `dLoss/dx_l` is the gradient
    that reaches x_l through the blocks after it (a skip around the blocks,
    such as EDSR's global one, carries its own gradient to the first block's
    input, which is not counted). The residual identity path
    keeps `||dLoss/dx_0||` within a modest factor of `||dLoss/dx_L||`; a
    plain stack multiplies L Jacobians.

    BatchNorm mode matters; `training=True` (the default) measures what a
    training step sees: batch statistics, whose own gradient is part of the
    chain. At initialisation:

    - training mode: in a plain BatchNorm network the input gradient grows
      with depth (each BN divides by the batch standard deviation of its
      input, and backpropagation through the batch statistics amplifies;
      Yang et al. 2019): tests/library/test_models.py measures a 50-block width-8
      stack, whose plain gain is more than 1000 times its residual twin's.
    - inference mode (`training=False`, moving statistics at their initial
      mean 0 and variance 1): the BNs are nearly identities and the network
      behaves like an unnormalised He-initialised one, `cifar_resnet(...,
      block=blocks.basic(norm="none"))`: there the residual stream, and with it the residual
      gain, grows exponentially with depth, and the plain gain drifts away
      from 1 as a product of L Jacobians (`python -m tracks.vision diagnose`
      measures both at 20, 56 and 110 layers).

    The model is left exactly as it was: the BatchNorm statistics and
    seed generators a training-mode pass moves are written back.

    Differentiates with the backend's autodiff (`_autodiff`: TensorFlow, JAX or PyTorch).

    Args:
        model: a keras.Model of any shape (functional, Sequential or
            subclassed; nested stages, several outputs, skips around the
            blocks: see `residual_keras.diagnostics`). Its blocks are the
            layers that implement the residual protocol (a
            `residual_steps()` method: the package's blocks,
            `residual_keras.Residual` or a layer of your own), at any depth,
            as `residual_keras.diagnostics.blocks(model)` lists them; or
            the layers `blocks` names, which need not implement it.
        x: a batch of model inputs, or a dataset of (x, y) batches whose
            first batch is used (see `residual_keras.diagnostics`).
        y: targets for `loss` (a dict keyed by output name for a model with
            several outputs), or None. With y=None the targets are random
            labels in the form the loss reads (integers over the last axis
            of the output for a classifier, 0/1 for a one-unit output, numpy
            seed `seed`): the loss is then the cross-entropy a network sees
            on data it cannot have learnt, which at initialisation is typical
            of real data. An output that is not a classifier's (an image)
            needs y.
        loss: None (the loss of `model.compile`, else the cross-entropy that
            fits the output: of logits or of probabilities, binary for one
            unit), a Keras loss (name or object) or a callable
            `loss(y_true, y_pred)`; per-example values are averaged. Where
            the output carries a Keras mask (a per-token output after
            `Embedding(mask_zero=True)` or `Masking`), over its real
            positions only, as Keras' losses average:
            `keras.losses.SparseCategoricalCrossentropy()(y, model(x))`.
        training: bool. Mode of BatchNorm/Dropout in the pass. Default True.
        blocks: optional list of layer names (or layers) to use as blocks.
        seed: int. Seed of the random labels. Default 0.
        output_index: int or output name, for a model with several outputs:
            the one the loss reads. Default None: the only output (or the
            one `model.compile` gave a loss to).

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
    _autodiff.require_autodiff("gradient_norms")
    x, y = _inputs.one_batch(x, y)
    forward = Forward(model, blocks)
    first = forward.run(x)  # inference mode: the blocks' order and the stream's shapes
    objective = _losses.objective(model, first.model_outputs, loss, output_index)
    targets = objective.random_targets(seed) if y is None else objective.targets(y)
    mask = _losses.output_mask(objective.output)  # the padding Keras' loss leaves out, or None
    weights = list(model.trainable_weights)

    def loss_value(*perturbations):
        # x_l + 0: the gradient with respect to the zero is dLoss/dx_l.
        trace = forward.run(x, training=training,
                            edit=lambda point, tensor: tensor + perturbations[point])
        output, _, _ = _losses.choose_output(model, trace.model_outputs, objective.index)
        return objective(targets, output, mask)

    zeros = [ops.zeros_like(point) for point in first.points]
    value, stream_grads, weight_grads = _autodiff.value_and_gradients(loss_value, zeros, weights)

    def norm(tensor):
        if tensor is None:
            return 0.0
        return float(np.linalg.norm(_to_numpy(ops.cast(tensor, "float32")).ravel()))

    stream_norms = np.array([norm(grad) for grad in stream_grads], dtype="float64")
    weight_grad_norms = np.array([norm(grad) for grad in weight_grads])
    block_norms = []
    for block in forward.blocks:
        mine = {id(weight) for weight in block.trainable_weights}
        block_norms.append(math.sqrt(sum(
            value**2 for weight, value in zip(weights, weight_grad_norms) if id(weight) in mine
        )))
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = stream_norms[0] / stream_norms[-1] if stream_norms[-1] else float("nan")
    return {
        "model": forward.model_name,
        "names": list(forward.names),
        "stream_grad_norms": stream_norms,
        "gain": float(gain),
        "weight_names": [weight.path for weight in weights],
        "weight_grad_norms": weight_grad_norms,
        "block_weight_grad_norms": np.array(block_norms, dtype="float64"),
        "weight_norms": np.array([norm(weight) for weight in weights]),
        "loss": float(_to_numpy(value)),
        "training": bool(training),
    }
