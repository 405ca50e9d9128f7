"""Removing and reordering blocks of a trained network (Veit et al. 2016).

Veit, Wilber and Belongie 2016, "Residual Networks Behave Like Ensembles of
Relatively Shallow Networks": unrolled, n residual blocks are 2^n paths from
input to output (each block either through its branch or its shortcut), so
deleting a block removes only half of the paths and leaves the other half
intact; a plain network has one path, and deleting any layer breaks it.

- `lesion`: the metric with each single block removed;
- `delete_blocks`: with k randomly chosen blocks removed at once, k = 1..n;
- `swap_blocks`: with two adjacent blocks exchanged;
- `lesion_sublayers`: with the attention or the feed-forward sublayer of one
  Transformer block removed.

A removed residual block keeps its shortcut: `ReLU(shortcut(x))` for the
original blocks (`BasicBlock`, `BottleneckBlock`, `FixupBasicBlock`),
`shortcut(x)` for `PreActBasicBlock`, `x` for a `TransformerBlock` (for
Post-LN this also skips the block's LayerNorms). A plain block (or any other
layer passed in `blocks`) becomes the identity where its output has its
input's shape and cannot be removed where the shape changes. Everything runs
in inference mode; the model itself is never modified (the lesioned forward
pass calls the other layers directly).
"""

import numpy as np
from keras import ops

from residual_keras._checks import check_positive_int
from residual_keras.diagnostics._blocks import _Chain, residual_parts
from residual_keras.diagnostics._tensors import _default_loss, _to_numpy
from residual_keras.transformer import TransformerBlock

METRICS = ("accuracy", "crossentropy")


def _lesioned_block(block, input_shape):
    """(function without the block's branch, description) or (None, reason)."""
    parts = residual_parts(block)
    if parts is not None:
        _, shortcut, after = parts
        relu = after is ops.relu
        return (lambda x: after(shortcut(x))), ("ReLU(shortcut(x))" if relu else "shortcut(x)")
    if isinstance(block, TransformerBlock):
        return (lambda x: x), "identity"
    output_shape = tuple(block.output.shape)
    if tuple(input_shape) == output_shape:
        return (lambda x: x), "identity"
    return None, f"shape changes {tuple(input_shape)} -> {output_shape}"


def _keeps_shape(block):
    return tuple(block.input.shape) == tuple(block.output.shape)


def _run_plans(chain, dataset_or_xy, batch_size, metric_fn, plans):
    """Metric of the intact chain and of each plan, averaged over the data.

    A plan is a dict {block index: function used instead of that block}; the
    forward pass restarts from the cached stream at the first changed block.
    Returns a float array: [intact, plan 1, plan 2, ...].
    """
    totals = np.zeros(len(plans) + 1)
    count = 0
    for x, y in _batches(dataset_or_xy, batch_size):
        points = [chain.first_input(ops.convert_to_tensor(x), False)]
        for index in range(len(chain.blocks)):
            points.append(chain.step(index, points[-1], False))
        totals[0] += len(x) * metric_fn(y, _to_numpy(chain.output(points[-1], False)))
        for number, plan in enumerate(plans, start=1):
            start = min(plan)
            stream = points[start]
            for index in range(start, len(chain.blocks)):
                stream = chain.step(index, stream, False, block_fn=plan.get(index))
            totals[number] += len(x) * metric_fn(y, _to_numpy(chain.output(stream, False)))
        count += len(x)
    if count == 0:
        raise ValueError("dataset_or_xy yielded no examples.")
    return totals / count


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

    What replaces a removed block: see the module docstring. Where a block
    cannot be removed (a plain block that changes shape) its entry is None.

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
    removable = [index for index, (replacement, _) in enumerate(replacements) if replacement]
    means = _run_plans(
        chain, dataset_or_xy, batch_size, metric_fn,
        [{index: replacements[index][0]} for index in removable],
    )
    by_block = dict(zip(removable, means[1:]))
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "metric": metric_name,
        "intact": float(means[0]),
        "lesioned": [
            float(by_block[index]) if index in by_block else None
            for index in range(len(chain.blocks))
        ],
        "removed_as": [description for _, description in replacements],
    }


def delete_blocks(
    model, dataset_or_xy, *, num_removed=None, draws=5, metric="accuracy", batch_size=64,
    blocks=None, seed=0,
):
    """The metric with k randomly chosen blocks removed at once (Veit et al. 2016, figure 5a).

    The candidates are the blocks whose output has their input's shape (a
    plain network can lose only those, so residual and plain twins are
    compared on the same blocks; the downsampling blocks are left in place:
    `lesion` shows what removing one of them does). For each k, `draws`
    different random sets of k candidates are removed (all of them when
    there are fewer distinct sets).

    Args:
        model, dataset_or_xy, metric, batch_size, blocks: as in `lesion`.
        num_removed: iterable of k values, or None for 1..n (n candidates).
        draws: int. Random sets per k. Default 5.
        seed: int. Seed of the random sets. Default 0.

    Returns:
        dict with `model`, `names` (L block names), `candidates` (names of
        the n removable same-shape blocks), `metric`, `intact`,
        `num_removed` (the k values), `removed` (per k, the list of removed
        block names of each draw), `values` (per k, the metric of each draw)
        and `mean` (per k, their mean).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    draws = check_positive_int("draws", draws)
    chain = _Chain(model, blocks)
    metric_name, metric_fn = _resolve_metric(metric)
    candidates = []
    replacements = {}
    for index, block in enumerate(chain.blocks):
        replacement, _ = _lesioned_block(block, block.input.shape)
        if replacement is not None and _keeps_shape(block):
            candidates.append(index)
            replacements[index] = replacement
    if not candidates:
        raise ValueError(f"Model {chain.model_name!r} has no block that can be removed.")
    ks = list(range(1, len(candidates) + 1)) if num_removed is None else [int(k) for k in num_removed]
    for k in ks:
        if not 1 <= k <= len(candidates):
            raise ValueError(f"num_removed must be between 1 and {len(candidates)} (the removable blocks), got {k}.")
    rng = np.random.default_rng(seed)
    sets = []
    for k in ks:
        chosen = []
        for _ in range(draws * 20):  # distinct sets; give up when there are fewer than `draws`
            pick = tuple(sorted(rng.choice(candidates, size=k, replace=False).tolist()))
            if pick not in chosen:
                chosen.append(pick)
            if len(chosen) == draws:
                break
        sets.append(chosen)
    plans = [{index: replacements[index] for index in pick} for chosen in sets for pick in chosen]
    means = _run_plans(chain, dataset_or_xy, batch_size, metric_fn, plans)
    values, position = [], 1
    for chosen in sets:
        values.append([float(value) for value in means[position : position + len(chosen)]])
        position += len(chosen)
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "candidates": [chain.names[index] for index in candidates],
        "metric": metric_name,
        "intact": float(means[0]),
        "num_removed": ks,
        "removed": [[[chain.names[index] for index in pick] for pick in chosen] for chosen in sets],
        "values": values,
        "mean": [float(np.mean(row)) for row in values],
    }


def swap_blocks(model, dataset_or_xy, *, metric="accuracy", batch_size=64, blocks=None):
    """The metric with each pair of adjacent blocks exchanged (Veit et al. 2016, figure 5b).

    Only pairs of blocks that both keep their input's shape can be swapped
    (any other order would not fit together); with none, `pairs` is empty.

    Returns:
        dict with `model`, `names`, `metric`, `intact`, `pairs` (the
        [name, name] of each swappable adjacent pair) and `swapped` (the
        metric with that pair exchanged).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    chain = _Chain(model, blocks)
    metric_name, metric_fn = _resolve_metric(metric)

    def run(block):
        return lambda x: block(x, training=False)

    pairs = [
        index for index in range(len(chain.blocks) - 1)
        if _keeps_shape(chain.blocks[index]) and _keeps_shape(chain.blocks[index + 1])
    ]
    plans = [
        {index: run(chain.blocks[index + 1]), index + 1: run(chain.blocks[index])} for index in pairs
    ]
    means = _run_plans(chain, dataset_or_xy, batch_size, metric_fn, plans)
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "metric": metric_name,
        "intact": float(means[0]),
        "pairs": [[chain.names[index], chain.names[index + 1]] for index in pairs],
        "swapped": [float(value) for value in means[1:]],
    }


def lesion_sublayers(model, dataset_or_xy, *, metric="crossentropy", batch_size=64, blocks=None):
    """The metric with one Transformer sublayer removed: each block's attention, then its feed-forward.

    A removed sublayer writes nothing: the stream passes on as `x` (Pre-LN,
    ReZero, and the identity in a plain twin) or `LN(x)` (Post-LN, whose
    LayerNorm sits on the stream).

    Args:
        model, dataset_or_xy, batch_size, blocks: as in `lesion`; every block
            must be a `TransformerBlock`.
        metric: as in `lesion`. Default "crossentropy".

    Returns:
        dict with `model`, `names`, `metric`, `intact`, `attention` and
        `feedforward` (L floats: the metric with that block's sublayer removed).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    chain = _Chain(model, blocks)
    for block in chain.blocks:
        if not isinstance(block, TransformerBlock):
            raise TypeError(f"lesion_sublayers needs TransformerBlocks; {block.name!r} is a {type(block).__name__}.")
    metric_name, metric_fn = _resolve_metric(metric)

    def without(block, removed):
        def skip(x, norm):
            return norm(x) if block.norm_position == "post" and block.uses_layer_norm else x

        def run(x):
            if removed == "attention":
                x = skip(x, block.attention_norm)
            else:
                x = block.join(x, block.attention_branch(x, training=False), block.attention_norm)
            if removed == "feedforward":
                return skip(x, block.feedforward_norm)
            return block.join(x, block.feedforward_branch(x, training=False), block.feedforward_norm)

        return run

    plans = [
        {index: without(block, removed)}
        for removed in ("attention", "feedforward")
        for index, block in enumerate(chain.blocks)
    ]
    means = _run_plans(chain, dataset_or_xy, batch_size, metric_fn, plans)
    count = len(chain.blocks)
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "metric": metric_name,
        "intact": float(means[0]),
        "attention": [float(value) for value in means[1 : 1 + count]],
        "feedforward": [float(value) for value in means[1 + count :]],
    }
