"""`layers` on a block: its sublayers, so that `model.summary(expand_nested=True)` opens it.

Keras' summary expands a layer that has a non-empty `layers` attribute
(keras.Model has one). A block here keeps each sublayer in an attribute of
its own (`conv1`, `attention_norm`, `shortcut_layer`); `SublayersShown`
lists them in the order the block made them, so a student sees each
block's convolutions or dense layers with their parameter counts.

The list is a read-only view (a `Sequence`, not a `list`): Keras' saving
walks every list-valued attribute of a layer, and would otherwise store
the sublayers under `layers/` instead of their own names, changing the
layout of every `.keras` file and checkpoint.
"""

from collections.abc import Sequence


class SublayerView(Sequence):
    """The sublayers of one layer, in the order it assigned them."""

    def __init__(self, sublayers):
        self._sublayers = tuple(sublayers)

    def __getitem__(self, index):
        return self._sublayers[index]

    def __len__(self):
        return len(self._sublayers)

    def __repr__(self):
        return f"SublayerView({[layer.name for layer in self._sublayers]})"


class SublayersShown:
    """Mixin for a `keras.layers.Layer`: `layers` lists the layers it tracks, in the order it made them."""

    @property
    def layers(self) -> SublayerView:
        # Keras has no public list of a layer's own sublayers; `_flatten_layers` is what its
        # Model and saving use, and reads the same on every backend (on PyTorch a sublayer
        # lives in the module's `_modules`, not in the object's attributes).
        return SublayerView(self._flatten_layers(include_self=False, recursive=False))
