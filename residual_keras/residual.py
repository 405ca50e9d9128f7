"""`y = post(shortcut(x) + f(x))` for any branch f, and the residual protocol every block follows.

He et al. 2015 (arXiv 1512.03385), equation 1: a block learns a residual
function f and adds its input back,

    y = post(shortcut(x) + f(x)),

where `shortcut` is the identity unless the block changes the shape, and
`post` is what follows the addition: a ReLU in the original ResNet block,
nothing in a pre-activation block (He et al. 2016), a LayerNorm in a Post-LN
Transformer. Its Jacobian is `post' (shortcut' + df/dx)`: with an identity
shortcut and nothing after the addition, `I + df/dx`.

`Residual(branch)` makes any Keras layer or model the f of such a block;
`residual=False` gives its plain twin `post(f(x))` with the same weights, and
`identity_init=True` scales the branch by a trainable scalar that starts at 0
(ReZero, Bachlechner et al. 2020), so the block starts as `post(shortcut(x))`.

The residual protocol
---------------------
The instruments (`residual_keras.diagnostics`) treat as a block every layer
with a method

    residual_steps(*call_args, **call_kwargs) -> list[ResidualStep]

that describes what the layer computes as one or more residual additions in
a row, each `post(shortcut(x) + branch(x))` in inference mode (a Transformer
block has two: attention, then feed-forward). The arguments are those the
layer's `call` received after its input, less `training` (masks, for
instance), so that the steps compute what the call computed. A plain twin
describes its steps with `shortcut=None`: `post(branch(x))`. Two methods are
optional:

- `identity_scale() -> float | None`: the number that makes an
  identity-initialised block start as the identity and lets it leave it
  (ReZero's alpha, the mean |gamma| of a zero-gamma block's last BatchNorm,
  Fixup's scale); None when the block is not identity-initialised;
- `lesioned(*call_args, **call_kwargs) -> function`: what the block computes
  with its branches removed (Veit et al. 2016). Without it, each residual
  step becomes `post(shortcut(x))`.

Every block of the package implements the protocol, and so does `Residual`;
a student's own layer that implements it gets every instrument.
`check_residual_steps(layer, x)` checks that a layer's steps compute what
the layer computes.
"""

import dataclasses
from typing import Any, Callable, Optional, Protocol, Sequence, runtime_checkable

import keras
import numpy as np
from keras import layers, ops

from residual_keras.checks import check_bool
from residual_keras._sublayers import SublayersShown
from residual_keras._wrapped_layers import _accepts, _build, _deserialize, _layer_or_activation, _output_shape, _serialize
from residual_keras._types import Activation, ArrayLike


def identity(x: Any) -> Any:
    """The identity shortcut: `x`."""
    return x


def _apply(function, x):
    """`function(x)`, in inference mode for a Keras layer."""
    if isinstance(function, layers.Layer):
        return function(x, training=False)
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
    """One residual addition of a block, in inference mode: `post(shortcut(x) + branch(x))`.

    Attributes:
        name: what the step is ("attention", "feedforward"; "" in a block
            with one step).
        branch: the residual function, `x -> f(x)`.
        shortcut: `x -> shortcut(x)`: `identity` (the default), a projection
            where the shape changes, or None for a plain twin, which computes
            `post(branch(x))` (no addition).
        post: what follows the addition (a ReLU, a LayerNorm), or None for
            nothing.

    Keras layers among them are called with `training=False`.

    Example:
        >>> step = ResidualStep("", branch=lambda x: 2 * x)
        >>> float(step(keras.ops.ones(())))  # x + f(x) = 1 + 2
        3.0
    """

    name: str
    branch: Callable[[Any], Any]
    shortcut: Optional[Callable[[Any], Any]] = identity
    post: Optional[Callable[[Any], Any]] = None

    @property
    def residual(self) -> bool:
        """True when the step adds its shortcut (False: a plain twin's step)."""
        return self.shortcut is not None

    def __call__(self, x):
        y = _apply(self.branch, x)
        if self.shortcut is not None:
            y = _apply(self.shortcut, x) + y  # shortcut(x) + f(x)
        return y if self.post is None else _apply(self.post, y)

    def without_branch(self, x):
        """The step with its branch removed: `post(shortcut(x))` (residual steps only)."""
        if self.shortcut is None:
            raise ValueError(f"Step {self.name!r} is plain: without its branch nothing is left.")
        y = _apply(self.shortcut, x)
        return y if self.post is None else _apply(self.post, y)

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
            "protocol: give it a method residual_steps() (see residual_keras.residual), or wrap "
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

    Returns the largest absolute difference; raises `ValueError` when it is
    above `tolerance` times the output's largest entry (at least 1).

    Example:
        >>> block = Residual(keras.layers.Dense(4))
        >>> check_residual_steps(block, keras.random.normal((2, 4))) < 1e-6
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
            "post(shortcut(x) + branch(x)) for each step in order."
        )
    return difference


@keras.saving.register_keras_serializable(package="residual_keras")
class Residual(SublayersShown, layers.Layer):
    """Any Keras layer or model `f` as a residual block: `y = post(shortcut(x) + f(x))`.

    - `Residual(f)`: `y = x + f(x)`.
    - `Residual(f, post="relu")`: `y = ReLU(x + f(x))`, He et al. 2015's block.
    - `Residual(f, shortcut=keras.layers.Conv2D(64, 1, strides=2))`: a
      projection where f changes the shape (option B).
    - `Residual(f, post=keras.layers.LayerNormalization())`: Post-LN.
    - `residual=False`: the plain twin `y = post(f(x))`, with the same
      weights (a shortcut layer, if given, is built but unused).
    - `identity_init=True`: `y = post(shortcut(x) + alpha * f(x))` with one
      trainable scalar alpha starting at 0 (ReZero, Bachlechner et al.
      2020): the block starts as `post(shortcut(x))`, the identity when
      there is no `post`, whatever f is.

    The block implements the residual protocol (module docstring), so every
    instrument measures it; a Keras mask on the input is passed to f and to
    the shortcut where they take one, and passed on.

    Args:
        branch: a Keras layer or model, the residual function f (or its
            serialized config, `keras.saving.serialize_keras_object(layer)`,
            for a fresh copy). Its output must have the shortcut's shape.
            Under a mixed policy (`dtype="mixed_bfloat16"`) the block adds
            in the compute dtype whatever policy the branch was made with: a
            branch made under float32 computes in float32 and its update is
            cast (build the branch under the policy,
            `keras.config.set_dtype_policy("mixed_bfloat16")` first, for it
            to compute in bfloat16 too).
        shortcut: None (the identity) or a Keras layer applied to x (or its
            serialized config).
        post: None, a Keras layer or an activation (name or callable)
            applied after the addition.
        residual: bool. Add the shortcut (True) or the plain twin (False).
            Default True.
        identity_init: bool. Scale the branch by a trainable scalar that
            starts at 0. Needs `residual=True`. Default False.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: a tensor of the shape the branch takes (and the shortcut).
        training: bool or None. Passed to the branch, the shortcut and
            `post` (dropout, BatchNorm). Default None: Keras' learning phase.
        mask: a Keras mask of the inputs, or None: passed to the branch and
            the shortcut where they take one, and on to the next layer.

    Example:
        >>> branch = keras.Sequential([keras.layers.Dense(16, activation="relu"), keras.layers.Dense(8)])
        >>> block = Residual(branch, identity_init=True)
        >>> x = keras.random.normal((2, 8))
        >>> bool(keras.ops.all(block(x) == x))  # alpha = 0: the identity at initialisation
        True
    """

    def __init__(
        self,
        branch: layers.Layer,
        shortcut: Optional[layers.Layer] = None,
        post: Optional[Activation] = None,
        *,
        residual: bool = True,
        identity_init: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(branch, dict):  # a serialized layer (from_config, or a fresh copy per block)
            branch = keras.saving.deserialize_keras_object(branch)
        if isinstance(shortcut, dict):
            shortcut = keras.saving.deserialize_keras_object(shortcut)
        if not isinstance(branch, layers.Layer):
            raise TypeError(
                f"branch must be a Keras layer or model (keras.Sequential([...]) for several "
                f"layers), got {branch!r}."
            )
        if shortcut is not None and not isinstance(shortcut, layers.Layer):
            raise TypeError(f"shortcut must be None (the identity) or a Keras layer, got {shortcut!r}.")
        self.branch = branch
        self.shortcut = shortcut
        self.post = _layer_or_activation("post", post)
        self.residual = check_bool("residual", residual)
        self.identity_init = check_bool("identity_init", identity_init)
        if self.identity_init and not self.residual:
            raise ValueError(
                "identity_init=True needs residual=True: a plain twin with alpha = 0 would output "
                "post(0) for every input."
            )
        self.supports_masking = True

    def build(self, input_shape):
        output_shape = _build(self.branch, input_shape)
        shortcut_shape = tuple(input_shape) if self.shortcut is None else _build(self.shortcut, input_shape)
        if self.residual:
            if tuple(shortcut_shape)[1:] != tuple(output_shape)[1:]:
                raise ValueError(
                    f"Residual {self.name!r}: the branch maps {tuple(input_shape)} to "
                    f"{tuple(output_shape)}, the shortcut to {tuple(shortcut_shape)}; they must "
                    "match to be added (give a shortcut layer that projects x, such as a 1x1 "
                    "convolution, or use residual=False)."
                )
        if isinstance(self.post, layers.Layer) and not self.post.built:
            self.post.build(output_shape)
        self.alpha = None
        if self.identity_init:
            self.alpha = self.add_weight(name="alpha", shape=(), initializer="zeros", trainable=True)

    def _branch(self, x, training=None, mask=None):
        """f(x), or alpha * f(x) with identity_init."""
        extra = {"mask": mask} if mask is not None and _accepts(self.branch, "mask") else {}
        # A branch made under another dtype policy (float32, before a mixed one) computes in its own
        # dtype; its update is added in the block's.
        update = ops.cast(self.branch(x, training=training, **extra), self.compute_dtype)
        if self.alpha is not None:
            update = ops.cast(self.alpha, update.dtype) * update
        return update

    def _shortcut(self, x, training=None, mask=None):
        if self.shortcut is None:
            return x
        extra = {"mask": mask} if mask is not None and _accepts(self.shortcut, "mask") else {}
        return ops.cast(self.shortcut(x, training=training, **extra), self.compute_dtype)

    def _post(self, y, training=None):
        if self.post is None:
            return y
        if isinstance(self.post, layers.Layer):
            return ops.cast(self.post(y, training=training), self.compute_dtype)
        return self.post(y)

    def call(self, inputs, training=None, mask=None):
        update = self._branch(inputs, training, mask)  # f(x) (alpha * f(x) with identity_init)
        if self.residual:
            y = self._shortcut(inputs, training, mask) + update  # shortcut(x) + f(x)
        else:
            y = update  # the plain twin: f(x)
        return self._post(y, training)  # post(...): ReLU, LayerNorm, or nothing

    def residual_steps(self, *unused_args, mask=None, **unused_kwargs):
        """One step: `post(shortcut(x) + f(x))` (see the residual protocol)."""
        return [ResidualStep(
            "",
            branch=lambda x: self._branch(x, False, mask),
            shortcut=(lambda x: self._shortcut(x, False, mask)) if self.residual else None,
            post=self.post,  # a layer is called with training=False by the step
        )]

    def identity_scale(self):
        """alpha with `identity_init=True` (0 at initialisation), else None."""
        return None if self.alpha is None else float(ops.convert_to_numpy(self.alpha))

    def compute_output_shape(self, input_shape):
        return _output_shape(self.branch, input_shape)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "branch": keras.saving.serialize_keras_object(self.branch),
                "shortcut": _serialize(self.shortcut),
                "post": _serialize(self.post),
                "residual": self.residual,
                "identity_init": self.identity_init,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["post"] = _deserialize(config.get("post"))
        return cls(**config)  # branch and shortcut: deserialized by __init__


__all__ = [
    "Residual",
    "ResidualBlock",
    "ResidualStep",
    "check_residual_steps",
    "identity",
    "identity_scale",
    "lesioned",
    "residual_steps",
    "run_steps",
]
