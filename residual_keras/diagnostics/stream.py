"""The residual stream: what each sublayer writes, and what each depth knows.

Elhage et al. 2021 ("A Mathematical Framework for Transformer Circuits"):
every attention and feed-forward sublayer reads the stream and adds its
output to it. In a Pre-LN (or ReZero) model nothing else touches the stream,
so after L blocks

    x_L = x_0 + sum_l (a_l + m_l),     a_l, m_l: what block l's attention and
                                        feed-forward sublayers wrote

exactly (`stream_decomposition`). Post-LN normalises the stream after every
addition, so there the sum does not hold. The logit lens (nostalgebraist
2020) reads the stream at every depth through the model's own head (final
LayerNorm and unembedding): the loss of that early read-out shows at which
depth the prediction forms (`logit_lens`).

The instruments read the blocks through the residual protocol
(`residual_keras.steps`): each block is one or more steps
`post(shortcut(x) + branch(x))` (a Transformer block two, attention and
feed-forward; a conv block or `Residual` one, named "branch" here), so they
measure any block a student writes as well as the package's. Masks the
blocks were called with (padding from `Embedding(mask_zero=True)`, say) are
used as the blocks used them, and padded positions are left out of the norms.
"""

from typing import Optional

import keras
import numpy as np

from residual_keras._types import ArrayLike, BlockNames, LossLike, Results
from residual_keras.diagnostics import _inputs, _losses
from residual_keras.diagnostics._block_search import padding_mask_at, point_masks, steps_at
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import instrument
from residual_keras.diagnostics._tensors import (
    _TINY,
    _masked,
    _per_example_masked_rms,
    _per_example_norm,
    _to_numpy,
)
from residual_keras.steps import identity


def step_names(forward, trace):
    """The names of the blocks' steps ("attention", "feedforward"; "branch" for an unnamed one).

    Every block must have the same steps, so that the results form a table.
    """
    names = None
    for position in range(len(forward.blocks)):
        mine = [step.name or "branch" for step in steps_at(forward, trace, position)]
        if names is None:
            names = mine
        elif mine != names:
            raise ValueError(
                f"The blocks of model {forward.model_name!r} have different steps "
                f"({forward.names[0]!r}: {names}, {forward.names[position]!r}: {mine}); this "
                "instrument compares one kind of block. Pass blocks= with blocks of one kind."
            )
    return names


def walk_steps(forward, trace, position):
    """[(step, its input, what its branch wrote, its output)] for block `position` as the run called it."""
    walked = []
    stream = trace.inputs[position]
    for step in steps_at(forward, trace, position):
        update = step.branch(stream)
        output = step(stream)
        walked.append((step, stream, update, output))
        stream = output
    return walked


@instrument
def stream_contributions(
    model: keras.Model, x: ArrayLike, *, training: bool = False, blocks: BlockNames = None
) -> Results:
    """Per block and per step, how much each branch adds to the stream it is added to.

    For a Transformer block with input `x` (B, T, C): the attention sublayer
    writes `a = attention_branch(x)` and the stream becomes `h` (`x + a` for
    Pre-LN and ReZero, `LN(x + a)` for Post-LN); the feed-forward sublayer
    then writes `m = feedforward_branch(h)`. The result gives, per example,

        attention   = ||a|| / ||x||        feedforward = ||m|| / ||h||

    with norms over all real (unpadded) positions and channels of one
    sequence: the size of each update relative to the stream it is added
    to. For a block with one step (a conv block, `Residual`), `branch` =
    ||f(x)|| / ||shortcut(x)||. ReZero blocks start at exactly 0; Pre-LN
    blocks with GPT-2's scaled output projections start small; in a plain
    twin the "update" replaces the stream (the ratio is ||f(x)|| / ||x||).
    Where an example's stream is exactly 0 (a ReLU after the addition can
    zero a narrow stream) the ratio has no value: NaN where the step writes
    0 too, inf where it writes something.

    Args:
        model: keras.Model with blocks (e.g. `transformer_lm`); every block
            must have the same steps.
        x: a batch of model inputs (token ids for `transformer_lm`), or a
            dataset whose first batch is used.
        training: bool. Mode of the run that records the blocks' inputs
            (Dropout); the steps themselves run in inference mode. Default False.
        blocks: optional list of layer names (or layers).

    Returns:
        dict with `model`, `names` (L block names), `steps` (the step names:
        "attention", "feedforward" for Transformer blocks), one float64
        array (L, B) per step name (relative sizes as above) and per
        `<step>_rms` (RMS of what the step wrote), and `stream_rms`
        ((L+1, B): RMS of the stream entering each block and leaving the last
        one).
    """
    x = _inputs.one_batch(x)[0]
    forward = Forward(model, blocks)
    trace = forward.run(x, training=training)
    names = step_names(forward, trace)
    rows = {key: [] for name in names for key in (name, f"{name}_rms")}

    def ratio(update, base, mask):
        return _to_numpy(_per_example_norm(_masked(update, mask))) / np.maximum(
            _to_numpy(_per_example_norm(_masked(base, mask))), _TINY
        )

    for position in range(len(forward.blocks)):
        mask = padding_mask_at(trace, position)
        for name, (step, stream, update, _) in zip(names, walk_steps(forward, trace, position)):
            base = stream if step.shortcut is None else step.shortcut(stream)
            rows[name].append(ratio(update, base, mask))
            rows[f"{name}_rms"].append(_to_numpy(_per_example_masked_rms(update, mask)))
    result = {"model": forward.model_name, "names": list(forward.names), "steps": names}
    result.update({key: np.stack(values).astype("float64") for key, values in rows.items()})
    result["stream_rms"] = np.stack(
        [_to_numpy(_per_example_masked_rms(point, mask)) for point, mask in zip(trace.points, point_masks(trace))]
    ).astype("float64")
    return result


@instrument
def stream_decomposition(model: keras.Model, x: ArrayLike, *, blocks: BlockNames = None) -> Results:
    """x_L against x_0 plus every step's update: exact for Pre-LN, ReZero and `x + f(x)` blocks.

    Computes each block's updates at the input the block receives when the
    whole model runs (inference mode, with the masks the block was called
    with) and compares `x_0 + sum of updates` with the stream the model
    really computes at the last block's output, over the real (unpadded)
    positions. The blocks must take each other's outputs directly and keep
    the stream's shape. Anything after an addition (Post-LN's LayerNorm,
    the original ResNet's ReLU) or a shortcut that is not the identity
    breaks the sum: the error says by how much.

    Args:
        model: keras.Model with blocks (e.g. `transformer_lm`).
        x: a batch of model inputs (token ids), or a dataset whose first
            batch is used.
        blocks: optional list of layer names (or layers).

    Returns:
        dict with `model`, `names`, `update_rms` ((number of steps,) RMS of
        each update, attention then feed-forward per Transformer block),
        `labels` (strings such as "block1 attention"), `stream_rms` (RMS of
        x_L), `max_error` (max |x_L - (x_0 + sum)|) and `relative_error`
        (`max_error` / max |x_L|).
    """
    x = _inputs.one_batch(x)[0]
    forward = Forward(model, blocks)
    trace = forward.run(x)
    gap = forward.directly_chained(trace)
    if gap is not None:
        raise ValueError(
            f"stream_decomposition needs each block to take the previous block's output; in "
            f"model {forward.model_name!r} a layer between {gap[0]!r} and {gap[1]!r} changes "
            "the stream. Pass blocks= with a run of blocks that follow each other directly."
        )
    total = trace.points[0]
    updates, labels = [], []
    mask = padding_mask_at(trace, 0)
    for position, name in enumerate(forward.names):
        for step, stream, update, _ in walk_steps(forward, trace, position):
            if tuple(update.shape) != tuple(total.shape):
                raise ValueError(
                    f"stream_decomposition needs blocks that keep the stream's shape; in model "
                    f"{forward.model_name!r} block {name!r} changes it from {tuple(total.shape)} to "
                    f"{tuple(update.shape)}. Pass blocks= with blocks of one stage."
                )
            total = total + update
            values = _to_numpy(_masked(update, mask)).astype("float64")
            updates.append(float(np.sqrt(np.mean(np.square(values)))))
            labels.append(f"{name} {step.name}" if step.name else name)
    real = _to_numpy(_masked(trace.points[-1], mask)).astype("float64")
    error = float(np.max(np.abs(real - _to_numpy(_masked(total, mask)).astype("float64"))))
    return {
        "model": forward.model_name,
        "names": list(forward.names),
        "labels": labels,
        "update_rms": np.array(updates),
        "stream_rms": float(np.sqrt(np.mean(real**2))),
        "max_error": error,
        "relative_error": error / max(float(np.max(np.abs(real))), _TINY),
    }


@instrument
def logit_lens(
    model: keras.Model,
    x: ArrayLike,
    y: Optional[ArrayLike] = None,
    *,
    blocks: BlockNames = None,
    loss: LossLike = None,
    output_index: Optional[int] = None,
) -> Results:
    """The loss when the stream at each depth is read out through the model's head.

    `loss[l]` is the mean loss of `head(x_l)` against `y`, where `head` is
    everything after the last block (for `transformer_lm`: the final
    LayerNorm if any, then `lm_head`): the whole model run with blocks
    l+1..L replaced by the identity. x_0 is the first block's input (the
    embeddings); `loss[L]` is the model's own loss.

    Args:
        model: keras.Model with blocks that keep the stream's shape
            (`TransformerBlock`s; any model shape, see `gradient_norms`).
        x: a batch of model inputs (token ids), shape (B, T), or a dataset
            of (x, y) batches whose first batch is used.
        y: the targets (next tokens), shape (B, T); required unless `x` is
            a dataset that holds them.
        blocks: optional list of layer names (or layers).
        loss: None (the loss of `model.compile`, else the cross-entropy that
            fits the output), a Keras loss or a callable; over the real
            positions where the output carries a Keras mask (padding from
            `Embedding(mask_zero=True)`), as Keras' losses average.
        output_index: for a model with several outputs, the one the loss
            reads.

    Returns:
        dict with `model`, `names`, `depths` (0..L) and `loss` ((L+1,) floats).
    """
    x, y = _inputs.one_batch(x, y)
    if y is None:
        raise ValueError(
            "logit_lens needs y=, the targets the read-out is scored against (the next tokens "
            "for a language model): logit_lens(model, x, y), or a dataset of (x, y) batches."
        )
    forward = Forward(model, blocks)
    first = forward.run(x)
    objective = _losses.objective(model, first.model_outputs, loss, output_index)
    targets = objective.targets(y)
    mask = _losses.output_mask(objective.output)  # the padding Keras' loss leaves out, or None
    count = len(forward.blocks)
    for position in range(count):
        if tuple(first.inputs[position].shape) != tuple(first.outputs[position].shape):
            raise ValueError(
                f"logit_lens reads the stream through the layers after the last block, so every "
                f"block must keep the stream's shape; in model {forward.model_name!r} block "
                f"{forward.names[position]!r} changes it from {tuple(first.inputs[position].shape)} "
                f"to {tuple(first.outputs[position].shape)}."
            )
    losses = []
    for depth in range(count + 1):
        skipped = {position: (lambda stream, *args, **kwargs: identity(stream)) for position in range(depth, count)}
        trace = forward.replay(x, first, start=depth, replace=skipped)
        output, _, _ = _losses.choose_output(model, trace.model_outputs, objective.index)
        losses.append(float(_to_numpy(objective(targets, output, mask))))
    return {
        "model": forward.model_name,
        "names": list(forward.names),
        "depths": np.arange(len(losses)),
        "loss": np.array(losses),
    }
