"""What each Transformer sublayer writes into the residual stream (`stream_contributions`)."""

import numpy as np
from keras import ops

from residual_keras.diagnostics._blocks import _Chain
from residual_keras.diagnostics._tensors import _TINY, _per_example_norm, _per_example_rms, _to_numpy
from residual_keras.transformer import TransformerBlock


def _join(block, stream, branch, norm):
    """The stream after one sublayer, as `TransformerBlock.call` composes it.

    residual: `x + branch` (Pre-LN and ReZero) or `LN(x + branch)` (Post-LN);
    plain twin: `branch` (pre) or `LN(branch)` (post).
    """
    stream = branch if block.residual is False else stream + branch
    if block.norm_position == "post" and block.residual != "rezero":
        stream = norm(stream)
    return stream


def stream_contributions(model, x, *, training=False, blocks=None):
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
    chain = _Chain(model, blocks)
    for block in chain.blocks:
        if not isinstance(block, TransformerBlock):
            raise TypeError(
                "stream_contributions measures TransformerBlocks; block "
                f"{block.name!r} is a {type(block).__name__}."
            )
    keys = ("attention", "feedforward", "attention_rms", "feedforward_rms")
    rows = {key: [] for key in keys}
    stream = chain.first_input(ops.convert_to_tensor(x), training)
    stream_rms = [_to_numpy(_per_example_rms(stream))]

    def ratio(update, base):
        return _to_numpy(_per_example_norm(update)) / np.maximum(
            _to_numpy(_per_example_norm(base)), _TINY
        )

    for index, block in enumerate(chain.blocks):
        attention = block.attention_branch(stream, training=training)
        middle = _join(block, stream, attention, block.attention_norm)
        feedforward = block.feedforward_branch(middle, training=training)
        rows["attention"].append(ratio(attention, stream))
        rows["feedforward"].append(ratio(feedforward, middle))
        rows["attention_rms"].append(_to_numpy(_per_example_rms(attention)))
        rows["feedforward_rms"].append(_to_numpy(_per_example_rms(feedforward)))
        # Continue with the block's own output (identical to joining m to h).
        stream = chain.step(index, stream, training)
        stream_rms.append(_to_numpy(_per_example_rms(stream)))
    result = {"model": chain.model_name, "names": list(chain.names)}
    result.update({key: np.stack(rows[key]).astype("float64") for key in keys})
    result["stream_rms"] = np.stack(stream_rms).astype("float64")
    return result
