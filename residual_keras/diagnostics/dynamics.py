"""The instruments while a network trains: a Keras callback (`TrainingDynamics`).

At the start of training and after every epoch it records, on one fixed
batch and in inference mode (so that nothing of the model changes):

- `gradient_gain`: ||dLoss/dx_0|| / ||dLoss/dx_L|| (`gradient_norms`);
- per block, `update_ratio`: ||W_l(now) - W_l(before the epoch)|| /
  ||W_l(before)|| over all of the block's trainable weights: how fast each
  block moves;
- per block, `branch_ratio`: what the block's branch adds relative to the
  stream it is added to, ||f_l(x)|| / ||shortcut(x)|| (over the real
  positions where the block is called with a padding mask), averaged over
  the block's steps (a Transformer block's attention and feed-forward:
  `stream_contributions`); None for plain blocks and for layers without
  the residual protocol named in `blocks=`;
- per block, `identity_scalar`: the block's identity scale (the residual
  protocol, `residual_keras.steps`): the number that makes an
  identity-initialised block start as the identity and lets it leave it:
  ReZero's alpha, the mean |gamma| of a zero-gamma block's last BatchNorm,
  Fixup's scale, the norm of a zero-initialised pre-activation block's last
  kernel, `Residual(rezero=True)`'s alpha (None otherwise);
- `delta_rank`, `delta_effective_rank` and `delta_size`: the rank of what
  the blocks have written into the stream, x_L - x_0, at the stream's
  scale and scale-free, and its size relative to x_0 (`stream_delta_rank`):
  0 at the start for identity-initialised networks, rising as they train.
  Where the stream changes shape it is x_e - x_s over the last span of
  same-shape blocks (a last block that downsamples is not in it); None
  where every block changes the shape.

Every block the instruments find counts, a student's own included: the
callback reads them through the residual protocol.

Rows are kept in `rows` (dicts, one per block and record) and, with `path`,
written to a CSV file after every record; a resumed fit drops the rows of
epochs it will train again, so the file never holds an epoch twice.
`TrainingDynamics.read_csv(path)` reads such a file back as the same rows.
"""

import csv
import math
import os
import pathlib
import time
from typing import Optional, Union

import keras
import numpy as np

from residual_keras._types import ArrayLike, BlockNames, LossLike
from residual_keras.diagnostics import _inputs
from residual_keras.diagnostics._block_search import padding_mask_at
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import measuring
from residual_keras.diagnostics._tensors import _masked, _per_example_norm, _to_numpy
from residual_keras.diagnostics.gradients import gradient_norms
from residual_keras.diagnostics.rank import channels_axis, delta_rank_of
from residual_keras.diagnostics.stream import walk_steps
from residual_keras.steps import ResidualBlock, identity_scale

FIELDS = ("epoch", "block", "name", "gradient_gain", "stream_grad_norm", "weight_grad_norm",
          "update_ratio", "branch_ratio", "identity_scalar", "delta_rank", "delta_effective_rank", "delta_size")


def _norm(arrays):
    return math.sqrt(sum(float(np.sum(np.square(array, dtype="float64"))) for array in arrays))


class TrainingDynamics(keras.callbacks.Callback):
    """Records gradient flow, update sizes, branch sizes, identity scalars and the rank of x_L - x_0 during `fit`.

    Works on any model shape the instruments measure (see `gradient_norms`);
    recording leaves the model's variables as they were.

    Args:
        x: a fixed batch of model inputs.
        y: its targets (labels, next tokens), or None for random labels.
        path: optional CSV file the rows are written to after every record
            (`TrainingDynamics.read_csv(path)` reads them back).
        every: int. Record every `every` epochs (and at the start). Default 1.
        loss: the loss of the gradient gain: None (the loss of
            `model.compile`, else the cross-entropy that fits the output), a
            Keras loss or a callable.
        output_index: for a model with several outputs, the one the loss
            reads (see `gradient_norms`).
        blocks: optional list of layer names (or layers) to use as blocks.
        rank_tolerance: float. The tolerance of `delta_rank` (see
            `stream_delta_rank`). Default 1e-3.

    Example:
        >>> dynamics = TrainingDynamics(x_batch, y_batch)
        >>> model.fit(dataset, epochs=10, callbacks=[dynamics])  # doctest: +SKIP
        >>> first = dynamics.rows[0]  # doctest: +SKIP
        >>> first.get("gradient_gain")  # doctest: +SKIP
        >>> rows = TrainingDynamics.read_csv("run/dynamics.csv")  # what path= wrote  # doctest: +SKIP
    """

    def __init__(
        self,
        x: ArrayLike,
        y: Optional[ArrayLike] = None,
        *,
        path: Union[str, os.PathLike, None] = None,
        every: int = 1,
        loss: LossLike = None,
        output_index: Optional[int] = None,
        blocks: BlockNames = None,
        rank_tolerance: float = 1e-3,
    ) -> None:
        super().__init__()
        self.x, self.y = _inputs.one_batch(x, y)
        self.loss, self.output_index, self.block_choice = loss, output_index, blocks
        self.path = None if path is None else pathlib.Path(path)
        self.every = int(every)
        self.rank_tolerance = float(rank_tolerance)
        self.rows = []
        self._before = None
        self.seconds = 0.0

    def _forward(self):
        """The blocks in forward order, with one inference-mode run of the fixed batch."""
        forward = Forward(self.model, self.block_choice)
        return forward, forward.run(self.x)

    def _snapshot(self, blocks):
        return [[_to_numpy(w).copy() for w in block.trainable_weights] for block in blocks]

    def _branch_ratios(self, forward, trace):
        """Per block, ||branch(x)|| / ||shortcut(x)|| per example, averaged over the examples and
        the block's residual steps (as `stream_contributions`); None for a plain block."""
        ratios = []
        for position in range(len(forward.blocks)):
            if not isinstance(forward.blocks[position], ResidualBlock):  # a layer named in blocks=: no steps
                ratios.append(None)
                continue
            mask = padding_mask_at(trace, position)
            walked = walk_steps(forward, trace, position)
            if not all(step.residual for step, *_ in walked):
                ratios.append(None)
                continue
            mine = []
            for step, stream, update, _ in walked:
                base = _to_numpy(_per_example_norm(_masked(step.shortcut(stream), mask)))
                mine.append(_to_numpy(_per_example_norm(_masked(update, mask))) / np.maximum(base, 1e-30))
            ratios.append(float(np.mean(mine)))
        return ratios

    def _record(self, epoch):
        start = time.perf_counter()
        with measuring(self.model):
            forward, trace = self._forward()
            blocks = forward.blocks
            flow = gradient_norms(self.model, self.x, self.y, training=False, loss=self.loss,
                                  output_index=self.output_index, blocks=blocks)
            branch = self._branch_ratios(forward, trace)
            delta = delta_rank_of(trace, channels_axis(blocks), self.rank_tolerance)
        after = self._snapshot(blocks)
        updates = [None] * len(blocks)
        if self._before is not None:
            updates = [_norm([a - b for a, b in zip(now, then)]) / max(_norm(then), 1e-30)
                       for now, then in zip(after, self._before)]
        self._before = after
        for index, (block, name) in enumerate(zip(blocks, forward.names)):
            self.rows.append({
                "epoch": epoch, "block": index + 1, "name": name,
                "gradient_gain": flow["gain"],
                "stream_grad_norm": float(flow["stream_grad_norms"][index]),
                "weight_grad_norm": float(flow["block_weight_grad_norms"][index]),
                "update_ratio": updates[index], "branch_ratio": branch[index],
                "identity_scalar": identity_scale(block),
                "delta_rank": delta["rank"] if delta else None,
                "delta_effective_rank": delta["effective_rank"] if delta else None,
                "delta_size": delta["relative_size"] if delta else None,
            })
        self._write()
        self.seconds += time.perf_counter() - start

    def _write(self):
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".csv.tmp")
        with temporary.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows({key: ("" if value is None else value) for key, value in row.items()}
                             for row in self.rows)
        temporary.replace(self.path)

    @staticmethod
    def read_csv(path: Union[str, os.PathLike]) -> list[dict[str, Optional[float]]]:
        """The rows a `TrainingDynamics(path=...)` wrote to the CSV file `path`, as in `rows`.

        Each row is a dict with "epoch" and "block" (ints), "name" (the
        block's name) and the measurements (floats, None where the file has
        no value, as `branch_ratio` for a plain block). An empty list when
        the file does not exist (nothing recorded yet).
        """
        path = pathlib.Path(path)
        if not path.exists():
            return []
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        parsed = []
        for row in rows:
            entry = {"name": row["name"], "epoch": int(row["epoch"]), "block": int(row["block"])}
            for key in FIELDS[3:]:
                value = row.get(key) or ""  # files written before a column existed lack it
                entry[key] = None if value == "" else float(value)
            parsed.append(entry)
        return parsed

    def on_epoch_begin(self, epoch, logs=None):
        if self._before is None:  # the first epoch of this fit, fresh or resumed
            previous = [] if self.path is None else self.read_csv(self.path)
            self.rows = [row for row in previous if row["epoch"] < epoch + 1]
            if not self.rows:
                self._record(0)  # epoch 0 = before any training
            else:
                self._before = self._snapshot(self._forward()[0].blocks)

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every == 0:
            self._record(epoch + 1)
