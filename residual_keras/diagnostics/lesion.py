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

A removed block becomes what the residual protocol says
(`residual_keras.steps`): the block's own `lesioned()` where it has one
(a `TransformerBlock` becomes the identity, which for Post-LN also skips the
block's LayerNorms), else each residual step `post(shortcut(x))`:
`ReLU(shortcut(x))` for the original blocks (`BasicBlock`,
`BottleneckBlock`, `FixupBasicBlock`), `shortcut(x)` for
`PreActBasicBlock`, `post(shortcut(x))` for a `Residual`. A plain block
becomes the identity where its output has its input's shape and cannot be
removed where the shape changes. Any other layer named in `blocks=` (one
without the residual protocol, such as keras-hub's `TransformerDecoder`) is
removed whole, as Veit et al. remove a block: it becomes the identity where
its output has its input's shape, and cannot be removed where the shape
changes. `lesion`, `delete_blocks` and `swap_blocks` take such layers;
`lesion_sublayers` needs each block's residual steps and refuses them.
Everything runs in inference mode, with the masks each block was called
with; the whole model runs with the removed block's call replaced
(`_forward`), so nothing of the model is cut out or modified.

Data: `(model, x, y)`, `(model, (x, y))` or `(model, dataset)`, as every
instrument takes it (`_inputs`).
"""

import inspect
from typing import Optional, Sequence

import keras
import numpy as np
from keras import ops

from residual_keras.checks import check_positive_int
from residual_keras._types import Batches, BlockNames, MetricLike, Results
from residual_keras._types import ArrayLike
from residual_keras.diagnostics import _inputs, _losses, _metrics
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import instrument
from residual_keras.diagnostics._tensors import _to_numpy
from residual_keras.steps import ResidualBlock, _apply, lesioned, residual_steps


def _shape(tensor):
    return tuple(tensor.shape[1:])


def _lesioned_block(block, call, input_shape, output_shape):
    """(function(x, *call_args, **call_kwargs) without the block's branches, description) or (None, reason).

    `call` is the (args, kwargs) of the block's call in the first run: the
    description comes from it; the function builds the lesion from the
    arguments of each call it replaces (each batch's masks).
    """
    call_args, call_kwargs = call
    if not isinstance(block, ResidualBlock):  # any other layer named in blocks=: removed whole
        if input_shape == output_shape:
            return (lambda x, *args, **kwargs: x), "identity (the whole layer)"
        return None, (f"not a residual block, and its shape changes {(None, *input_shape)} -> "
                      f"{(None, *output_shape)}")
    function, description = lesioned(block, *call_args, **call_kwargs)
    if function is not None:
        def without_branches(x, *args, **kwargs):
            return lesioned(block, *args, **kwargs)[0](x)

        return without_branches, description
    if input_shape == output_shape:
        return (lambda x, *args, **kwargs: x), "identity"
    return None, f"shape changes {(None, *input_shape)} -> {(None, *output_shape)}"


def _takes(block, argument):
    """Whether the block's class `call` takes a keyword `argument` (a `mask` that another block was given)."""
    parameters = inspect.signature(type(block).call).parameters
    return argument in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())


def _keeps_shape(trace, index):
    return _shape(trace.inputs[index]) == _shape(trace.outputs[index])


class _Study:
    """A model, its data and its metric: the metric of the intact model and of lesioned ones.

    The first batch is run once to find the blocks' order and shapes (which
    the plans depend on); every batch is then run intact (recording every
    block's output) and once per plan.
    """

    def __init__(self, model, x, y, batch_size, metric, blocks, output_index, check_blocks=None):
        self.model = model
        self.forward = Forward(model, blocks, compile_blocks=True)  # the model runs once per plan
        self.output_index = output_index
        first, self.batches = _inputs.first_and_rest(_inputs.batches(x, y, batch_size))
        self.trace = self.forward.run(first[0])  # the order and shapes of the blocks
        if check_blocks is not None:
            check_blocks(self.forward.blocks)
        outputs = self.trace.model_outputs
        output, self.index, self.count = _losses.choose_output(model, outputs, output_index)
        self.output_names = _losses.ordered_outputs(model, outputs)[0]
        self.metric_name, self.metric_fn = _metrics.resolve_metric(
            metric, model, output, self.index, self.count, self.output_names)

    @property
    def names(self):
        return list(self.forward.names)

    def _output(self, trace):
        return _losses.choose_output(self.model, trace.model_outputs, self.index)[0]

    def _metric(self, y, trace, mask):
        """The metric of the output `trace` computed, over the real positions of `mask` (the intact run's)."""
        targets = _losses.targets_of(y, self.model, self.output_names, self.index, self.count)
        return self.metric_fn(targets, _to_numpy(self._output(trace)), mask)

    def run(self, plans):
        """Metric of the intact model and of each plan, averaged over the data.

        A plan is a dict {block position: function used instead of that
        block, called as the block was}; the blocks before its first change
        reuse the intact run's outputs. Returns a float array: [intact,
        plan 1, plan 2, ...]. Where the output carries a Keras mask
        (padding), every run of a batch is scored over the real positions
        of the intact run's output.
        """
        totals = np.zeros(len(plans) + 1)
        count = 0
        for x, y in self.batches:
            size = _inputs.batch_length(x)
            intact = self.forward.run(x)
            mask = _losses.output_mask(self._output(intact))
            mask = None if mask is None else _to_numpy(mask)
            totals[0] += size * self._metric(y, intact, mask)
            for number, plan in enumerate(plans, start=1):
                trace = self.forward.replay(x, intact, start=min(plan), replace=plan)
                totals[number] += size * self._metric(y, trace, mask)
            count += size
        return totals / count


@instrument
def lesion(
    model: keras.Model,
    x: Batches,
    y: Optional[ArrayLike] = None,
    *,
    metric: MetricLike = None,
    batch_size: int = 64,
    blocks: BlockNames = None,
    output_index: Optional[int] = None,
) -> Results:
    """Metric of the intact model and with each single block removed (Veit et al. 2016).

    What replaces a removed block: see the module docstring. Where a block
    cannot be removed (a plain block that changes shape) its entry is None.
    The whole model runs each time, with the block's call replaced, so
    lesions work on any model shape.

    Args:
        model: a keras.Model of any shape (nested stages, skips around
            the blocks, several outputs, Sequential, subclassed) whose
            blocks implement the residual protocol (see `gradient_norms`).
        x: the model's inputs (arrays, or a list/dict of them), with `y`;
            or an `(x, y)` tuple, or a `tf.data.Dataset` (any iterable of
            `(x, y)` batches), with `y` left out.
        y: the targets of `x` (a dict keyed by output name for a model with
            several outputs), or None when `x` holds them.
        metric: None (the first metric `model.compile` gave the output,
            else accuracy for a classifier output, else the model's loss),
            "accuracy" (argmax against integer or one-hot targets; for a
            one-unit output, logit > 0 or probability > 0.5, and so on every
            unit, element-wise, of a multi-label output: several sigmoids,
            logits against multi-hot targets, or a compiled binary
            cross-entropy; for a language model, per position),
            "crossentropy" (of logits or of probabilities, as the output
            is; binary per unit for a multi-label output), "loss" (the loss of
            `model.compile`, else that cross-entropy), a Keras metric (name
            or object; a fresh copy, the model's own keeps its state) or a
            callable `metric(y_true, y_pred)` on numpy arrays returning a
            float (or one value per position). Where the output carries a
            Keras mask (a per-token output after `Embedding(mask_zero=True)`
            or `Masking`), only its real positions count, as in Keras'
            losses and metrics: accuracy and the losses over them, a Keras
            metric with the mask as its sample weights, a callable's values
            per position averaged over them. Per-batch values are averaged
            weighted by batch size. Default None.
        batch_size: int. Batch size when given arrays. Default 64.
        blocks: optional list of layer names (or layers) to use as blocks.
        output_index: for a model with several outputs, the one the metric
            reads (see `gradient_norms`).

    Returns:
        dict with `model`, `names` (L block names), `metric` (its name),
        `intact` (float), `lesioned` (L floats, None where a block cannot be
        removed) and `removed_as` (L strings: what replaced each block, or
        why it could not be removed).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    study = _Study(model, x, y, batch_size, metric, blocks, output_index)
    trace = study.trace
    replacements = [
        _lesioned_block(block, trace.calls[index], _shape(trace.inputs[index]), _shape(trace.outputs[index]))
        for index, block in enumerate(study.forward.blocks)
    ]
    removable = [index for index, (replacement, _) in enumerate(replacements) if replacement]
    means = study.run([{index: replacements[index][0]} for index in removable])
    by_block = dict(zip(removable, means[1:]))
    return {
        "model": study.forward.model_name,
        "names": study.names,
        "metric": study.metric_name,
        "intact": float(means[0]),
        "lesioned": [
            float(by_block[index]) if index in by_block else None
            for index in range(len(replacements))
        ],
        "removed_as": [description for _, description in replacements],
    }


@instrument
def delete_blocks(
    model: keras.Model,
    x: Batches,
    y: Optional[ArrayLike] = None,
    *,
    num_removed: Optional[Sequence[int]] = None,
    draws: int = 5,
    metric: MetricLike = None,
    batch_size: int = 64,
    blocks: BlockNames = None,
    seed: int = 0,
    output_index: Optional[int] = None,
) -> Results:
    """The metric with k randomly chosen blocks removed at once (Veit et al. 2016, figure 5a).

    The candidates are the blocks whose output has their input's shape (a
    plain network can lose only those, so residual and plain twins are
    compared on the same blocks; the downsampling blocks are left in place:
    `lesion` shows what removing one of them does). For each k, `draws`
    different random sets of k candidates are removed (all of them when
    there are fewer distinct sets).

    Args:
        model, x, y, metric, batch_size, blocks, output_index: as in
            `lesion`.
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
    study = _Study(model, x, y, batch_size, metric, blocks, output_index)
    names, trace = study.names, study.trace
    candidates = []
    replacements = {}
    for index, block in enumerate(study.forward.blocks):
        shapes = _shape(trace.inputs[index]), _shape(trace.outputs[index])
        replacement, _ = _lesioned_block(block, trace.calls[index], *shapes)
        if replacement is not None and _keeps_shape(trace, index):
            candidates.append(index)
            replacements[index] = replacement
    if not candidates:
        raise ValueError(f"Model {study.forward.model_name!r} has no block that can be removed.")
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
    means = study.run(plans)
    values, position = [], 1
    for chosen in sets:
        values.append([float(value) for value in means[position : position + len(chosen)]])
        position += len(chosen)
    return {
        "model": study.forward.model_name,
        "names": names,
        "candidates": [names[index] for index in candidates],
        "metric": study.metric_name,
        "intact": float(means[0]),
        "num_removed": ks,
        "removed": [[[names[index] for index in pick] for pick in chosen] for chosen in sets],
        "values": values,
        "mean": [float(np.mean(row)) for row in values],
    }


@instrument
def swap_blocks(
    model: keras.Model,
    x: Batches,
    y: Optional[ArrayLike] = None,
    *,
    metric: MetricLike = None,
    batch_size: int = 64,
    blocks: BlockNames = None,
    output_index: Optional[int] = None,
) -> Results:
    """The metric with each pair of adjacent blocks exchanged (Veit et al. 2016, figure 5b).

    Only pairs of blocks that both keep their input's shape, and whose
    inputs have one shape, can be swapped (any other order would not fit
    together); with none, `pairs` is empty.

    Args:
        model: as in `lesion`; so are `x`, `y`, `metric`, `batch_size`,
            `blocks` and `output_index`.

    Returns:
        dict with `model`, `names`, `metric`, `intact`, `pairs` (the
        [name, name] of each swappable adjacent pair) and `swapped` (the
        metric with that pair exchanged).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    study = _Study(model, x, y, batch_size, metric, blocks, output_index)
    chosen = study.forward.blocks

    def run(block):  # a block in another's place, called with the arguments of that place it takes
        def in_place(stream, *args, **kwargs):
            taken = {key: value for key, value in kwargs.items() if _takes(block, key)}
            return block(stream, *args, training=False, **taken)

        return in_place

    trace = study.trace
    pairs = [  # both keep their shape, and take inputs of one shape (nothing between them reshapes)
        index for index in range(len(chosen) - 1)
        if _keeps_shape(trace, index) and _keeps_shape(trace, index + 1)
        and _shape(trace.inputs[index]) == _shape(trace.inputs[index + 1])
    ]
    plans = [{index: run(chosen[index + 1]), index + 1: run(chosen[index])} for index in pairs]
    means = study.run(plans)
    return {
        "model": study.forward.model_name,
        "names": study.names,
        "metric": study.metric_name,
        "intact": float(means[0]),
        "pairs": [[study.names[index], study.names[index + 1]] for index in pairs],
        "swapped": [float(value) for value in means[1:]],
    }


@instrument
def lesion_sublayers(
    model: keras.Model,
    x: Batches,
    y: Optional[ArrayLike] = None,
    *,
    metric: MetricLike = "loss",
    batch_size: int = 64,
    blocks: BlockNames = None,
    output_index: Optional[int] = None,
) -> Results:
    """The metric with one step of one block removed: each block's attention, then its feed-forward.

    For Transformer blocks the steps are the attention and the feed-forward
    sublayers (for any block, the steps of the residual protocol,
    `residual_keras.steps`). A removed sublayer writes nothing: the
    stream passes on as `post(shortcut(x))`, which is `x` (Pre-LN, ReZero)
    or `LN(x)` (Post-LN, whose LayerNorm sits on the stream); in a plain
    twin as `post(x)` (`x`, or `LN(x)` for Post-LN). The blocks run with the masks they were called
    with.

    Args:
        model, x, y, batch_size, blocks, output_index: as in `lesion`;
            every block must have the same steps.
        metric: as in `lesion`. Default "loss": the model's loss (for a
            language model the next token's cross-entropy; a regression's
            own loss, never a classifier's metric on an image).

    Returns:
        dict with `model`, `names`, `metric`, `intact`, `steps` (the step
        names: "attention", "feedforward"; "branch" for a block with one
        unnamed step) and, per step name, L floats: the metric with that
        step of each block removed.
    """
    batch_size = check_positive_int("batch_size", batch_size)
    study = _Study(model, x, y, batch_size, metric, blocks, output_index)
    chosen = study.forward.blocks
    first_steps = [residual_steps(block, *call[0], **call[1]) for block, call in zip(chosen, study.trace.calls)]
    names = [step.name or "branch" for step in first_steps[0]]
    for block, steps in zip(chosen, first_steps):
        if [step.name or "branch" for step in steps] != names:
            raise ValueError(
                f"lesion_sublayers compares one kind of block; {block.name!r} has the steps "
                f"{[step.name or 'branch' for step in steps]}, {chosen[0].name!r} {names}. Pass "
                "blocks= with blocks of one kind."
            )

    def without(block, removed):
        def run(x, *args, **kwargs):
            for number, step in enumerate(residual_steps(block, *args, **kwargs)):
                if number != removed:
                    x = step(x)
                elif step.residual:
                    x = step.without_branch(x)
                elif step.post is not None:  # a plain twin's step removed: post(x) (Post-LN: LN(x))
                    x = _apply(step.post, x)
            return x

        return run

    plans = [
        {index: without(block, removed)}
        for removed in range(len(names))
        for index, block in enumerate(chosen)
    ]
    means = study.run(plans)
    count = len(chosen)
    result = {
        "model": study.forward.model_name,
        "names": study.names,
        "metric": study.metric_name,
        "intact": float(means[0]),
        "steps": names,
    }
    for number, name in enumerate(names):
        result[name] = [float(value) for value in means[1 + number * count: 1 + (number + 1) * count]]
    return result
