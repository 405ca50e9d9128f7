"""The rank of what the blocks have written into the stream, x_L - x_0 (`stream_delta_rank`).

The course's self-test (c): a 96-layer Transformer whose blocks all start as
the identity (ReZero's alpha = 0, zero-initialised branches) computes
x_L = x_0 at initialisation, so it behaves like the shallow net "embedding,
then head"; x_L - x_0 is the zero matrix, of rank 0. Training makes the
branches non-zero and the rank rises: how fast, and how far, says how much
of the depth the network has started to use.

Over a batch, the change is a matrix with one row per position of every
example (its real positions, where the blocks are called with a padding
mask) and one column per channel of the stream, so its rank is at most the
stream's width. Two ranks:

- `rank`: the numerical rank at the stream's scale, the number of singular
  values of x_L - x_0 above `tolerance` times the largest singular value of
  x_L itself (of x_0 where x_L is zero, a stream that died): directions
  the blocks changed by a visible fraction of the stream. 0 exactly when the
  change is below that everywhere; `relative_size` (0 for an unchanged
  stream, 1 for one that died) tells a small change from a dead stream.
- `effective_rank` (Roy and Vetterli 2007): exp of the entropy of the
  normalised singular values of x_L - x_0; scale-free, so it counts the
  directions of even a tiny change (0 only for the zero matrix).

Where the stream changes shape (the stages of a CIFAR ResNet, a last block
that downsamples), x_L - x_0 has no meaning. The change is then measured
over the last span of blocks that keep the stream's shape: x_e - x_s, where
x_e is the last stream point that a same-shape block produced (x_L unless
the last block changes the shape) and x_s the first point of the run of
points of x_e's shape that ends there (`from_point` s, `to_point` e). A CIFAR
ResNet whose last stage ends in its same-shape blocks is measured over that
stage (s = the stage's first block's output); one whose last block
downsamples (depth 8: one block a stage) over the last stage that keeps its
shape. A net in which every block changes the shape has no such span:
`stream_delta_rank` refuses it, and `TrainingDynamics` records None.
"""

import keras
import numpy as np

from residual_keras._types import ArrayLike, BlockNames, Results
from residual_keras.diagnostics import _inputs
from residual_keras.diagnostics._block_search import padding_mask_at
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import instrument
from residual_keras.diagnostics._tensors import _to_numpy


def channels_axis(blocks):
    """1 where the last block says channels_first (a convolutional stream), else the last axis."""
    return 1 if getattr(blocks[-1], "data_format", "channels_last") == "channels_first" else -1


def _rows(tensor, axis, mask):
    """(positions, channels) float64 matrix of a stream point: every real position of every example."""
    array = np.moveaxis(_to_numpy(tensor).astype("float64"), axis, -1)
    if mask is not None and array.ndim >= 3:
        keep = _to_numpy(mask).astype(bool)
        array = array[keep]  # (real positions, ..., channels)
    return array.reshape(-1, array.shape[-1])


def effective_rank(singular_values):
    """exp(entropy of singular_values / their sum): Roy and Vetterli's effective rank; 0 for none."""
    values = np.asarray(singular_values, dtype="float64")
    total = float(values.sum())
    if total <= 0 or not np.isfinite(total):
        return 0.0 if total == 0 else float("nan")
    shares = values[values > 0] / total
    return float(np.exp(-np.sum(shares * np.log(shares))))


def same_shape_span(shapes):
    """(s, e): the last run of consecutive stream points of one shape with a block between them, or None.

    e is the last point whose predecessor has its shape (a block that keeps
    the shape produced it); s the first point of the run of that shape
    ending at e. None when every block changes the shape.
    """
    shapes = [tuple(shape) for shape in shapes]
    end = next((point for point in range(len(shapes) - 1, 0, -1) if shapes[point] == shapes[point - 1]), None)
    if end is None:
        return None
    start = end
    while start > 0 and shapes[start - 1] == shapes[end]:
        start -= 1
    return start, end


def delta_rank_of(trace, axis, tolerance):
    """The ranks of x_e - x_s for one recorded run (see `stream_delta_rank`); None where there is no span."""
    span = same_shape_span(tensor.shape for tensor in trace.points)
    if span is None:
        return None
    start, end = span
    mask = padding_mask_at(trace, end - 1)  # the mask of the block that produced x_e
    final = _rows(trace.points[end], axis, mask)
    delta = final - _rows(trace.points[start], axis, mask)
    if not (np.all(np.isfinite(delta)) and np.all(np.isfinite(final))):
        return {"from_point": start, "to_point": end, "rank": None, "effective_rank": float("nan"),
                "relative_size": float("nan"), "width": int(final.shape[1]), "singular_values": None}
    singular = np.linalg.svd(delta, compute_uv=False)
    # The stream's scale is x_e's; where x_e is zero (a stream that died), x_s's: the change is then all
    # of x_s, of its full rank, not "no change".
    scale = float(np.linalg.norm(final, 2)) if final.size else 0.0
    if scale == 0 and final.size:
        scale = float(np.linalg.norm(final - delta, 2))
    start_norm = float(np.linalg.norm(final - delta))
    return {
        "from_point": start,
        "to_point": end,
        "rank": int(np.sum(singular > tolerance * scale)) if scale > 0 else 0,
        "effective_rank": effective_rank(singular),
        "relative_size": float(np.linalg.norm(delta)) / start_norm if start_norm > 0 else float("nan"),
        "width": int(final.shape[1]),
        "singular_values": singular,
    }


@instrument
def stream_delta_rank(
    model: keras.Model,
    x: ArrayLike,
    *,
    tolerance: float = 1e-3,
    training: bool = False,
    blocks: BlockNames = None,
) -> Results:
    """Rank of x_L - x_0 over a batch: how much the blocks have changed the stream.

    0 at initialisation for a network whose blocks all start as the identity
    on the stream they receive (ReZero, zero-initialised branches, Fixup),
    and more than 0 for any other.

    Args:
        model: keras.Model with residual blocks (any shape the instruments
            measure).
        x: a batch of model inputs, or a dataset whose first batch is used.
        tolerance: float. A singular value of x_e - x_s counts towards `rank`
            when above `tolerance` times the largest singular value of x_e.
            Default 1e-3.
        training: bool. Mode of BatchNorm/Dropout. Default False.
        blocks: optional list of layer names (or layers) to use as blocks.

    Returns:
        dict with `model`, `names` (L block names), `from_point` (s: the
        change is x_e - x_s, s = 0 unless the stream changes shape),
        `to_point` (e: L unless the last block changes the shape), `rank`
        (int; None when the stream is not finite), `effective_rank`
        (float), `width` (the stream's channels: the largest possible rank),
        `relative_size` (||x_e - x_s||_F / ||x_s||_F) and `singular_values`
        (of x_e - x_s, largest first). `ValueError` where every block
        changes the stream's shape (no span to measure a change over).
    """
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise ValueError(f"tolerance must be a number in (0, 1), got {tolerance!r}.")
    x = _inputs.one_batch(x)[0]
    forward = Forward(model, blocks)
    trace = forward.run(x, training=training)
    measured = delta_rank_of(trace, channels_axis(forward.blocks), tolerance)
    if measured is None:
        shapes = " -> ".join(str(tuple(point.shape[1:])) for point in trace.points)
        raise ValueError(
            f"Every block of model {forward.model_name!r} changes the stream's shape ({shapes}): "
            "there is no span of same-shape blocks whose change x_e - x_s has a rank. Pass "
            "blocks= with blocks that keep the shape."
        )
    return {"model": forward.model_name, "names": list(forward.names), **measured}
