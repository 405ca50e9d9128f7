"""Which output, which loss and which metric an instrument uses: taken from the model.

In order:

1. the output: the model's only output, or `output_index=` (the output the
   compiled loss is for when `model.compile` gave a loss to one output only,
   as `loss=[loss, None]` for a GPT returning `[logits, x]`);
2. the loss: `loss=` if given, else the loss of `model.compile`, else the
   cross-entropy that fits the output: logits or probabilities over the last
   axis (a softmax/sigmoid activation on the output layer, or values that
   are probabilities), one unit = a binary classifier;
3. targets when `y=None`: random labels in the form the loss reads
   (integers over the last axis, one-hot, or 0/1).

Where none of these fits (an image output with neither `y` nor `loss`, a
one-unit output that may be a logit or a probability) the instruments
refuse with a ValueError that says what to pass instead of computing a
number that means nothing.
"""

import keras
import numpy as np
from keras import ops

KINDS = ("logits", "probabilities", "binary_logits", "binary_probabilities")


def _shapes(outputs):
    return ", ".join(str(tuple(output.shape)) for output in outputs)


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
    (softmax/sigmoid: probabilities, none: logits, anything else: None);
    otherwise from the values (rows that are probability distributions).
    Ranks above 3 (images) are classifiers only with an explicit softmax or
    sigmoid.
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
    if activation in ("softmax", "sigmoid"):
        return "binary_probabilities" if binary else "probabilities"
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
    return "logits"


def _binary_targets_like(y_true, y_pred):
    return ops.reshape(ops.cast(y_true, y_pred.dtype), ops.shape(y_pred))


def kind_loss(kind):
    """The per-example cross-entropy for an output of this kind."""
    if kind in ("logits", "probabilities"):
        from_logits = kind == "logits"

        def crossentropy(y_true, y_pred):
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

    def __call__(self, y_true, y_pred):
        """The mean loss over the batch (float32 scalar)."""
        y_true = ops.convert_to_tensor(y_true)
        if len(y_true.shape) == len(y_pred.shape) - 1 and y_pred.shape[-1] == 1:
            y_true = ops.expand_dims(y_true, -1)  # labels (B,) for outputs (B, 1), as Keras' fit
        return ops.mean(ops.cast(self.function(y_true, y_pred), "float32"))

    def random_targets(self, seed):
        """Random labels in the form the loss reads (`seed`: an int or a numpy Generator)."""
        rng = np.random.default_rng(seed)
        shape = tuple(self.output.shape)
        name = "" if self.kind else _loss_name(self.function)
        units = 1 if len(shape) == 1 else shape[-1]
        if self.kind in ("binary_logits", "binary_probabilities") or "binary" in name:
            return rng.integers(0, 2, size=shape).astype("float32")
        if self.kind in ("logits", "probabilities") or "sparsecategorical" in name or (
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


# Metrics ---------------------------------------------------------------------

METRICS = ("accuracy", "crossentropy", "loss")


def _accuracy(kind):
    def accuracy(y_true, y_pred):
        y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
        if kind in ("binary_logits", "binary_probabilities"):
            threshold = 0.0 if kind == "binary_logits" else 0.5
            predicted = (y_pred.reshape(len(y_pred), -1) > threshold).astype("int64")
            return float(np.mean(predicted == y_true.reshape(len(y_true), -1).astype("int64")))
        if y_true.shape == y_pred.shape:  # one-hot targets
            y_true = np.argmax(y_true, axis=-1)
        return float(np.mean(np.argmax(y_pred, axis=-1) == y_true))

    return accuracy


def _keras_metric(metric):
    """A numpy metric(y_true, y_pred) -> float from a Keras metric (a fresh copy each time)."""

    def value(y_true, y_pred):
        if isinstance(metric, keras.metrics.Metric):
            fresh = type(metric).from_config(metric.get_config())  # the model's own keeps its state
            fresh.update_state(y_true, y_pred)
            return float(ops.convert_to_numpy(fresh.result()))
        return float(np.mean(ops.convert_to_numpy(metric(y_true, y_pred))))

    return value


def _compiled_metric(model, index, count, names=None):
    """The first metric `model.compile` gave this output, or None."""
    config = model.get_compile_config() if getattr(model, "compiled", False) else {}
    metrics = (config or {}).get("metrics")
    if not metrics:
        return None
    if isinstance(metrics, dict):
        metrics = metrics.get(names[index]) if names and index is not None else None
    elif count > 1 and isinstance(metrics, (list, tuple)) and all(
        isinstance(entry, (list, tuple)) or entry is None for entry in metrics
    ):
        metrics = metrics[index] if index is not None and index < len(metrics) else None
    if isinstance(metrics, (list, tuple)):
        metrics = metrics[0] if metrics else None
    if metrics is None:
        return None
    return metrics if isinstance(metrics, str) else keras.metrics.deserialize(metrics)


def _scored_by_accuracy(model, output, index, count, names):
    """Whether accuracy is the default metric of this output.

    Not for an image output (rank 4 and up: a U-Net's, a super-resolution
    net's, even with a sigmoid) nor for an output compiled with a loss that
    is not a cross-entropy (MSE, MAE, Huber: a regression): those are scored
    by their loss, which says whether a change helps or hurts.
    """
    if len(output.shape) > 3:
        return False
    compiled = _compiled_for(model, index, count, names)
    return compiled is None or "crossentropy" in _loss_name(compiled)


def resolve_metric(metric, model, output, index=None, count=1, names=None):
    """(name, metric(y_true, y_pred) -> float on numpy arrays) for `lesion` and its kin.

    None: the first metric `model.compile` gave this output, else accuracy
    for a classifier output (one compiled, if at all, with a cross-entropy,
    of rank at most 3), else the model's loss (regressions, images); "accuracy" and
    "crossentropy" as fit the output (logits or probabilities, binary or
    not); "loss": the model's loss (as `gradient_norms` uses it); another
    string: `keras.metrics.get`; a Keras metric; or a callable.
    """
    if metric is None:
        metric = _compiled_metric(model, index, count, names)
        if metric is None and _scored_by_accuracy(model, output, index, count, names):
            try:
                return resolve_metric("accuracy", model, output, index, count, names)
            except ValueError:
                pass
        if metric is None:
            metric = "loss"
    if isinstance(metric, keras.metrics.Metric):
        return metric.name, _keras_metric(metric)
    if isinstance(metric, str) and metric in ("accuracy", "acc", "crossentropy"):
        kind = output_kind(model, output, index)
        if kind is None:
            raise ValueError(
                f"metric={metric!r} needs a classifier output (logits or probabilities over "
                f"the last axis); model {model.name!r}'s output has shape "
                f"{tuple(output.shape)}. Pass another metric (a Keras metric name or a "
                "callable metric(y_true, y_pred) -> float)."
            )
        if metric == "crossentropy":
            function = kind_loss(kind)
            return "crossentropy", lambda y_true, y_pred: float(
                np.mean(ops.convert_to_numpy(function(ops.convert_to_tensor(y_true),
                                                      ops.convert_to_tensor(y_pred)))))
        return "accuracy", _accuracy(kind)
    if metric == "loss":
        loss = Objective(model, output, index, count, names=names)
        return "loss", lambda y_true, y_pred: float(
            ops.convert_to_numpy(loss(y_true, ops.convert_to_tensor(y_pred))))
    if isinstance(metric, str):
        try:
            found = keras.metrics.get(metric)
        except ValueError:
            raise ValueError(
                f"Unknown metric={metric!r}. Accepted: None (the model's), "
                f"{', '.join(map(repr, METRICS))}, a Keras metric name or object, or a callable "
                "metric(y_true, y_pred) -> float on numpy arrays."
            ) from None
        return metric, _keras_metric(found)
    if callable(metric):
        return getattr(metric, "__name__", "metric"), metric
    raise ValueError(
        f"Unknown metric={metric!r}. Accepted: None (the model's), {', '.join(map(repr, METRICS))}, "
        "a Keras metric name or object, or a callable metric(y_true, y_pred) -> float."
    )
