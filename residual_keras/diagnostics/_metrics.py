"""Which metric `lesion` and its kin score a model by: taken from the model and its output.

None: the first metric `model.compile` gave the output, else accuracy for a
classifier's output, else the model's loss (regressions, images). Accuracy
fits the output (`_losses.output_kind`): argmax against class labels or
one-hot rows; for one unit, logit > 0 or probability > 0.5; for a
multi-label output (several sigmoid units, logits against multi-hot
targets, or any output compiled with a binary cross-entropy) the same
threshold on every unit, element-wise, as `keras.metrics.binary_accuracy`.

Every metric is called as `metric(y_true, y_pred, mask)` on numpy arrays,
`mask` the output's Keras mask (`_losses.output_mask`) or None; where it is
given only the real positions count, as in Keras' metrics (`evaluate` with
`metrics=["accuracy"]`): accuracy over the real positions, the loss and the
cross-entropy as `_losses.Objective` computes them, a Keras metric with the
mask as its sample weights, and a callable's values, where it returns one
per position, averaged over the real ones.
"""

import keras
import numpy as np
from keras import ops

from residual_keras.diagnostics._losses import (
    Objective, _compiled_for, _loss_name, _multilabel_refused, is_multi_hot, kind_loss, output_kind)
from residual_keras.diagnostics._tensors import masked_mean

METRICS = ("accuracy", "crossentropy", "loss")


def mean_over_real(values, mask):
    """The mean of numpy `values` over the real positions (`mask` True), its trailing axes included.

    0 where no position is real (as Keras' masked mean); the plain mean
    where `mask` is None or `values` are not per position (one per example).
    """
    values = np.asarray(values, dtype="float64")
    if mask is None:
        return float(np.mean(values))
    keep = np.asarray(mask, dtype=bool)
    if values.shape[: keep.ndim] != keep.shape:
        return float(np.mean(values))
    keep = np.broadcast_to(keep.reshape(keep.shape + (1,) * (values.ndim - keep.ndim)), values.shape)
    count = int(np.sum(keep))
    return float(np.sum(values[keep]) / count) if count else 0.0


def _unit_accuracy(y_true, y_pred, threshold, mask=None):
    """Element-wise accuracy of thresholded units against 0/1 targets (binary and multi-label)."""
    predicted = (y_pred > threshold).astype("int64")
    return mean_over_real(predicted == y_true.reshape(predicted.shape).astype("int64"), mask)


def _accuracy(kind, compiled_threshold=None):
    """accuracy(y_true, y_pred, mask=None) on numpy arrays for an output of this kind (real positions only).

    `compiled_threshold`: the unit threshold (0 for logits, 0.5 for
    probabilities) of an output of several units compiled with a binary
    cross-entropy, which is scored element-wise whatever its targets.
    """

    def accuracy(y_true, y_pred, mask=None):
        y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
        if compiled_threshold is not None:
            return _unit_accuracy(y_true, y_pred, compiled_threshold, mask)
        if kind in ("binary_logits", "binary_probabilities"):
            return _unit_accuracy(y_true, y_pred, 0.0 if kind == "binary_logits" else 0.5, mask)
        multi_hot = is_multi_hot(y_true, y_pred)
        if kind == "multilabel_probabilities" or (multi_hot and kind != "probabilities"):
            if kind == "logits_or_probabilities" or y_true.shape != y_pred.shape:
                raise _multilabel_refused(kind, y_true, y_pred)
            return _unit_accuracy(y_true, y_pred, 0.5 if kind == "multilabel_probabilities" else 0.0, mask)
        if y_true.shape == y_pred.shape:  # one-hot targets
            y_true = np.argmax(y_true, axis=-1)
        return mean_over_real(np.argmax(y_pred, axis=-1) == y_true, mask)

    return accuracy


def _tensor(mask):
    return None if mask is None else ops.convert_to_tensor(mask)


def _compiled_binary_threshold(model, output, index, count, names):
    """0 or 0.5 where this output has several units and `model.compile` gave it a binary cross-entropy, else None."""
    compiled = _compiled_for(model, index, count, names)
    if compiled is None or len(output.shape) < 2 or output.shape[-1] == 1:
        return None
    name = _loss_name(compiled)
    if "binary" not in name or "crossentropy" not in name:
        return None
    return 0.0 if getattr(compiled, "from_logits", False) else 0.5


def _keras_metric(metric):
    """A numpy metric(y_true, y_pred, mask=None) -> float from a Keras metric (a fresh copy each time).

    The mask goes in as the sample weights, as Keras' metrics weigh a
    masked output (`MeanMetricWrapper`).
    """

    def value(y_true, y_pred, mask=None):
        if isinstance(metric, keras.metrics.Metric):
            fresh = type(metric).from_config(metric.get_config())  # the model's own keeps its state
            weights = None if mask is None else np.asarray(mask, dtype="float32")
            fresh.update_state(y_true, y_pred, sample_weight=weights)
            return float(ops.convert_to_numpy(fresh.result()))
        return mean_over_real(ops.convert_to_numpy(metric(y_true, y_pred)), mask)

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
    """(name, metric(y_true, y_pred, mask=None) -> float on numpy arrays) for `lesion` and its kin.

    None: the first metric `model.compile` gave this output, else accuracy
    for a classifier output (one compiled, if at all, with a cross-entropy,
    of rank at most 3), else the model's loss (regressions, images); "accuracy" and
    "crossentropy" as fit the output (logits or probabilities, binary or
    not); "loss": the model's loss (as `gradient_norms` uses it); another
    string: `keras.metrics.get`; a Keras metric; or a callable. `mask`:
    the output's Keras mask or None; where given, only its real positions
    count (see the module docstring).
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
        if kind is None and metric != "crossentropy" and _compiled_binary_threshold(
                model, output, index, count, names) is not None:
            return "accuracy", _accuracy(None, _compiled_binary_threshold(model, output, index, count, names))
        if kind is None:
            raise ValueError(
                f"metric={metric!r} needs a classifier output (logits or probabilities over "
                f"the last axis); model {model.name!r}'s output has shape "
                f"{tuple(output.shape)}. Pass another metric (a Keras metric name or a "
                "callable metric(y_true, y_pred) -> float)."
            )
        if metric == "crossentropy":
            function = kind_loss(kind)
            return "crossentropy", lambda y_true, y_pred, mask=None: float(ops.convert_to_numpy(masked_mean(
                function(ops.convert_to_tensor(y_true), ops.convert_to_tensor(y_pred)), _tensor(mask))))
        return "accuracy", _accuracy(kind, _compiled_binary_threshold(model, output, index, count, names))
    if metric == "loss":
        loss = Objective(model, output, index, count, names=names)
        return "loss", lambda y_true, y_pred, mask=None: float(
            ops.convert_to_numpy(loss(y_true, ops.convert_to_tensor(y_pred), _tensor(mask))))
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
        return getattr(metric, "__name__", "metric"), lambda y_true, y_pred, mask=None: mean_over_real(
            metric(y_true, y_pred), mask)
    raise ValueError(
        f"Unknown metric={metric!r}. Accepted: None (the model's), {', '.join(map(repr, METRICS))}, "
        "a Keras metric name or object, or a callable metric(y_true, y_pred) -> float."
    )
