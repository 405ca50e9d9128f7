"""`Residual`: `y = post(shortcut(x) + f(x))` for any branch f, and its plain twin.

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
`rezero=True` scales the branch by a trainable scalar that starts at 0
(ReZero, Bachlechner et al. 2020), so the block starts as `post(shortcut(x))`.

`call` writes the addition; `residual_steps()` (the residual protocol,
residual_keras/steps.py) gives the instruments the same branch, shortcut and
`post`.
"""

import functools
from typing import Any, Optional

import keras
from keras import layers, ops

from residual_keras.checks import check_bool
from residual_keras.steps import BlockLayer, ResidualStep, apply_post
from residual_keras._wrapped_layers import _accepts, _build, _deserialize, _layer_or_activation, _output_shape, _serialize
from residual_keras._types import Activation, ArrayLike
from residual_keras._spellings import RESIDUAL, refuse_other_spellings, renamed_since_0_2


@keras.saving.register_keras_serializable(package="residual_keras")
class Residual(BlockLayer):
    """Any Keras layer or model `f` as a residual block: `y = post(shortcut(x) + f(x))`.

    - `Residual(f)`: `y = x + f(x)`.
    - `Residual(f, post="relu")`: `y = ReLU(x + f(x))`, He et al. 2015's block.
    - `Residual(f, shortcut=keras.layers.Conv2D(64, 1, strides=2))`: a
      projection where f changes the shape (option B).
    - `Residual(f, post=keras.layers.LayerNormalization())`: Post-LN.
    - `residual=False`: the plain twin `y = post(f(x))`, with the same
      weights (a shortcut layer, if given, is built but unused).
    - `rezero=True`: `y = post(shortcut(x) + alpha * f(x))` with one
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
        rezero: bool. ReZero: scale the branch by a trainable scalar that
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
        >>> block = Residual(branch, rezero=True)
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
        rezero: bool = False,
        **kwargs,
    ) -> None:
        refuse_other_spellings(self.__class__.__name__, kwargs, RESIDUAL)
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
        self.rezero = check_bool("rezero", rezero)
        if self.rezero and not self.residual:
            raise ValueError(
                "rezero=True needs residual=True: a plain twin with alpha = 0 would output "
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
        self.rezero_alpha = None
        if self.rezero:
            self.rezero_alpha = self.add_weight(name="rezero_alpha", shape=(), initializer="zeros", trainable=True)

    def _branch(self, x, training=None, mask=None):
        """f(x), or alpha * f(x) with rezero."""
        extra = {"mask": mask} if mask is not None and _accepts(self.branch, "mask") else {}
        # A branch made under another dtype policy (float32, before a mixed one) computes in its own
        # dtype; its update is added in the block's.
        update = ops.cast(self.branch(x, training=training, **extra), self.compute_dtype)
        if self.rezero_alpha is not None:
            update = ops.cast(self.rezero_alpha, update.dtype) * update
        return update

    def _shortcut(self, x, training=None, mask=None):
        if self.shortcut is None:
            return x
        extra = {"mask": mask} if mask is not None and _accepts(self.shortcut, "mask") else {}
        return ops.cast(self.shortcut(x, training=training, **extra), self.compute_dtype)

    def call(self, inputs: ArrayLike, training: Optional[bool] = None, mask: Optional[ArrayLike] = None) -> Any:
        update = self._branch(inputs, training, mask)  # f(x) (alpha * f(x) with rezero)
        if self.residual:
            y = self._shortcut(inputs, training, mask) + update  # shortcut(x) + f(x)
        else:
            y = update  # the plain twin: f(x)
        return apply_post(self.post, y, training)  # post(...): ReLU, LayerNorm, or nothing

    def residual_steps(self, training: Optional[bool] = False, mask: Optional[ArrayLike] = None) -> list[ResidualStep]:
        """For the instruments, the addition `call` writes: one step, `post(shortcut(x) + f(x))`."""
        return [ResidualStep(
            "",
            branch=functools.partial(self._branch, training=training, mask=mask),
            shortcut=functools.partial(self._shortcut, training=training, mask=mask) if self.residual else None,
            post=self.post,  # a layer is called with `training`, its output cast to the stream's dtype
            training=training,
        )]

    def identity_scale(self):
        """ReZero's alpha with `rezero=True` (0 at initialisation), else None."""
        return None if self.rezero_alpha is None else float(ops.convert_to_numpy(self.rezero_alpha))

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
                "rezero": self.rezero,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = renamed_since_0_2(config)  # a .keras file saved by 0.2.0: identity_init
        config["post"] = _deserialize(config.get("post"))
        return cls(**config)  # branch and shortcut: deserialized by __init__


__all__ = ["Residual"]
