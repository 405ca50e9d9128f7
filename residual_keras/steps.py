"""The residual protocol: what the instruments read of a block, beside the call that computes it.

A block computes one or more residual additions in a row, each

    y = post(shortcut(x) + branch(x))

(a CIFAR ResNet block has one, ReLU after the addition; a Transformer block
has two, attention then feed-forward, with a LayerNorm after each addition
in Post-LN). A plain twin's step has no shortcut: `post(branch(x))`.

A block writes that formula in its own `call`, where a student reads it:

    def call(self, x, training=None):
        return self.activation(self.shortcut_path(x, training) + self.branch(x, training))

and lists the same additions, for the instruments (`residual_keras.diagnostics`), in

    residual_steps(*call_args, training=False, **call_kwargs) -> list[ResidualStep]

whose arguments are those its `call` receives after the input (masks, for
instance), and `training`; each step holds the block's own branch and
shortcut methods, so that the instruments measure what the block computes.
One test over every block of the package keeps the two equal
(tests/library/test_block_layer.py); `check_residual_steps(layer, x)`, or
`BlockLayer.check_steps(x)`, checks a block of one's own.

Two methods are optional:

- `identity_scale() -> float | None`: the number that makes an
  identity-initialised block start as the identity and lets it leave it
  (ReZero's alpha, the mean |gamma| of a zero-gamma block's last BatchNorm,
  Fixup's scale); None when the block is not identity-initialised;
- `lesioned(*call_args, **call_kwargs) -> function`: what the block computes
  with its branches removed (Veit et al. 2016). Without it, each residual
  step becomes `post(shortcut(x))`.
"""

import dataclasses
from typing import Any, Callable, Optional, Protocol, Sequence, runtime_checkable

import keras
import numpy as np
from keras import layers, ops

from residual_keras._sublayers import SublayersShown
from residual_keras._types import ArrayLike


def identity(x: Any) -> Any:
    """The identity shortcut: `x`."""
    return x


def _apply(function, x, training=False):
    """`function(x)`; a Keras layer is called with `training` (inference mode by default)."""
    if isinstance(function, layers.Layer):
        return function(x, training=training)
    return function(x)


def apply_post(post, y, training=False):
    """`post(y)`, what follows a residual addition, or `y` for None; a Keras layer is called with
    `training`, and its output keeps the stream's dtype (under a mixed policy too)."""
    if post is None:
        return y
    if isinstance(post, layers.Layer):
        return ops.cast(post(y, training=training), y.dtype)
    return post(y)


_NAMES = {"relu": "ReLU", "gelu": "GELU", "elu": "ELU", "LayerNormalization": "LN"}


def _describe(function):
    """A function's name for `lesion`'s report: "ReLU", "LN", "" for none."""
    if function is None or function is identity:
        return ""
    name = type(function).__name__ if isinstance(function, layers.Layer) else getattr(
        function, "__name__", type(function).__name__)
    return _NAMES.get(name, name)


@dataclasses.dataclass(frozen=True)
class ResidualStep:
    """One residual addition of a block: `post(shortcut(x) + branch(x))`.

    Attributes:
        name: what the step is ("attention", "feedforward"; "" in a block
            with one step).
        branch: the residual function, `x -> f(x)`.
        shortcut: `x -> shortcut(x)`: `identity` (the default), a projection
            where the shape changes, or None for a plain twin, which computes
            `post(branch(x))` (no addition).
        post: what follows the addition (a ReLU, a LayerNorm), or None for
            nothing.
        training: the mode Keras layers among them are called in: False
            (inference, the default, what the instruments read), True, or
            None (Keras' learning phase).

    Example:
        >>> step = ResidualStep("", branch=lambda x: 2 * x)
        >>> float(step(keras.ops.ones(())))  # x + f(x) = 1 + 2
        3.0
    """

    name: str
    branch: Callable[[Any], Any]
    shortcut: Optional[Callable[[Any], Any]] = identity
    post: Optional[Callable[[Any], Any]] = None
    training: Optional[bool] = False

    @property
    def residual(self) -> bool:
        """True when the step adds its shortcut (False: a plain twin's step)."""
        return self.shortcut is not None

    def __call__(self, x):
        """`post(shortcut(x) + branch(x))`, or `post(branch(x))` for a plain step."""
        update = _apply(self.branch, x, self.training)
        y = update if self.shortcut is None else _apply(self.shortcut, x, self.training) + update
        return self._after(y)

    def _after(self, y):
        return apply_post(self.post, y, self.training)

    def without_branch(self, x):
        """The step with its branch removed: `post(shortcut(x))` (residual steps only)."""
        if self.shortcut is None:
            raise ValueError(f"Step {self.name!r} is plain: without its branch nothing is left.")
        return self._after(_apply(self.shortcut, x, self.training))

    def describe_without_branch(self) -> str:
        """`post(shortcut(x))` in words, as `lesion` reports it: "ReLU(shortcut(x))", "shortcut(x)"."""
        post = _describe(self.post)
        return f"{post}(shortcut(x))" if post else "shortcut(x)"


@runtime_checkable
class ResidualBlock(Protocol):
    """A layer the instruments measure as a block: it says how it is built from residual steps."""

    def residual_steps(self, *call_args, **call_kwargs) -> Sequence[ResidualStep]:
        """The block's residual additions, in order, for a call with these arguments."""


def residual_steps(block: layers.Layer, *call_args: Any, **call_kwargs: Any) -> list[ResidualStep]:
    """`block.residual_steps(...)`, checked: a non-empty list of `ResidualStep`s."""
    if not isinstance(block, ResidualBlock):
        raise TypeError(
            f"Layer {block.name!r} ({type(block).__name__}) does not implement the residual "
            "protocol: give it a method residual_steps() (see residual_keras.steps), or wrap "
            "its branch in residual_keras.Residual."
        )
    steps = list(block.residual_steps(*call_args, **call_kwargs))
    if not steps or not all(isinstance(step, ResidualStep) for step in steps):
        raise TypeError(
            f"{type(block).__name__}.residual_steps() must return a non-empty list of "
            f"residual_keras.ResidualStep, got {steps!r}."
        )
    return steps


def run_steps(steps: Sequence[ResidualStep], x: ArrayLike) -> Any:
    """The steps applied one after another: what the block computes from `x`."""
    for step in steps:
        x = step(x)
    return x


class BlockLayer(SublayersShown, layers.Layer):
    """The base of a residual block of your own: you write `call`, the formula, and `residual_steps`.

    A block writes its residual where a reader looks, in its own `call`
    (`return x + self.f(x)`), and lists the same additions in
    `residual_steps(training=False, ...)` for the instruments: each
    `ResidualStep` holds the block's own branch (and shortcut, and what
    follows the addition), so the instruments measure what `call`
    computes. `check_steps(x)` checks that the two agree; run it once on
    your block. `BlockLayer` has no `call` of its own, and adds to
    `keras.layers.Layer` only `check_steps` and a `layers` list (so that
    `model.summary(expand_nested=True)` opens the block). Every block of
    the package is a `BlockLayer`.

    Args:
        **kwargs: the base `keras.layers.Layer` arguments (`name`, `dtype`,
            `trainable`); a subclass adds its own in `__init__`.

    Call arguments:
        those of your `call`: the stream `x` first, then, if the block uses
            them, `training` and `mask` (Keras passes them by these names);
            `residual_steps` takes the same ones after `x`.

    Example:
        >>> class Damped(BlockLayer):  # y = x + 0.1 f(x)
        ...     def build(self, input_shape):
        ...         self.f = keras.layers.Dense(input_shape[-1])
        ...     def branch(self, x):
        ...         return 0.1 * self.f(x)
        ...     def call(self, x):
        ...         return x + self.branch(x)
        ...     def residual_steps(self, training=False):
        ...         return [ResidualStep("", branch=self.branch)]
        >>> block = Damped()
        >>> tuple(block(keras.ops.ones((2, 4))).shape)
        (2, 4)
        >>> block.check_steps(keras.random.normal((2, 4))) < 1e-6
        True
    """

    def check_steps(self, x: ArrayLike, *call_args: Any, training: bool = False, tolerance: float = 1e-4,
                    **call_kwargs: Any) -> float:
        """Checks that `residual_steps()` computes what `call` computes on `x`: `check_residual_steps(self, x)`."""
        return check_residual_steps(self, x, *call_args, training=training, tolerance=tolerance, **call_kwargs)


def identity_scale(block: layers.Layer) -> Optional[float]:
    """The block's identity scale (see the module docstring), or None."""
    method = getattr(block, "identity_scale", None)
    if method is None:
        return None
    value = method()
    return None if value is None else float(value)


def lesioned(block: layers.Layer, *call_args: Any, **call_kwargs: Any) -> tuple[Optional[Callable], str]:
    """(what the block computes with its branches removed, in words), or (None, why not).

    The block's own `lesioned` method if it has one; else every residual
    step as `post(shortcut(x))`. A block with a plain step has nothing left
    without its branch: (None, "plain").
    """
    own = getattr(block, "lesioned", None)
    if own is not None:
        function = own(*call_args, **call_kwargs)
        return function, "identity" if function is identity else f"{type(block).__name__}.lesioned()"
    steps = residual_steps(block, *call_args, **call_kwargs)
    if not all(step.residual for step in steps):
        return None, "plain"

    def without_branches(x):
        for step in steps:
            x = step.without_branch(x)
        return x

    return without_branches, " then ".join(step.describe_without_branch() for step in steps)


def check_residual_steps(block: layers.Layer, x: ArrayLike, *call_args: Any, training: bool = False,
                         tolerance: float = 1e-4, **call_kwargs: Any) -> float:
    """Checks that `block`'s residual steps compute what its `call` computes on `x`.

    The block is called on `x` (with `training`, and the other call
    arguments given), then its steps for the same arguments are run one
    after another. In training mode a layer with dropout gives two
    different draws, and a BatchNorm updates its moving statistics twice:
    check inference (the default) unless the block has neither. Returns the
    largest absolute difference; raises `ValueError` when it is above
    `tolerance` times the output's largest entry (at least 1).

    Example:
        >>> class Own(keras.layers.Layer):  # y = x + f(x)
        ...     def build(self, input_shape):
        ...         self.f = keras.layers.Dense(input_shape[-1])
        ...     def call(self, x):
        ...         return x + self.f(x)
        ...     def residual_steps(self, training=False, **call_kwargs):
        ...         return [ResidualStep("", branch=self.f)]
        >>> check_residual_steps(Own(), keras.random.normal((2, 4))) < 1e-6
        True
    """
    x = ops.convert_to_tensor(x)
    expected = np.asarray(ops.convert_to_numpy(block(x, *call_args, training=training, **call_kwargs)))
    if training:  # a block's own residual_steps may take no `training`; it is asked for only when True
        call_kwargs = {**call_kwargs, "training": training}
    stream = ops.cast(x, block.compute_dtype) if keras.backend.is_float_dtype(x.dtype) else x  # as Keras does
    got = np.asarray(ops.convert_to_numpy(run_steps(residual_steps(block, *call_args, **call_kwargs), stream)))
    if got.shape != expected.shape:
        raise ValueError(
            f"The residual steps of {block.name!r} give shape {got.shape}; the layer gives "
            f"{expected.shape}."
        )
    difference = float(np.max(np.abs(got.astype("float64") - expected))) if got.size else 0.0
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    if difference > tolerance * scale:
        raise ValueError(
            f"The residual steps of {block.name!r} do not compute what the layer computes: they "
            f"differ by up to {difference:.3g}. residual_steps() must describe call() exactly, "
            "post(shortcut(x) + branch(x)) for each step in order, with the block's own layers."
        )
    return difference


__all__ = [
    "BlockLayer",
    "ResidualBlock",
    "ResidualStep",
    "check_residual_steps",
    "identity",
    "identity_scale",
    "lesioned",
    "residual_steps",
    "run_steps",
]
