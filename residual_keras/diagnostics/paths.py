"""The gradient carried by paths of each length (Veit et al. 2016, figure 6).

Unrolled, a network of n residual steps `x_l = post(shortcut(x_{l-1}) +
branch(x_{l-1}))` is a sum over 2^n paths: at every step a path goes either
through the branch or along the shortcut. A ResNet block is one step; a
Transformer block two (attention, then feed-forward: L blocks give 2L steps
and 2^(2L) paths). The steps are those of the residual protocol
(`residual_keras.steps`), so a student's own block counts as well. A path's length k is the number of
branches it passes; there are C(n, k) paths of length k, so path lengths
follow Binomial(n, 1/2) and most paths are about n/2 blocks deep.

Veit et al. measure which paths carry the gradient. One forward pass
records every block's input; in the backward pass, for a random set of k
blocks the gradient goes back through the branch only, and through the
shortcut only for the other n - k. The norm of what arrives at x_0 (the
first block's input) is the gradient of ONE path of length k; times C(n, k)
it estimates the total gradient that paths of length k carry. For ResNet-110
(54 blocks) they found almost all of it in paths of 5-17 blocks: the
effective paths are short, although the network is deep.

Where a step ends with something after the addition (the original block's
ReLU, Post-LN's LayerNorm), the gradient passes its Jacobian first and then
either way, as in Veit et al.'s derivation (for a ReLU, a 0/1 mask). Everything runs in inference mode (BatchNorm with its
moving statistics, so each example is separate).

Differentiates with the backend's autodiff (`_autodiff`: TensorFlow, JAX or PyTorch).
"""

import math
from typing import Optional

import keras
import numpy as np
from keras import ops

from residual_keras._types import ArrayLike, BlockNames, LossLike, Results
from residual_keras.checks import check_positive_int
from residual_keras.diagnostics import _autodiff, _inputs, _losses
from residual_keras.diagnostics._block_search import steps_at
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import instrument
from residual_keras.diagnostics._tensors import _to_numpy
from residual_keras.steps import _apply


@instrument
def path_gradients(
    model: keras.Model,
    x: ArrayLike,
    y: Optional[ArrayLike] = None,
    *,
    samples: int = 4,
    loss: LossLike = None,
    blocks: BlockNames = None,
    seed: int = 0,
    output_index: Optional[int] = None,
) -> Results:
    """Gradient norm at x_0 through single paths of each length k = 0..n.

    Args:
        model: keras.Model whose blocks are all residual (every step adds
            its shortcut: the package's blocks with residual=True,
            `Residual`, a layer of one's own with `residual_steps`), each
            taking the previous one's output (they may sit in nested stages,
            with a skip around them).
        x: a batch of model inputs, or a dataset of (x, y) batches whose
            first batch is used.
        y: targets for the loss, or None for random labels (as in
            `gradient_norms`, numpy seed `seed`).
        samples: int. Random paths per length k (k = 0 and k = n have one
            path each, measured once). Default 4.
        loss: None (the loss of `model.compile`, else the cross-entropy that
            fits the output), a Keras loss or a callable `loss(y_true, y_pred)`;
            over the real positions of a masked output (see `gradient_norms`).
        blocks: optional list of layer names (or layers) to use as blocks.
        seed: int. Seed of the random labels and the sampled paths.
        output_index: for a model with several outputs, the one the loss
            reads (see `gradient_norms`).

    Returns:
        dict with `model`, `names` (the n steps: block names, with the step
        appended for blocks of several steps, "block1 attention"), `lengths` (0..n),
        `num_paths` (C(n, k) as floats), `path_fraction` (C(n, k) / 2^n, the
        binomial distribution of path lengths), `gradient_per_path` (mean
        gradient norm at x_0 of one path of length k, over the sampled
        paths and the whole batch) and `gradient_total` (`num_paths *
        gradient_per_path`, the estimated gradient carried by all paths of
        length k), `gradient_share` (`gradient_total` normalised to sum 1)
        and `full_gradient` (the norm of the true gradient at x_0 through
        the blocks, for comparison: the paths' gradients add as vectors, not
        as norms).
    """
    _autodiff.require_autodiff("path_gradients")
    samples = check_positive_int("samples", samples)
    x, y = _inputs.one_batch(x, y)
    forward = Forward(model, blocks)
    first = forward.run(x)
    steps, step_inputs, names = [], [], []  # every residual step in order, and where it is evaluated
    for position, block_name in enumerate(forward.names):
        stream = first.inputs[position]
        mine = steps_at(forward, first, position)
        for step in mine:
            if not step.residual:
                raise ValueError(
                    f"path_gradients needs residual blocks; {block_name!r} "
                    f"({type(forward.blocks[position]).__name__}) has no branch/shortcut pair (a plain "
                    "network has one path)."
                )
            steps.append(step)
            step_inputs.append(stream)
            names.append(f"{block_name} {step.name}" if len(mine) > 1 and step.name else block_name)
            stream = step(stream)
    gap = forward.directly_chained(first)
    if gap is not None:
        raise ValueError(
            f"path_gradients needs each block to take the previous block's output; in model "
            f"{forward.model_name!r} a layer between {gap[0]!r} and {gap[1]!r} changes the "
            "stream. Pass blocks= with a run of blocks that follow each other directly."
        )
    objective = _losses.objective(model, first.model_outputs, loss, output_index)
    rng = np.random.default_rng(seed)
    targets = objective.random_targets(rng) if y is None else objective.targets(y)
    mask = _losses.output_mask(objective.output)  # the padding Keras' loss leaves out, or None
    last = len(forward.blocks)

    def loss_value(perturbation):
        # Every block reuses its recorded output; x_L + 0 carries the gradient at x_L.
        trace = forward.replay(
            x, first, start=last,
            edit=lambda point, tensor: tensor + perturbation if point == last else tensor,
        )
        output, _, _ = _losses.choose_output(model, trace.model_outputs, objective.index)
        return objective(targets, output, mask)

    _, (upstream,), _ = _autodiff.value_and_gradients(loss_value, [ops.zeros_like(first.points[-1])])
    if upstream is None:
        upstream = ops.zeros_like(first.points[-1])

    def step_backward(index):
        """g -> (through the branch, along the shortcut) for step `index` at its recorded input."""
        step, at = steps[index], step_inputs[index]

        def after(z):
            return z if step.post is None else _apply(step.post, z)

        def backward(gradient):
            (through_branch, along_shortcut), pullback = _autodiff.vjp(
                lambda z: (_apply(step.branch, z), _apply(step.shortcut, z)), at
            )
            _, after_pullback = _autodiff.vjp(after, through_branch + along_shortcut)
            masked = after_pullback(gradient)
            zeros = ops.zeros_like(masked)
            return pullback((masked, zeros)), pullback((zeros, masked))

        return _autodiff.trace(backward)

    backwards = [step_backward(index) for index in range(len(steps))]

    def one_path(through):
        gradient = upstream
        for index in reversed(range(len(steps))):
            via_branch, via_shortcut = backwards[index](gradient)
            gradient = via_branch if index in through else via_shortcut
        return float(np.linalg.norm(_to_numpy(gradient).ravel()))

    def full_gradient():
        gradient = upstream
        for index in reversed(range(len(steps))):
            via_branch, via_shortcut = backwards[index](gradient)
            gradient = via_branch + via_shortcut
        return float(np.linalg.norm(_to_numpy(gradient).ravel()))

    n = len(steps)
    per_path = []
    for k in range(n + 1):
        count = 1 if k in (0, n) else samples
        norms = [one_path(set(rng.choice(n, size=k, replace=False).tolist())) for _ in range(count)]
        per_path.append(float(np.mean(norms)))
    num_paths = np.array([float(math.comb(n, k)) for k in range(n + 1)])
    per_path = np.array(per_path)
    total = num_paths * per_path
    return {
        "model": forward.model_name,
        "names": names,
        "lengths": np.arange(n + 1),
        "num_paths": num_paths,
        "path_fraction": num_paths / 2.0**n,
        "gradient_per_path": per_path,
        "gradient_total": total,
        "gradient_share": total / total.sum() if total.sum() > 0 else total,
        "full_gradient": full_gradient(),
    }
