"""Removing blocks of a trained network (Veit et al. 2016): `lesion`."""

import numpy as np
from keras import ops

from residual_keras._checks import check_positive_int
from residual_keras.diagnostics._blocks import _Chain
from residual_keras.diagnostics._tensors import _default_loss, _to_numpy
from residual_keras.fixup import FixupBasicBlock
from residual_keras.preact_blocks import PreActBasicBlock
from residual_keras.resnet_blocks import _ConvBlock
from residual_keras.transformer import TransformerBlock

METRICS = ("accuracy", "crossentropy")


def _lesioned_block(block, input_shape):
    """(function without the block's branch, description) or (None, reason).

    Residual CNN blocks become `ReLU(shortcut(x))`, Transformer blocks the
    identity; a plain block (no shortcut) becomes the identity where its
    output has its input's shape, and cannot be removed otherwise.
    """
    if isinstance(block, _ConvBlock) and block.residual:

        def shortcut_only(x):
            if block.shortcut_layer is not None:
                x = block.shortcut_layer(x, training=False)
            return ops.relu(x)

        return shortcut_only, "ReLU(shortcut(x))"
    if isinstance(block, PreActBasicBlock) and block.residual:

        def preact_shortcut_only(x):
            if block.shortcut_layer is not None:
                x = block.shortcut_layer(x, training=False)
            return x

        return preact_shortcut_only, "shortcut(x)"
    if isinstance(block, FixupBasicBlock):

        def fixup_shortcut_only(x):
            if block.shortcut_layer is not None:
                x = block.shortcut_layer(block.bias1(x))
            return ops.relu(x)

        return fixup_shortcut_only, "ReLU(shortcut(x))"
    if isinstance(block, TransformerBlock):
        # Also skips a Post-LN block's LayerNorms, which sit on the stream.
        return (lambda x: x), "identity"
    output_shape = tuple(block.output.shape)
    if tuple(input_shape) == output_shape:
        return (lambda x: x), "identity"
    return None, f"shape changes {tuple(input_shape)} -> {output_shape}"


def _batches(data, batch_size):
    """(x, y) numpy batches from a tuple of arrays or an iterable of batches."""
    if isinstance(data, tuple) and len(data) == 2:
        x, y = data
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"x and y differ in length: {len(x)} != {len(y)}.")
        for start in range(0, len(x), batch_size):
            yield x[start : start + batch_size], y[start : start + batch_size]
        return
    for batch in data:
        if not (isinstance(batch, (tuple, list)) and len(batch) >= 2):
            raise ValueError(
                "dataset_or_xy must be (x, y) arrays or yield (x, y) batches; got "
                f"an element of type {type(batch).__name__}."
            )
        yield _to_numpy(batch[0]), _to_numpy(batch[1])


def _resolve_metric(metric):
    if callable(metric):
        return getattr(metric, "__name__", "metric"), metric
    if metric == "accuracy":

        def accuracy(y_true, y_pred):
            if y_true.shape == y_pred.shape:  # one-hot targets
                y_true = np.argmax(y_true, axis=-1)
            return float(np.mean(np.argmax(y_pred, axis=-1) == y_true))

        return "accuracy", accuracy
    if metric == "crossentropy":

        def crossentropy(y_true, y_pred):
            return float(_to_numpy(_default_loss(y_true, y_pred)))

        return "crossentropy", crossentropy
    raise ValueError(
        f"Unknown metric={metric!r}. Accepted: {', '.join(map(repr, METRICS))} "
        "or a callable metric(y_true, y_pred) -> float on numpy arrays."
    )


def lesion(model, dataset_or_xy, *, metric="accuracy", batch_size=64, blocks=None):
    """Metric of the intact model and with each single block removed (Veit et al. 2016).

    Removing a residual block keeps its shortcut and drops its branch:
    `x_l = ReLU(shortcut(x_{l-1}))` for `BasicBlock`/`BottleneckBlock`/
    `FixupBasicBlock`, `x_l = x_{l-1}` for a `TransformerBlock` (for Post-LN
    this also skips the block's LayerNorms). A plain block (or any other
    layer passed in `blocks`) is replaced by the identity where its output
    has its input's shape; where the shape changes it cannot be removed and
    its entry is None. Everything runs in inference mode; the model itself is
    never modified (the lesioned forward pass calls the other layers
    directly).

    Args:
        model: keras.Model built from residual_keras blocks.
        dataset_or_xy: `(x, y)` numpy arrays, or an iterable of `(x, y)`
            batches (a `tf.data.Dataset`, a list...).
        metric: "accuracy" (argmax of the output against integer or one-hot
            targets; for a language model over all positions),
            "crossentropy" (mean sparse categorical cross-entropy of logits)
            or a callable `metric(y_true, y_pred)` on numpy arrays returning
            a float. Per-batch values are averaged weighted by batch size.
            Default "accuracy".
        batch_size: int. Batch size when given arrays. Default 64.
        blocks: optional list of layer names (or layers) to use as blocks.

    Returns:
        dict with `model`, `names` (L block names), `metric` (its name),
        `intact` (float), `lesioned` (L floats, None where a block cannot be
        removed) and `removed_as` (L strings: what replaced each block, or
        why it could not be removed).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    chain = _Chain(model, blocks)
    metric_name, metric_fn = _resolve_metric(metric)
    replacements = [
        _lesioned_block(block, block.input.shape) for block in chain.blocks
    ]
    totals = np.zeros(len(chain.blocks) + 1)
    count = 0
    for x, y in _batches(dataset_or_xy, batch_size):
        points = [chain.first_input(ops.convert_to_tensor(x), False)]
        for index in range(len(chain.blocks)):
            points.append(chain.step(index, points[-1], False))
        totals[0] += len(x) * metric_fn(y, _to_numpy(chain.output(points[-1], False)))
        for index, (replacement, _) in enumerate(replacements):
            if replacement is None:
                continue
            stream = chain.step(index, points[index], False, block_fn=replacement)
            for later in range(index + 1, len(chain.blocks)):
                stream = chain.step(later, stream, False)
            totals[index + 1] += len(x) * metric_fn(
                y, _to_numpy(chain.output(stream, False))
            )
        count += len(x)
    if count == 0:
        raise ValueError("dataset_or_xy yielded no examples.")
    means = totals / count
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "metric": metric_name,
        "intact": float(means[0]),
        "lesioned": [
            None if replacement is None else float(means[index + 1])
            for index, (replacement, _) in enumerate(replacements)
        ],
        "removed_as": [description for _, description in replacements],
    }
