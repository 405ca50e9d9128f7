"""What the instruments take as data: one calling convention for all of them.

Every instrument takes the model, then `x` and, where it reads targets, `y`:

- arrays or tensors: `x` the model's inputs (a list or dict of them for a
  model with several inputs), `y` its targets (a dict keyed by output name
  for a model with several outputs);
- a `tf.data.Dataset`, or any other iterable of `(x, y)` batches (a
  generator, a list of tuples), with `y` left out: the instruments that
  measure one batch (`gradient_norms`, `jacobian_norm`, the stream
  instruments, ...) use its first batch, the ones that average a metric over
  data (`lesion`, `delete_blocks`, `swap_blocks`, `lesion_sublayers`) all of
  it;
- for those last four, an `(x, y)` tuple too.
"""

import itertools

import keras
import numpy as np

from residual_keras.diagnostics._tensors import _to_numpy


def is_batches(data):
    """Whether `data` is a dataset or iterable of batches rather than arrays (or a list/dict of them)."""
    if data is None or isinstance(data, (np.ndarray, list, tuple, dict, str, bytes, int, float)):
        return False
    if keras.ops.is_tensor(data) or (hasattr(data, "shape") and hasattr(data, "dtype")):
        return False  # an array or tensor (of any framework): one batch
    return hasattr(data, "__iter__")


def _list_of_batches(data):
    return (isinstance(data, list) and bool(data)
            and all(isinstance(batch, (tuple, list)) and len(batch) >= 2 for batch in data))


def _numpy(structure):
    return keras.tree.map_structure(_to_numpy, structure)


def _split(batch):
    """(x, y) of one element of a dataset: an (x, y[, sample_weight]) tuple, or x alone (y None)."""
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return batch[0], batch[1]
    if isinstance(batch, (tuple, list)) and len(batch) == 1:
        return batch[0], None
    return batch, None


def one_batch(x, y=None):
    """(x, y) of one batch: `x` and `y` as given, or the first batch of a dataset `x`."""
    if not is_batches(x):
        return x, y
    try:
        first = next(iter(x))
    except StopIteration:
        raise ValueError("The dataset x yielded no batch.") from None
    batch_x, batch_y = _split(first)
    return _numpy(batch_x), y if y is not None else (None if batch_y is None else _numpy(batch_y))


def _length(structure):
    leaves = keras.tree.flatten(structure)
    if not leaves:
        raise ValueError("x holds no array.")
    return len(leaves[0])


def batches(data, y, batch_size):
    """(x, y) numpy batches from arrays and targets, an (x, y) tuple, or a dataset / iterable of batches."""
    if y is None and isinstance(data, tuple) and len(data) == 2 and not is_batches(data[0]):
        data, y = data
    if y is not None:
        x, y = _numpy(data), _numpy(y)
        count, targets = _length(x), _length(y)
        if count != targets:
            raise ValueError(f"x and y differ in length: {count} != {targets}.")
        for start in range(0, count, batch_size):
            window = slice(start, start + batch_size)
            yield (keras.tree.map_structure(lambda array: array[window], x),
                   keras.tree.map_structure(lambda array: array[window], y))
        return
    if not (is_batches(data) or _list_of_batches(data)):
        raise ValueError(
            "This instrument compares predictions with targets: pass x and y (arrays), an (x, y) "
            "tuple, or a dataset of (x, y) batches; got x alone "
            f"({type(data).__name__}) and y=None."
        )
    for batch in data:
        batch_x, batch_y = _split(batch)
        if batch_y is None:
            raise ValueError("The dataset yields x without y: this instrument needs (x, y) batches.")
        yield _numpy(batch_x), _numpy(batch_y)


def first_and_rest(iterator):
    """(first item, an iterator over all items) of a non-empty iterator."""
    try:
        first = next(iterator)
    except StopIteration:
        raise ValueError("The data yielded no examples.") from None
    return first, itertools.chain([first], iterator)


def batch_length(x):
    """The number of examples in a batch `x` (the first array's length)."""
    return _length(x)
