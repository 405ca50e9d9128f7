"""The type aliases in the public API's annotations.

Keras runs on TensorFlow, JAX or PyTorch, so "an array" is a NumPy array or
any backend's tensor; the docstrings give the shapes.
"""

import os
from typing import Any, Callable, Optional, Sequence, Union

import keras

ArrayLike = Any  # a NumPy array, a Python sequence of numbers, or a tf / jax / torch tensor
Batches = Any  # an (x, y) pair of arrays, or an iterable of (x, y) batches (a list, a tf.data.Dataset)
BlockNames = Optional[Sequence[str]]  # block names or paths ("outer/block3"); None: every block found
LossLike = Union[None, str, Callable[..., Any], keras.losses.Loss]  # None: the model's compiled loss
MetricLike = Union[None, str, Callable[..., Any], keras.metrics.Metric]
Activation = Union[str, Callable[..., Any]]
InitializerLike = Union[str, dict, keras.initializers.Initializer]
RegularizerLike = Union[None, str, dict, keras.regularizers.Regularizer]
IntOrPair = Union[int, tuple[int, int]]
Results = dict[str, Any]  # an instrument's measurements, keys listed in its docstring


# The plots' inputs: one instrument result or a list of them, one legend label per result.
OneOrMore = Union[Results, Sequence[Results]]
Labels = Optional[Sequence[str]]
PathLike = Union[str, os.PathLike, None]

__all__ = ["Activation", "ArrayLike", "Batches", "BlockNames", "InitializerLike", "IntOrPair", "Labels", "LossLike",
           "MetricLike", "OneOrMore", "PathLike", "RegularizerLike", "Results"]
