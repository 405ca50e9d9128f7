"""Spectral norms of the stream's Jacobians by power iteration (`jacobian_norm`)."""

from typing import Sequence, Union

import keras
import numpy as np
from keras import ops

from residual_keras._types import ArrayLike, BlockNames, Results
from residual_keras.checks import check_positive_int
from residual_keras.diagnostics import _autodiff, _inputs
from residual_keras.diagnostics._block_search import _call, point_masks, steps_at
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import instrument
from residual_keras.steps import _apply
from residual_keras.diagnostics._tensors import (
    _TINY,
    _masked,
    _per_example_norm,
    _smallest_normal,
    _to_numpy,
)

_EAGER_ITERATIONS = 3  # power iterations run eagerly before tracing a tf.function
# Tracing costs about a second even for a tiny model: worth it only when this many
# iterations may remain after the eager ones (a 4-iteration estimate stays eager).
_MIN_TRACED_ITERATIONS = 10


def _compose(functions):
    def composed(x):
        for function in functions:
            x = function(x)
        return x

    return composed


def _on_real_positions(function, at, mask_in, mask_out):
    """`function` restricted to the real positions: its Jacobian is `M_out J M_in`.

    A padded position neither moves (the tangent there is held at 0, the
    input stays `at`) nor counts in the output, so the spectral norm is that
    of the map between the real positions, as the blocks treat them. The
    identity when neither mask is given.
    """
    if mask_in is None and mask_out is None:
        return function

    def restricted(z):
        if mask_in is not None:
            z = at + _masked(z - at, mask_in)
        return _masked(function(z), mask_out)

    return restricted


def _spectral_norm(function, x, v, num_iterations, tolerance):
    """Per-example `||d function / d x||_2` by power iteration on `J^T J`.

    Each iteration is one forward pass with a forward-mode tangent (u = J v)
    and one backward pass (J^T u), `_autodiff.linearize`. Examples are
    normalised separately, which is exact when the function treats examples
    independently (inference mode). The backward pass is seeded with
    u / ||u|| so that tiny gains (0.2^50) do not underflow. On TensorFlow,
    when enough iterations may remain after the first few (which often
    suffice), the rest run as a traced graph; a function that cannot be
    traced runs eagerly throughout. Returns (sigma (B,) numpy, v,
    iterations used, converged).
    """

    def normalise(tensor):
        # Scaled norms: squares of float32 entries near 1e-30 would underflow.
        norms = _per_example_norm(tensor)
        smallest = _smallest_normal(tensor.dtype)
        divisor = ops.cast(ops.maximum(norms, smallest), tensor.dtype)
        shape = (-1,) + (1,) * (len(tensor.shape) - 1)
        return tensor / ops.reshape(divisor, shape), norms

    def power_step(v):
        u, pullback = _autodiff.linearize(function, x, v)
        u_unit, sigma = normalise(u)
        return normalise(pullback(u_unit))[0], sigma

    v, _ = normalise(v)
    previous = None
    step = power_step
    worth_tracing = num_iterations - _EAGER_ITERATIONS >= _MIN_TRACED_ITERATIONS
    for iteration in range(1, num_iterations + 1):
        if worth_tracing and iteration == _EAGER_ITERATIONS + 1:
            step = _autodiff.trace(power_step)  # tracing pays off only when not converged
            try:
                v, sigma = step(v)
            except Exception:  # noqa: BLE001  (a function that cannot be traced: eagerly, as before)
                step = power_step
                v, sigma = step(v)
        else:
            v, sigma = step(v)
        sigma = _to_numpy(sigma).astype("float64")
        if previous is not None:
            change = np.abs(sigma - previous) / np.maximum(np.abs(sigma), _TINY)
            if np.all(change <= tolerance):
                return sigma, v, iteration, True
        previous = sigma
    return sigma, v, num_iterations, False


@instrument
def jacobian_norm(
    model_or_layers: Union[keras.Model, Sequence[keras.layers.Layer]],
    x: ArrayLike,
    *,
    num_iterations: int = 100,
    tolerance: float = 1e-5,
    per_block: bool = True,
    cumulative: bool = False,
    per_branch: bool = False,
    blocks: BlockNames = None,
    seed: int = 0,
) -> Results:
    """Spectral norm of `d x_L / d x_0` (and of each block's Jacobian), per example.

    `x_0` is the first block's input and `x_L` the last block's output. The
    largest singular value is found by power iteration on `J^T J`, each step
    a Jacobian-vector product (forward mode) and a vector-Jacobian product
    (backward mode): the Jacobian itself is never formed, so this works for
    full-size networks. A plain stack's norm is bounded by the product of
    its blocks' norms (`c^L` if each stretches by c). For blocks `x + f(x)`
    whose branches have `||J_f|| <= eps_l`, the norm lies between
    `prod (1 - eps_l)` and `prod (1 + eps_l)`; it is exactly 1 when every
    branch is 0 at initialisation. Measured residual networks at
    initialisation have branches with `eps_l` near or above 1, so their norm
    can be large (`per_branch=True` gives the eps_l).

    `x_0` and `x_L` are as the whole model computes them, whatever its shape
    (blocks in nested stages, a skip around them, several outputs): the
    function x_0 -> x_l is the model run with x_0 replaced (`_forward`), so
    the layers between blocks count as part of the block before them.

    The model runs in inference mode (BatchNorm with its moving statistics,
    no Dropout), so that examples do not interact and each example's
    Jacobian is a separate matrix: the result has one norm per example. In
    training mode BatchNorm couples the examples of a batch and there is no
    per-example Jacobian. At initialisation the moving statistics are still
    (0, 1), so inference-mode BatchNorm normalises nothing: call
    `calibrate_batchnorm(model, x)` first to measure the network as its first
    training step computes it.

    A padding mask (a Keras mask, as `Embedding(mask_zero=True)` makes, or
    `padding_mask=`) restricts each Jacobian to the real positions: padded
    positions are neither perturbed nor measured, as the other instruments
    leave them out.

    Differentiates with the backend's autodiff (`_autodiff`: TensorFlow, JAX or PyTorch). float32 cannot represent gains below about 1e-38.

    Power iteration approaches the largest singular value from below, at a
    rate set by the gap to the second one: where many singular values are
    close (BatchNorm ResNets in inference mode at initialisation, say), an
    unconverged estimate is a lower bound. `converged` says whether every
    estimate met `tolerance` within `num_iterations`.

    Args:
        model_or_layers: a keras.Model of any shape whose blocks implement
            the residual protocol, or any keras.Model with `blocks` naming
            the layers to measure (see `gradient_norms`; `per_branch` reads
            the protocol's branches); or a list of layers/callables applied
            one after another (block l maps x_{l-1} to x_l; Keras layers are
            called with `training=False`).
        x: a batch of inputs: model inputs for a model (x_0 is computed from
            them), x_0 itself for a list.
        num_iterations: int. Maximum power iterations per estimate.
            Default 100.
        tolerance: float. Stop when every example's estimate changes by at
            most this relative amount in one iteration. Default 1e-5.
        per_block: bool. Also compute each block's own Jacobian norm at the
            input it receives. Default True.
        per_branch: bool. Also compute the norm of each residual block's
            branch Jacobian `||d f_l / d x||` at its input (None for plain
            blocks and blocks of several steps, such as Transformer blocks;
            models only).
            Default False.
        cumulative: bool or int. Also compute `||d x_l / d x_0||` for every
            l = 1..L (True), or for every k-th l and l = L (an int k), for
            plotting norm vs depth; costs O(L^2 / k) block evaluations, each
            depth warm-started from the previous one's singular vector.
            Default False.
        blocks: optional list of layer names (or layers) to use as blocks of
            a model.
        seed: int. Seed of the random start vectors. Default 0. (On
            TensorFlow a long power iteration runs as a traced graph after
            its first 3 steps, and eagerly when the function cannot be
            traced; JAX and PyTorch run eagerly.)

    Returns:
        dict with `model` (str or None), `names` (L block names), `total`
        (float64 array (B,): ||d x_L / d x_0|| per example), `per_block`
        ((L, B) array or None), `per_branch` (list of L (B,) arrays or
        None entries, or None), `cumulative_depths` (the l of each row of
        `cumulative`, or None), `cumulative` ((L, B) array, row l-1 =
        ||d x_l / d x_0||, or None), `iterations` (the most power
        iterations any estimate used) and `converged` (bool: all estimates
        met `tolerance`).
    """
    _autodiff.require_autodiff("jacobian_norm")
    num_iterations = check_positive_int("num_iterations", num_iterations)
    x = _inputs.one_batch(x)[0]
    forward = None
    if isinstance(model_or_layers, keras.Model):
        forward = Forward(model_or_layers, blocks)
        first = forward.run(x)
        model_name = forward.model_name
        names = list(forward.names)
        x0 = first.points[0]
        masks = point_masks(first)

        def segment(start, stop):  # x_start -> x_stop as the model computes it, on the real positions
            at = first.points[start]
            return _on_real_positions(forward.segment(x, first, start, stop), at, masks[start], masks[stop])

    elif isinstance(model_or_layers, (list, tuple)) and model_or_layers:
        if blocks is not None:
            raise ValueError("blocks= applies to a model, not to a list of layers.")
        for layer in model_or_layers:
            if not callable(layer):
                raise TypeError(f"Every block must be callable, got {layer!r}.")
        model_name = None
        names = [
            layer.name if isinstance(layer, keras.layers.Layer) else f"block{i + 1}"
            for i, layer in enumerate(model_or_layers)
        ]
        steps = [
            (lambda x, layer=layer: _call(layer, x, False)) for layer in model_or_layers
        ]
        x0 = ops.convert_to_tensor(x)
        masks = None

        def segment(start, stop):
            return _compose(steps[start:stop])

    else:
        raise TypeError(
            "model_or_layers must be a keras.Model or a non-empty list of layers/"
            f"callables, got {model_or_layers!r}."
        )
    if "float" not in keras.backend.standardize_dtype(x0.dtype):
        raise TypeError(
            f"The first block's input must be floating point, got dtype {x0.dtype}."
        )

    # numpy's generator: the same start vectors, so the same iterates, on every backend.
    rng = np.random.default_rng(seed)
    iterations = 0
    converged = True

    def start_vector(like):
        start = rng.standard_normal(tuple(like.shape)).astype("float32")
        return ops.cast(ops.convert_to_tensor(start), like.dtype)

    def estimate(function, at, v):
        nonlocal iterations, converged
        sigma, v, used, done = _spectral_norm(function, at, v, num_iterations, tolerance)
        iterations = max(iterations, used)
        converged = converged and done
        return sigma, v

    result = {"model": model_name, "names": names}
    result.update(per_block=None, cumulative=None, cumulative_depths=None)
    depth = len(names)
    if per_branch and forward is None:
        raise ValueError("per_branch=True needs a model (its blocks' branches), not a list of layers.")
    if cumulative:
        stride = 1 if cumulative is True else check_positive_int("cumulative", cumulative)
        depths = sorted(set(range(stride, depth + 1, stride)) | {depth})
        rows = []
        v = start_vector(x0)
        for stop in depths:
            sigma, v = estimate(segment(0, stop), x0, v)
            rows.append(sigma)
        result["cumulative"] = np.stack(rows)
        result["cumulative_depths"] = depths
        result["total"] = result["cumulative"][-1].copy()
    else:
        result["total"], _ = estimate(segment(0, depth), x0, start_vector(x0))
    if per_block:
        rows = []
        stream = x0
        for index in range(depth):
            sigma, _ = estimate(segment(index, index + 1), stream, start_vector(stream))
            rows.append(sigma)
            stream = first.points[index + 1] if forward is not None else steps[index](stream)
        result["per_block"] = np.stack(rows)
    result["per_branch"] = None
    if per_branch:
        rows = []
        for position, stream in enumerate(first.inputs):
            steps = steps_at(forward, first, position)
            if len(steps) != 1 or not steps[0].residual:
                rows.append(None)
            else:
                branch = steps[0].branch
                mask = masks[position]
                function = _on_real_positions(lambda z, branch=branch: _apply(branch, z), stream, mask, mask)
                sigma, _ = estimate(function, stream, start_vector(stream))
                rows.append(sigma)
        result["per_branch"] = rows
    result["iterations"] = iterations
    result["converged"] = converged
    return result
