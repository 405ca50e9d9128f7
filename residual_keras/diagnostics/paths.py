"""The gradient carried by paths of each length (Veit et al. 2016, figure 6).

Unrolled, a network of n residual blocks `x_l = after(shortcut(x_{l-1}) +
branch(x_{l-1}))` is a sum over 2^n paths: at every block a path goes either
through the branch or along the shortcut. A path's length k is the number of
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

Where a block ends with a ReLU after the addition (the original block), the
gradient passes the ReLU's 0/1 mask first and then either way, as in Veit
et al.'s derivation. Everything runs in inference mode (BatchNorm with its
moving statistics, so each example is separate).

Uses `tf.GradientTape` (TensorFlow backend only).
"""

import math

import numpy as np
from keras import ops

from residual_keras._checks import check_positive_int
from residual_keras.diagnostics._blocks import _Chain, residual_parts
from residual_keras.diagnostics._tensors import _resolve_loss, _to_numpy


def path_gradients(model, x, y=None, *, samples=4, loss=None, blocks=None, seed=0):
    """Gradient norm at x_0 through single paths of each length k = 0..n.

    Args:
        model: keras.Model whose blocks are all residual conv blocks of the
            library (`BasicBlock`, `BottleneckBlock`, `PreActBasicBlock`,
            `FixupBasicBlock` with residual=True).
        x: a batch of model inputs.
        y: targets for the loss, or None for random integer labels over the
            model's last axis (numpy seed `seed`).
        samples: int. Random paths per length k (k = 0 and k = n have one
            path each, measured once). Default 4.
        loss: None (mean sparse categorical cross-entropy of logits), a Keras
            loss or a callable `loss(y_true, y_pred)`.
        blocks: optional list of layer names (or layers) to use as blocks.
        seed: int. Seed of the random labels and the sampled paths.

    Returns:
        dict with `model`, `names` (n block names), `lengths` (0..n),
        `num_paths` (C(n, k) as floats), `path_fraction` (C(n, k) / 2^n, the
        binomial distribution of path lengths), `gradient_per_path` (mean
        gradient norm at x_0 of one path of length k, over the sampled
        paths and the whole batch) and `gradient_total` (`num_paths *
        gradient_per_path`, the estimated gradient carried by all paths of
        length k), `gradient_share` (`gradient_total` normalised to sum 1)
        and `full_gradient` (the norm of the true gradient at x_0, for
        comparison: the paths' gradients add as vectors, not as norms).
    """
    import tensorflow as tf

    samples = check_positive_int("samples", samples)
    chain = _Chain(model, blocks)
    parts = []
    for block in chain.blocks:
        found = residual_parts(block)
        if found is None:
            raise ValueError(
                f"path_gradients needs residual conv blocks; {block.name!r} "
                f"({type(block).__name__}) has no branch/shortcut pair (a plain network has one path)."
            )
        parts.append(found)
    if any(piece is not None for piece in chain.between):
        raise ValueError("path_gradients needs the blocks to follow each other directly.")
    loss_fn = _resolve_loss(loss)
    rng = np.random.default_rng(seed)
    x = ops.convert_to_tensor(x)
    inputs = [chain.first_input(x, False)]
    for index in range(len(chain.blocks)):
        inputs.append(chain.step(index, inputs[-1], False))
    last = tf.convert_to_tensor(inputs[-1])
    with tf.GradientTape() as tape:
        tape.watch(last)
        outputs = chain.output(last, False)
        targets = y
        if targets is None:
            targets = rng.integers(0, outputs.shape[-1], size=tuple(outputs.shape[:-1]))
        value = ops.mean(ops.cast(loss_fn(ops.convert_to_tensor(targets), outputs), "float32"))
    upstream = tape.gradient(value, last)

    def block_backward(index):
        """g -> (through the branch, along the shortcut) for block `index` at its recorded input."""
        branch, shortcut, after = parts[index]
        at = tf.convert_to_tensor(inputs[index])

        @tf.function
        def backward(gradient):
            with tf.GradientTape(persistent=True) as inner:
                inner.watch(at)
                through_branch = branch(at)
                along_shortcut = shortcut(at)
                added = through_branch + along_shortcut
                out = after(added)
            masked = inner.gradient(out, added, output_gradients=gradient)
            first = inner.gradient(through_branch, at, output_gradients=masked)
            second = inner.gradient(along_shortcut, at, output_gradients=masked)
            del inner
            return first, second

        return backward

    backwards = [block_backward(index) for index in range(len(chain.blocks))]

    def one_path(through):
        gradient = upstream
        for index in reversed(range(len(chain.blocks))):
            via_branch, via_shortcut = backwards[index](gradient)
            gradient = via_branch if index in through else via_shortcut
        return float(np.linalg.norm(_to_numpy(gradient).ravel()))

    def full_gradient():
        gradient = upstream
        for index in reversed(range(len(chain.blocks))):
            via_branch, via_shortcut = backwards[index](gradient)
            gradient = via_branch + via_shortcut
        return float(np.linalg.norm(_to_numpy(gradient).ravel()))

    n = len(chain.blocks)
    per_path = []
    for k in range(n + 1):
        count = 1 if k in (0, n) else samples
        norms = [one_path(set(rng.choice(n, size=k, replace=False).tolist())) for _ in range(count)]
        per_path.append(float(np.mean(norms)))
    num_paths = np.array([float(math.comb(n, k)) for k in range(n + 1)])
    per_path = np.array(per_path)
    total = num_paths * per_path
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "lengths": np.arange(n + 1),
        "num_paths": num_paths,
        "path_fraction": num_paths / 2.0**n,
        "gradient_per_path": per_path,
        "gradient_total": total,
        "gradient_share": total / total.sum() if total.sum() > 0 else total,
        "full_gradient": full_gradient(),
    }
