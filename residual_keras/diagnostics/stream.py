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

import numpy as np
from keras import ops

from residual_keras.diagnostics._blocks import _Chain
from residual_keras.diagnostics._tensors import (
    _TINY,
    _default_loss,
    _per_example_norm,
    _per_example_rms,
    _to_numpy,
)
from residual_keras.transformer import TransformerBlock


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
    chain = _transformer_chain(model, blocks)
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
        middle = block.join(stream, attention, block.attention_norm)
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


def _transformer_chain(model, blocks):
    chain = _Chain(model, blocks)
    for block in chain.blocks:
        if not isinstance(block, TransformerBlock):
            raise TypeError(
                f"This instrument measures TransformerBlocks; block {block.name!r} is a "
                f"{type(block).__name__}."
            )
    return chain


def stream_decomposition(model, x, *, blocks=None):
    """x_L against x_0 plus every sublayer's output: exact for Pre-LN and ReZero.

    Runs the blocks sublayer by sublayer (inference mode), collecting each
    update, and compares `x_0 + sum of updates` with the stream the model
    really computes at the last block's output.

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
    chain = _transformer_chain(model, blocks)
    if any(piece is not None for piece in chain.between):
        raise ValueError("stream_decomposition needs the blocks to follow each other directly.")
    stream = chain.first_input(ops.convert_to_tensor(x), False)
    total = stream
    updates, labels = [], []
    for block in chain.blocks:
        attention = block.attention_branch(stream, training=False)
        stream = block.join(stream, attention, block.attention_norm)
        feedforward = block.feedforward_branch(stream, training=False)
        stream = block.join(stream, feedforward, block.feedforward_norm)
        for name, update in (("attention", attention), ("feed-forward", feedforward)):
            total = total + update
            updates.append(float(np.sqrt(np.mean(np.square(_to_numpy(update).astype("float64"))))))
            labels.append(f"{block.name} {name}")
    real = _to_numpy(stream).astype("float64")
    error = float(np.max(np.abs(real - _to_numpy(total).astype("float64"))))
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "labels": labels,
        "update_rms": np.array(updates),
        "stream_rms": float(np.sqrt(np.mean(real**2))),
        "max_error": error,
        "relative_error": error / max(float(np.max(np.abs(real))), _TINY),
    }


def logit_lens(model, x, y, *, blocks=None):
    """The loss when the stream at each depth is read out through the model's head.

    `loss[l]` is the mean cross-entropy of `head(x_l)` against `y`, where
    `head` is everything after the last block (for `transformer_lm`: the
    final LayerNorm if any, then `lm_head`) and x_0 is the first block's
    input (the embeddings); `loss[L]` is the model's own loss.

    Args:
        model: keras.Model with `TransformerBlock`s.
        x: a batch of model inputs (token ids), shape (B, T).
        y: the targets (next tokens), shape (B, T).
        blocks: optional list of layer names (or layers).

    Returns:
        dict with `model`, `names`, `depths` (0..L) and `loss` ((L+1,) floats).
    """
    chain = _transformer_chain(model, blocks)
    y = ops.convert_to_tensor(y)
    stream = chain.first_input(ops.convert_to_tensor(x), False)
    losses = [float(_to_numpy(_default_loss(y, chain.output(stream, False))))]
    for index in range(len(chain.blocks)):
        stream = chain.step(index, stream, False)
        losses.append(float(_to_numpy(_default_loss(y, chain.output(stream, False)))))
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "depths": np.arange(len(losses)),
        "loss": np.array(losses),
    }
