"""Which output, which loss and which metric an instrument uses: taken from the model.

In order:

1. the output: the model's only output, or `output_index=` (the output the
   compiled loss is for when `model.compile` gave a loss to one output only,
   as `loss=[loss, None]` for a GPT returning `[logits, x]`);
2. the loss: `loss=` if given, else the loss of `model.compile`, else the
   cross-entropy that fits the output: logits or probabilities over the last
   axis (a softmax/sigmoid activation on the output layer, or values that
   are probabilities), one unit = a binary classifier. Several sigmoid
   units are a multi-label classifier, and so are logits scored against
   multi-hot targets (rows of 0/1 that are not all one-hot): binary
   cross-entropy per unit, the mean over the units, as
   `keras.losses.binary_crossentropy`;
3. targets when `y=None`: random labels in the form the loss reads
   (integers over the last axis, one-hot, or 0/1).

Where none of these fits (an image output with neither `y` nor `loss`, a
one-unit output that may be a logit or a probability, multi-hot targets for
an output of a model without a graph whose values are all in [0, 1]) the instruments
refuse with a ValueError that says what to pass instead of computing a
number that means nothing.

Masks, as Keras' own losses read them: where the output carries a Keras
mask (a per-token output after `Embedding(mask_zero=True)` or `Masking`,
`output_mask`), the loss is the mean over the real positions only,
`sum(loss * mask) / sum(mask)`, the number
`keras.losses.SparseCategoricalCrossentropy()(y, model(x))`, `fit` and
`evaluate` give. The instruments take the mask from an eager run of the
batch and pass it on, so it holds where the output itself has lost it (a
traced forward pass, an output cast to float32, numpy). A `padding_mask=`
passed to a block is no Keras mask: Keras' loss counts every position of
that output, and so does this one.
"""

import keras
import numpy as np
from keras import ops

# Keras 3 has no public getter for the mask it attaches to a layer's output (it keeps it in
# `_keras_mask`, or in a table for a JAX array); this one private function is what its losses read.
# Should a later Keras move it, the attribute alone still gives the mask on TensorFlow and PyTorch
# (tests/library/test_masked_instruments.py would show a JAX model losing it).
try:
    from keras.src.backend.common.masking import get_keras_mask
except ImportError:  # pragma: no cover (Keras 3.15 has it)
    def get_keras_mask(x):
        return getattr(x, "_keras_mask", None)

from residual_keras.diagnostics._tensors import masked_mean

KINDS = ("logits", "probabilities", "binary_logits", "binary_probabilities", "multilabel_probabilities",
         "logits_or_probabilities")


def output_mask(output):
    """The Keras mask `output` carries ((B, T) for a per-token output), or None: the positions Keras' losses keep."""
    return get_keras_mask(output)


def keras_mask_weights(mask, reduction):
    """The sample weights a `keras.losses.Loss` makes of an output's mask (`Loss.__call__`).

    Under a mean reduction ("sum_over_batch_size", "mean") each real
    position weighs total / real positions and padding 0, so that the mean
    over all positions is the mean over the real ones; otherwise the mask
    itself (a "sum" adds the real positions).
    """
    weights = ops.cast(mask, "float32")
    if reduction in ("sum_over_batch_size", "mean"):
        total = float(np.prod(tuple(mask.shape)))
        weights = weights * ops.divide_no_nan(total, ops.sum(weights))
    return weights


def _compiled_loss(model):
    return getattr(model, "loss", None) if getattr(model, "compiled", False) else None


def _output_names(model, count):
    names = getattr(model, "output_names", None)
    return list(names) if names and len(names) == count else None


def ordered_outputs(model, outputs):
    """(names or None, tensors): the model's outputs in the order `output_index` counts them.

    A dict of outputs by its keys, sorted, whatever order the model returns
    them in: the order in which Keras flattens them, lists
    `model.outputs` and `model.output_names` (the names of the layers that
    compute them), and pairs them with a list of losses in `compile`; a list
    in its own order, named by `model.output_names` where it has one name
    per output.
    """
    if isinstance(outputs, dict):
        keys = sorted(outputs)
        return keys, [outputs[key] for key in keys]
    if isinstance(outputs, (list, tuple)):
        return _output_names(model, len(outputs)), list(outputs)
    return None, [outputs]


def _listing(names, sequence):
    return ", ".join(
        f"{index} {names[index]!r} {tuple(output.shape)}" if names else f"{index} {tuple(output.shape)}"
        for index, output in enumerate(sequence)
    )


def choose_output(model, outputs, output_index=None):
    """The output of `model` the instruments' loss reads, chosen as they choose it.

    Args:
        model: the keras.Model that returned `outputs`.
        outputs: what `model(x)` returned: one tensor, a list or a dict.
        output_index: None (the only output, or the one output `model.compile`
            gave a loss to), a position (in the order of `model.output_names`
            for a list, of the sorted keys for a dict) or an output's name.

    Returns:
        (the chosen output, its position (None where `outputs` is one
        tensor), the number of outputs). `ValueError` where the choice is
        ambiguous or names no output.
    """
    names, sequence = ordered_outputs(model, outputs)
    if not isinstance(outputs, (dict, list, tuple)):
        if output_index not in (None, 0, -1):
            raise ValueError(
                f"output_index={output_index!r}, but model {model.name!r} has one output."
            )
        return outputs, None, 1
    if isinstance(output_index, str):
        if not names or output_index not in names:
            raise ValueError(
                f"Model {model.name!r} has no output named {output_index!r}; its outputs: "
                f"{_listing(names, sequence)}."
            )
        output_index = names.index(output_index)
    if len(sequence) == 1 and output_index in (None, 0, -1):
        return sequence[0], 0, 1
    if output_index is None:
        output_index = _the_compiled_output(model, len(sequence), names)
    if output_index is None:
        raise ValueError(
            f"Model {model.name!r} has {len(sequence)} outputs ({_listing(names, sequence)}): "
            "pass output_index= (a position or a name) to say which one the loss and the metric "
            "read, or compile the model with a loss for that output only (loss=[loss, None])."
        )
    if isinstance(output_index, bool) or not (
        isinstance(output_index, (int, np.integer)) and -len(sequence) <= output_index < len(sequence)
    ):
        raise ValueError(
            f"output_index must be a position in [0, {len(sequence)}) or an output's name for "
            f"model {model.name!r} (its outputs: {_listing(names, sequence)}), got {output_index!r}."
        )
    return sequence[output_index], int(output_index) % len(sequence), len(sequence)


def targets_of(y, model, names, index, count):
    """The part of `y` output `index` is scored against.

    `y[name]` from a dict of targets keyed by output name, `y[index]` from a
    list with one array per output, else `y` itself.
    """
    if isinstance(y, dict):
        name = None if names is None or index is None else names[index]
        if name is None and len(y) == 1:
            return next(iter(y.values()))
        if name not in y:
            raise ValueError(
                f"y is a dict with keys {sorted(y)}, but the loss reads output "
                f"{index if name is None else repr(name)} of model {model.name!r}: key y by the "
                f"output names ({', '.join(map(repr, names or []))})."
            )
        return y[name]
    if isinstance(y, (list, tuple)) and count > 1 and len(y) == count and index is not None and all(
            np.ndim(entry) >= 1 for entry in y):
        return y[index]
    return y


def _the_compiled_output(model, count, names):
    """The position of the one output `model.compile` gave a loss to, or None."""
    loss = _compiled_loss(model)
    if isinstance(loss, dict):
        given = [name for name, value in loss.items() if value is not None]
        if names and len(given) == 1 and given[0] in names:
            return names.index(given[0])
    elif isinstance(loss, (list, tuple)) and len(loss) == count:
        given = [index for index, value in enumerate(loss) if value is not None]
        if len(given) == 1:
            return given[0]
    return None


def _compiled_for(model, index, count, names=None):
    """The compiled loss of output `index` of `count`, named `names` (None if not compiled)."""
    loss = _compiled_loss(model)
    if isinstance(loss, dict):
        if names is None:
            return next(iter(loss.values())) if len(loss) == 1 else None
        return loss.get(names[index or 0])
    if isinstance(loss, (list, tuple)):
        return loss[index or 0] if (index or 0) < len(loss) else None
    return loss


def _output_layer(model, index):
    """The layer that computes output `index` of a functional or Sequential model, or None."""
    if isinstance(model, keras.Sequential):
        return model.layers[-1] if model.layers else None
    names = getattr(model, "output_names", None)
    if not names:
        return None  # a subclassed model: no graph to read
    try:
        layer = model.get_layer(names[index or 0])
    except ValueError:
        return None
    if isinstance(layer, keras.Model):
        return _output_layer(layer, 0)
    return layer


def _final_activation(layer):
    """"softmax", "sigmoid", "linear", "other" (any other function), or None (unknown)."""
    if layer is None:
        return None
    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    activation = getattr(layer, "activation", None)
    if activation is None:
        return None
    name = getattr(activation, "__name__", "")
    return name if name in ("softmax", "sigmoid", "linear") else "other"


def output_kind(model, output, index=None):
    """What the output is: one of KINDS, or None where no classifier loss fits.

    From the output layer's activation where the model has a graph to read
    (softmax: probabilities; sigmoid: binary, or multi-label with several
    units; none: logits, of one class or, against multi-hot targets, of
    several; anything else: None); otherwise from the values (rows that are
    probability distributions; "logits_or_probabilities" where every value
    is in [0, 1] but the rows do not sum to 1: logits against class labels,
    refused against multi-hot targets). Ranks above 3 (images) are
    classifiers only with an explicit softmax or sigmoid.
    """
    if "float" not in keras.backend.standardize_dtype(output.dtype):
        return None
    rank = len(output.shape)
    units = 1 if rank == 1 else output.shape[-1]
    activation = _final_activation(_output_layer(model, index))
    if activation == "other" or rank == 0:
        return None
    if rank > 3 and activation not in ("softmax", "sigmoid"):
        return None
    values = np.asarray(ops.convert_to_numpy(ops.cast(output, "float32")))
    binary = units == 1
    if activation == "softmax":
        return "binary_probabilities" if binary else "probabilities"
    if activation == "sigmoid":
        return "binary_probabilities" if binary else "multilabel_probabilities"
    if activation == "linear":
        return "binary_logits" if binary else "logits"
    in_unit_range = bool(np.all((values >= 0) & (values <= 1)))
    if binary:
        if in_unit_range:
            raise ValueError(
                f"Cannot tell whether the one-unit output of model {model.name!r} is a "
                "probability or a logit (every value is in [0, 1]): compile the model with "
                "its loss or pass loss= (e.g. keras.losses.BinaryCrossentropy(from_logits=True))."
            )
        return "binary_logits"
    if in_unit_range and np.allclose(values.sum(axis=-1), 1.0, atol=1e-3):
        return "probabilities"
    return "logits_or_probabilities" if in_unit_range else "logits"


def is_multi_hot(y_true, y_pred):
    """Whether `y_true` are multi-hot targets for `y_pred`: its shape, 0/1 values, not every row one-hot."""
    if tuple(getattr(y_true, "shape", np.shape(y_true))) != tuple(y_pred.shape) or len(y_pred.shape) < 2:
        return False
    values = np.asarray(ops.convert_to_numpy(y_true), dtype="float64")
    return bool(np.all((values == 0) | (values == 1)) and not np.all(values.sum(axis=-1) == 1))


def _multilabel_refused(kind, y_true, y_pred):
    """The error for targets a multi-label kind cannot read, or for multi-hot targets of an unknown output."""
    if kind == "multilabel_probabilities":
        return ValueError(
            f"A sigmoid output of {y_pred.shape[-1]} units is read as a multi-label classifier, scored "
            f"against multi-hot targets of its shape {tuple(y_pred.shape)}; got targets of shape "
            f"{tuple(getattr(y_true, 'shape', np.shape(y_true)))}. Pass multi-hot y, or compile the model with its loss (or pass loss=)."
        )
    return ValueError(
        "Multi-hot targets, but the output (of a model without a graph to read its activation) has "
        "every value in [0, 1] with rows that do not sum to 1: cannot tell sigmoid probabilities from "
        "logits. Compile the model with its loss or pass loss= (e.g. "
        "keras.losses.BinaryCrossentropy(from_logits=True)) and a metric."
    )


def _binary_targets_like(y_true, y_pred):
    return ops.reshape(ops.cast(y_true, y_pred.dtype), ops.shape(y_pred))


def kind_loss(kind):
    """The per-example cross-entropy for an output of this kind (binary per unit for multi-hot targets)."""
    if kind in ("logits", "probabilities", "logits_or_probabilities", "multilabel_probabilities"):

        def crossentropy(y_true, y_pred):
            multi_hot = is_multi_hot(y_true, y_pred)
            if kind == "multilabel_probabilities" or (multi_hot and kind != "probabilities"):
                if kind == "logits_or_probabilities" or tuple(y_true.shape) != tuple(y_pred.shape):
                    raise _multilabel_refused(kind, y_true, y_pred)
                # Multi-label: binary cross-entropy per unit, the mean over the units (as Keras').
                return keras.losses.binary_crossentropy(
                    ops.cast(y_true, y_pred.dtype), y_pred, from_logits=kind != "multilabel_probabilities")
            from_logits = kind != "probabilities"
            if tuple(ops.shape(y_true)) == tuple(ops.shape(y_pred)):  # one-hot targets
                return keras.losses.categorical_crossentropy(y_true, y_pred, from_logits=from_logits)
            return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits)

        return crossentropy
    from_logits = kind == "binary_logits"

    def binary_crossentropy(y_true, y_pred):
        if len(y_pred.shape) == 1:
            y_pred = ops.expand_dims(y_pred, -1)
        return keras.losses.binary_crossentropy(
            _binary_targets_like(y_true, y_pred), y_pred, from_logits=from_logits
        )

    return binary_crossentropy


def _loss_name(loss):
    name = loss if isinstance(loss, str) else (
        getattr(loss, "name", None) or getattr(loss, "__name__", None) or type(loss).__name__
    )
    return str(name).replace("_", "").lower()


class Objective:
    """The loss an instrument uses on one output, and random targets for y=None.

    Attributes:
        function: `loss(y_true, y_pred)` (per example or already a mean).
        description: where it came from, for error messages.
    """

    def __init__(self, model, output, index=None, count=1, loss=None, names=None):
        self.model, self.output, self.index, self.count = model, output, index, count
        self.names = names
        self.kind = None
        self.user_callable = False
        if loss is None:
            loss = _compiled_for(model, index, count, names)
            source = "the loss of model.compile"
        else:
            source = "loss="
            self.user_callable = callable(loss) and not isinstance(
                loss, (str, keras.losses.Loss)) and not _is_keras_loss_function(loss)
        if loss is None:
            self.kind = output_kind(model, output, index)
            if self.kind is None:
                which = "its output" if index is None else f"its output {index}"
                raise ValueError(
                    f"Model {model.name!r} has no loss for {which} (none passed, none from "
                    f"model.compile), and that output, of shape {tuple(output.shape)}, is not a "
                    "classifier's (logits or probabilities over the last axis): there is no "
                    "sensible default loss. Compile the model with its loss, or pass loss= "
                    "(and y=)."
                )
            self.function = kind_loss(self.kind)
            self.description = f"cross-entropy of {self.kind.replace('_', ' ')}"
        elif isinstance(loss, (str, keras.losses.Loss)):
            self.function = keras.losses.get(loss) if isinstance(loss, str) else loss
            self.description = f"{source} ({_loss_name(loss)})"
        elif callable(loss):
            self.function = loss
            self.description = f"{source} ({getattr(loss, '__name__', 'callable')})"
        else:
            raise TypeError(f"loss must be None, a Keras loss or a callable, got {loss!r}.")

    def targets(self, y):
        """The part of `y` this output's loss reads (`y[name]` from a dict of targets)."""
        return targets_of(y, self.model, self.names, self.index, self.count)

    def __call__(self, y_true, y_pred, mask=None):
        """The mean loss over the batch (float32 scalar; computed in float32, as Keras' losses, under mixed precision).

        `mask`: the output's Keras mask (`output_mask` of the same output
        in an eager run), or None. Where it is given the mean is over the
        real positions only, as Keras' losses compute it.
        """
        y_true = ops.convert_to_tensor(y_true)
        if keras.backend.standardize_dtype(y_pred.dtype) in ("bfloat16", "float16"):
            y_pred = ops.cast(y_pred, "float32")
        if len(y_true.shape) == len(y_pred.shape) - 1 and y_pred.shape[-1] == 1:
            y_true = ops.expand_dims(y_true, -1)  # labels (B,) for outputs (B, 1), as Keras' fit
        if isinstance(self.function, keras.losses.Loss):
            # A Keras loss reduces by itself, leaving out the positions of the mask y_pred carries;
            # where y_pred has lost it (cast, traced), the same mask goes in as its sample weights.
            weights = None
            if mask is not None and output_mask(y_pred) is None:
                weights = keras_mask_weights(mask, self.function.reduction)
            return ops.mean(ops.cast(self.function(y_true, y_pred, sample_weight=weights), "float32"))
        return masked_mean(self.function(y_true, y_pred), mask)

    def random_targets(self, seed):
        """Random labels in the form the loss reads (`seed`: an int or a numpy Generator)."""
        rng = np.random.default_rng(seed)
        shape = tuple(self.output.shape)
        name = "" if self.kind else _loss_name(self.function)
        units = 1 if len(shape) == 1 else shape[-1]
        if self.kind in ("binary_logits", "binary_probabilities", "multilabel_probabilities") or "binary" in name:
            return rng.integers(0, 2, size=shape).astype("float32")
        if self.kind in ("logits", "probabilities", "logits_or_probabilities") or "sparsecategorical" in name or (
            self.user_callable and len(shape) <= 3
        ):
            return rng.integers(0, units, size=shape[:-1])
        if "categorical" in name:
            return np.eye(units, dtype="float32")[rng.integers(0, units, size=shape[:-1])]
        raise ValueError(
            f"y=None asks for random class labels, which {self.description} on an output of "
            f"shape {shape} does not read: pass y= (the targets of this batch)."
        )


def _is_keras_loss_function(loss):
    return getattr(loss, "__module__", "").startswith("keras")


def objective(model, outputs, loss=None, output_index=None):
    """The `Objective` for a model's outputs (as returned by calling the model)."""
    output, index, count = choose_output(model, outputs, output_index)
    return Objective(model, output, index, count, loss, names=ordered_outputs(model, outputs)[0])
