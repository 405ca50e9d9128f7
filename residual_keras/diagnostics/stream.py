"""The residual stream of a Transformer: what each sublayer writes, and what each depth knows.

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
"""

from typing import Optional

import keras
import numpy as np

from residual_keras._types import ArrayLike, BlockNames, LossLike, Results
from residual_keras.diagnostics import _losses
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import leaves_model_unchanged
from residual_keras.diagnostics._tensors import (
    _TINY,
    _per_example_norm,
    _per_example_rms,
    _to_numpy,
)
from residual_keras.transformer import TransformerBlock


@leaves_model_unchanged
def stream_contributions(
    model: keras.Model, x: ArrayLike, *, training: bool = False, blocks: BlockNames = None
) -> Results:
    """Per Transformer block, how much attention and feed-forward add to the stream.

    For block l with input `x` (B, T, C): the attention sublayer writes
    `a = attention_branch(x)` and the stream becomes `h` (`x + a` for Pre-LN
    and ReZero, `LN(x + a)` for Post-LN); the feed-forward sublayer then
    writes `m = feedforward_branch(h)`. The result gives, per example,

        attention   = ||a|| / ||x||        feedforward = ||m|| / ||h||

    with norms over all positions and channels of one sequence: the size of
    each update relative to the stream it is added to. ReZero blocks start at
    exactly 0; Pre-LN blocks with GPT-2's scaled output projections start
    small; in a plain twin the "update" replaces the stream.

    Args:
        model: keras.Model with `TransformerBlock`s (e.g. `transformer_lm`).
        x: a batch of model inputs (token ids for `transformer_lm`).
        training: bool. Dropout mode. Default False.
        blocks: optional list of layer names (or layers); each must be a
            `TransformerBlock`.

    Returns:
        dict with `model`, `names` (L block names), `attention` and
        `feedforward` (float64 arrays (L, B): relative sizes as above),
        `attention_rms` and `feedforward_rms` ((L, B): RMS of `a` and `m`)
        and `stream_rms` ((L+1, B): RMS of the stream entering each block
        and leaving the last one).
    """
    forward = _transformer_forward(model, blocks)
    keys = ("attention", "feedforward", "attention_rms", "feedforward_rms")
    rows = {key: [] for key in keys}
    trace = forward.run(x, training=training)

    def ratio(update, base):
        return _to_numpy(_per_example_norm(update)) / np.maximum(
            _to_numpy(_per_example_norm(base)), _TINY
        )

    for block, stream in zip(forward.blocks, trace.inputs):
        attention = block.attention_branch(stream, training=training)
        middle = block.join(stream, attention, block.attention_norm)
        feedforward = block.feedforward_branch(middle, training=training)
        rows["attention"].append(ratio(attention, stream))
        rows["feedforward"].append(ratio(feedforward, middle))
        rows["attention_rms"].append(_to_numpy(_per_example_rms(attention)))
        rows["feedforward_rms"].append(_to_numpy(_per_example_rms(feedforward)))
    result = {"model": forward.model_name, "names": list(forward.names)}
    result.update({key: np.stack(rows[key]).astype("float64") for key in keys})
    result["stream_rms"] = np.stack(
        [_to_numpy(_per_example_rms(point)) for point in trace.points]).astype("float64")
    return result


def _transformer_forward(model, blocks):
    forward = Forward(model, blocks)
    for block in forward.blocks:
        if not isinstance(block, TransformerBlock):
            raise TypeError(
                f"This instrument measures TransformerBlocks; block {block.name!r} is a "
                f"{type(block).__name__}."
            )
    return forward


@leaves_model_unchanged
def stream_decomposition(model: keras.Model, x: ArrayLike, *, blocks: BlockNames = None) -> Results:
    """x_L against x_0 plus every sublayer's output: exact for Pre-LN and ReZero.

    Computes each block's two updates at the input the block receives when
    the whole model runs (inference mode) and compares `x_0 + sum of
    updates` with the stream the model really computes at the last block's
    output. The blocks must take each other's outputs directly.

    Args:
        model: keras.Model with `TransformerBlock`s (e.g. `transformer_lm`).
        x: a batch of model inputs (token ids).
        blocks: optional list of layer names (or layers).

    Returns:
        dict with `model`, `names`, `update_rms` ((2L,) RMS of each update,
        attention then feed-forward per block), `labels` (2L strings such as
        "block1 attention"), `stream_rms` (RMS of x_L), `max_error` (max
        |x_L - (x_0 + sum)|) and `relative_error` (`max_error` / max |x_L|).
    """
    forward = _transformer_forward(model, blocks)
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
    for block, name, stream in zip(forward.blocks, forward.names, trace.inputs):
        attention = block.attention_branch(stream, training=False)
        middle = block.join(stream, attention, block.attention_norm)
        feedforward = block.feedforward_branch(middle, training=False)
        for sublayer, update in (("attention", attention), ("feed-forward", feedforward)):
            total = total + update
            updates.append(float(np.sqrt(np.mean(np.square(_to_numpy(update).astype("float64"))))))
            labels.append(f"{name} {sublayer}")
    real = _to_numpy(trace.points[-1]).astype("float64")
    error = float(np.max(np.abs(real - _to_numpy(total).astype("float64"))))
    return {
        "model": forward.model_name,
        "names": list(forward.names),
        "labels": labels,
        "update_rms": np.array(updates),
        "stream_rms": float(np.sqrt(np.mean(real**2))),
        "max_error": error,
        "relative_error": error / max(float(np.max(np.abs(real))), _TINY),
    }


@leaves_model_unchanged
def logit_lens(
    model: keras.Model,
    x: ArrayLike,
    y: Optional[ArrayLike],
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
        model: keras.Model with `TransformerBlock`s (any shape, see
            `gradient_norms`).
        x: a batch of model inputs (token ids), shape (B, T).
        y: the targets (next tokens), shape (B, T).
        blocks: optional list of layer names (or layers).
        loss: None (the loss of `model.compile`, else the cross-entropy that
            fits the output), a Keras loss or a callable.
        output_index: for a model with several outputs, the one the loss
            reads.

    Returns:
        dict with `model`, `names`, `depths` (0..L) and `loss` ((L+1,) floats).
    """
    forward = _transformer_forward(model, blocks)
    first = forward.run(x)
    objective = _losses.objective(model, first.model_outputs, loss, output_index)
    count = len(forward.blocks)
    losses = []
    for depth in range(count + 1):
        identity = {position: (lambda stream: stream) for position in range(depth, count)}
        trace = forward.replay(x, first, start=depth, replace=identity)
        output, _, _ = _losses.choose_output(model, trace.model_outputs, objective.index)
        losses.append(float(_to_numpy(objective(y, output))))
    return {
        "model": forward.model_name,
        "names": list(forward.names),
        "depths": np.arange(len(losses)),
        "loss": np.array(losses),
    }
