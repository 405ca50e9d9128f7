"""The residual protocol: a block says once what it computes, as residual steps.

A block computes one or more residual additions in a row, each

    y = post(shortcut(x) + branch(x))

(a CIFAR ResNet block has one, ReLU after the addition; a Transformer block
has two, attention then feed-forward, with a LayerNorm after each addition
in Post-LN). A plain twin's step has no shortcut: `post(branch(x))`.

A block states its steps in one method,

    residual_steps(*call_args, training=False, **call_kwargs) -> list[ResidualStep]

whose arguments are those its `call` receives after the input (masks, for
instance), and `training`. `BlockLayer`, the generic base of every block of
the package, derives `call` from it: the block computes exactly what its
steps say, in training and in inference, so the instruments
(`residual_keras.diagnostics`), which read the steps in inference mode,
measure what the block computes.

Two methods are optional:

- `identity_scale() -> float | None`: the number that makes an
  identity-initialised block start as the identity and lets it leave it
  (ReZero's alpha, the mean |gamma| of a zero-gamma block's last BatchNorm,
  Fixup's scale); None when the block is not identity-initialised;
- `lesioned(*call_args, **call_kwargs) -> function`: what the block computes
  with its branches removed (Veit et al. 2016). Without it, each residual
  step becomes `post(shortcut(x))`.

A layer of one's own that writes its own `call` can implement
`residual_steps` too (every instrument then measures it);
`check_residual_steps(layer, x)` checks that the two agree. Subclassing
`BlockLayer` instead leaves nothing to check.
"""

import dataclasses
import inspect
from typing import Any, Callable, Optional, Protocol, Sequence, runtime_checkable

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
        extra: None, or the name of an extra output of the step (such as
            "attention_scores"): `branch` then returns `(f(x), extra)`, and
            a `BlockLayer`'s call returns `(y, extra)`.

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
    extra: Optional[str] = None

    @property
    def residual(self) -> bool:
        """True when the step adds its shortcut (False: a plain twin's step)."""
        return self.shortcut is not None

    def outputs(self, x):
        """(y, the extra output or None): what the step computes from `x`."""
        update = _apply(self.branch, x, self.training)
        extra = None
        if self.extra is not None:
            update, extra = update
        y = update if self.shortcut is None else _apply(self.shortcut, x, self.training) + update
        return self._after(y), extra

    def __call__(self, x):
        return self.outputs(x)[0]

    def _after(self, y):
        """post(y); a layer's output keeps the stream's dtype (under a mixed policy too)."""
        if self.post is None:
            return y
        if isinstance(self.post, layers.Layer):
            return ops.cast(self.post(y, training=self.training), y.dtype)
        return self.post(y)

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
    """The generic base of a block: write `residual_steps`, and `call` runs them.

    A subclass builds its layers (in `build` or `__init__`) and states its
    residual once, in `residual_steps(*call_args, training=False,
    **call_kwargs)`; its `call` runs those steps one after another, so the
    block and what the instruments read can never differ. The call takes
    the arguments `residual_steps` takes, after the input, and passes them
    on (`training` defaults to None there, Keras' learning phase; a
    `mask` argument receives Keras' mask). A step with an `extra` output
    (attention scores) makes the call return `(y, extra, ...)`.

    A subclass that writes its own `call` keeps it (then
    `check_residual_steps` checks that its steps agree with it).

    Args:
        **kwargs: the base `keras.layers.Layer` arguments (`name`, `dtype`,
            `trainable`); a subclass adds its own in `__init__`.

    Call arguments:
        inputs: the block's input, the stream `x`.
        training: passed to `residual_steps`, and by each step to the Keras
            layers in it (None: Keras' learning phase).
        the other arguments of the subclass's `residual_steps` (masks, for
            instance), by the same names.

    Example:
        >>> class Damped(BlockLayer):  # y = x + 0.1 f(x)
        ...     def build(self, input_shape):
        ...         self.f = keras.layers.Dense(input_shape[-1])
        ...     def residual_steps(self, training=False, **call_kwargs):
        ...         return [ResidualStep("", branch=lambda x: 0.1 * self.f(x))]
        >>> Damped()(keras.ops.ones((2, 4))).shape
        (2, 4)
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "call" not in vars(cls) and "residual_steps" in vars(cls):
            cls.call = _call_from_steps(cls.residual_steps)

    def call(self, inputs: ArrayLike, *call_args: Any, training: Optional[bool] = None,
             mask: Optional[ArrayLike] = None, **call_kwargs: Any) -> Any:
        if mask is not None:
            call_kwargs["mask"] = mask
        return _run_block(self, inputs, *call_args, training=training, **call_kwargs)


def _run_block(block, inputs, *call_args, **call_kwargs):
    """The block's steps for these call arguments, one after another: `y`, or `(y, extra, ...)`."""
    x, extras = inputs, []
    for step in residual_steps(block, *call_args, **call_kwargs):
        x, extra = step.outputs(x)
        if step.extra is not None:
            extras.append(extra)
    return (x, *extras) if extras else x


def _call_from_steps(steps_method):
    """A `call(self, inputs, <residual_steps' arguments>)` that runs the steps.

    Keras reads a layer's call signature to pass `training` and `mask` and
    to tell tensor arguments from options, so the call states each argument
    `residual_steps` takes, by name (`training` with the default None).
    """
    parameters = list(inspect.signature(steps_method).parameters.values())
    inputs = inspect.Parameter("inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ArrayLike)
    rest = [parameter.replace(default=None) if parameter.name == "training" else parameter
            for parameter in parameters[1:]]

    def call(self, inputs, *call_args, **call_kwargs):
        return _run_block(self, inputs, *call_args, **call_kwargs)

    call.__signature__ = inspect.Signature([parameters[0], inputs, *rest], return_annotation=Any)
    call.__annotations__ = {**getattr(steps_method, "__annotations__", {}), "inputs": ArrayLike, "return": Any}
    call.__doc__ = ("Runs the block's residual steps on `inputs` (see `residual_steps` for the other "
                    "arguments): `y`, or `(y, extra, ...)` when a step has an extra output.")
    call.__qualname__ = f"{steps_method.__qualname__.rsplit('.', 1)[0]}.call"
    return call


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


def check_residual_steps(block: layers.Layer, x: ArrayLike, *call_args: Any, tolerance: float = 1e-4,
                         **call_kwargs: Any) -> float:
    """Checks that `block`'s residual steps compute what `block` computes on `x` (inference mode).

    For a layer that writes its own `call` beside `residual_steps` (a
    `BlockLayer` derives its call from its steps). Returns the largest
    absolute difference; raises `ValueError` when it is above `tolerance`
    times the output's largest entry (at least 1).

    Example:
        >>> class Own(keras.layers.Layer):  # y = x + f(x), call written by hand
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
    expected = np.asarray(ops.convert_to_numpy(block(x, *call_args, training=False, **call_kwargs)))
    got = np.asarray(ops.convert_to_numpy(run_steps(residual_steps(block, *call_args, **call_kwargs), x)))
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
            "post(shortcut(x) + branch(x)) for each step in order (or subclass "
            "residual_keras.BlockLayer, whose call runs the steps)."
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
