"""Named block families for `cifar_resnet`: one name for each network, in the spirit of timm's `block_fn`.

Each factory returns a `BlockFamily`: the block `cifar_resnet` stacks, and
what the network around it needs (the stem's normalisation, a final
BN-ReLU for pre-activation blocks, Fixup's scalar biases and zero
classifier). A combination that makes no sense has no name, so there is
nothing to check:

    cifar_resnet(56)                                   # blocks.basic(): He et al. 2015, option A
    cifar_resnet(56, block=blocks.plain())             # its plain twin, the same layers
    cifar_resnet(56, block=blocks.basic(shortcut="B")) # 1x1 projections where the shape changes
    cifar_resnet(56, block=blocks.zero_gamma_basic())  # each block's last BN gamma at 0
    cifar_resnet(56, block=blocks.preact())            # He et al. 2016, x + f(x)
    cifar_resnet(56, block=blocks.zero_last_conv_preact(norm="none"))  # identity at init, no BatchNorm
    cifar_resnet(56, block=blocks.fixup())             # Zhang et al. 2019, no normalisation
    cifar_resnet(56, block=blocks.own(MyBlock))        # a block of one's own

`norm` is "batchnorm" (the paper) or "none" (no normalisation anywhere in
the network, He initialisation).
"""

import dataclasses
from typing import Any, Callable

import keras

from residual_keras.checks import check_choice
from residual_keras.fixup import FixupBasicBlock
from residual_keras.preact_blocks import PreActBasicBlock
from residual_keras.resnet_blocks import NORMS, BasicBlock
from residual_keras.shortcuts import SHORTCUTS
from residual_keras._spellings import RENAMED_FAMILIES

BlockMaker = Callable[..., keras.layers.Layer]


@dataclasses.dataclass(frozen=True)
class BlockFamily:
    """A block for `cifar_resnet`, and what the network around it needs.

    Attributes:
        name: the factory's name and arguments, e.g. "basic(shortcut='B')".
        make: `make(filters, strides, *, name, num_blocks, kernel_regularizer,
            data_format)` returns one block (a Keras layer).
        kind: the model's default name: "resnet", "plain", "fixup", or a
            block of one's own's name.
        norm: the network's normalisation: "batchnorm", "none" or "fixup"
            (no normalisation; scalar biases after the stem and before the
            classifier, and a zero classifier, as Fixup's network).
        preact: pre-activation blocks: no BN-ReLU after the stem (each block
            starts with its own) and a final BN-ReLU before pooling.
    """

    name: str
    make: BlockMaker
    kind: str = "resnet"
    norm: str = "batchnorm"
    preact: bool = False

    def __repr__(self) -> str:
        return f"blocks.{self.name}"


def _checked(shortcut: str = "A", norm: str = "batchnorm") -> None:
    """The conv blocks' own choices, checked when the family is named rather than at the first block."""
    check_choice("shortcut", shortcut, SHORTCUTS)
    check_choice("norm", norm, NORMS)


def _conv(block_class, **options):
    """A maker for one of the library's conv blocks with these options."""

    def make(filters, strides, *, name, num_blocks, kernel_regularizer, data_format):
        return block_class(filters, strides, kernel_regularizer=kernel_regularizer, data_format=data_format,
                           name=name, **options)

    return make


def basic(shortcut: str = "A", norm: str = "batchnorm") -> BlockFamily:
    """He et al. 2015's block, `ReLU(shortcut(x) + f(x))` (`BasicBlock`).

    Args:
        shortcut: "A" (zero-pad, parameter-free) or "B" (1x1 projection),
            where a block changes shape. Default "A".
        norm: "batchnorm" or "none". Default "batchnorm".
    """
    _checked(shortcut, norm)
    return BlockFamily(f"basic(shortcut={shortcut!r}, norm={norm!r})",
                       _conv(BasicBlock, shortcut=shortcut, norm=norm), "resnet", norm)


def plain(norm: str = "batchnorm") -> BlockFamily:
    """The basic block's plain twin, `ReLU(f(x))`: the same layers, no shortcut.

    Args:
        norm: "batchnorm" or "none". Default "batchnorm".
    """
    _checked(norm=norm)
    return BlockFamily(f"plain(norm={norm!r})", _conv(BasicBlock, residual=False, norm=norm), "plain", norm)


def zero_gamma_basic(shortcut: str = "A") -> BlockFamily:
    """The basic block with its last BatchNorm's gamma at 0: each block starts as `ReLU(shortcut(x))`.

    Args:
        shortcut: "A" or "B", as in `basic`. Default "A".
    """
    _checked(shortcut)
    return BlockFamily(f"zero_gamma_basic(shortcut={shortcut!r})",
                       _conv(BasicBlock, shortcut=shortcut, zero_gamma=True), "resnet")


def preact(shortcut: str = "A", norm: str = "batchnorm") -> BlockFamily:
    """He et al. 2016's pre-activation block, `x + f(x)` (`PreActBasicBlock`), and a final BN-ReLU.

    Args:
        shortcut: "A" or "B", as in `basic`. Default "A".
        norm: "batchnorm" or "none". Default "batchnorm".
    """
    _checked(shortcut, norm)
    return BlockFamily(f"preact(shortcut={shortcut!r}, norm={norm!r})",
                       _conv(PreActBasicBlock, shortcut=shortcut, norm=norm), "resnet", norm, preact=True)


def plain_preact(norm: str = "batchnorm") -> BlockFamily:
    """The pre-activation block's plain twin, `f(x)`.

    Args:
        norm: "batchnorm" or "none". Default "batchnorm".
    """
    _checked(norm=norm)
    return BlockFamily(f"plain_preact(norm={norm!r})", _conv(PreActBasicBlock, residual=False, norm=norm),
                       "plain", norm, preact=True)


def zero_last_conv_preact(shortcut: str = "A", norm: str = "batchnorm") -> BlockFamily:
    """The pre-activation block with its last conv at 0: every block starts as exactly `x`.

    Args:
        shortcut: "A" or "B", as in `basic`. Default "A".
        norm: "batchnorm" or "none". Default "batchnorm".
    """
    _checked(shortcut, norm)
    return BlockFamily(f"zero_last_conv_preact(shortcut={shortcut!r}, norm={norm!r})",
                       _conv(PreActBasicBlock, shortcut=shortcut, norm=norm, zero_last_conv=True), "resnet",
                       norm, preact=True)


def fixup() -> BlockFamily:
    """Fixup (Zhang et al. 2019): no normalisation, each branch starts at exactly 0 (`FixupBasicBlock`).

    The network gets Fixup's scalar biases after the stem and before the
    classifier, and a zero classifier; the option-A shortcut is Fixup's own.
    """

    def make(filters, strides, *, name, num_blocks, kernel_regularizer, data_format):
        return FixupBasicBlock(filters, strides, num_blocks=num_blocks, kernel_regularizer=kernel_regularizer,
                               data_format=data_format, name=name)

    return BlockFamily("fixup()", make, "fixup", "fixup")


def own(block: BlockMaker, norm: str = "batchnorm") -> BlockFamily:
    """A block of one's own: a class or factory called as `block(filters, strides, name=...)`.

    It gets the basic network around it (stem conv, then BN-ReLU, or ReLU
    with `norm="none"`; pooling; a dense classifier) and sets its own
    residual connection, shortcut and initialisation (`functools.partial`
    sets its other arguments). It is called with `data_format=` when that
    is "channels_first". Every instrument measures it when it implements
    the residual protocol (`residual_keras.steps`).

    Args:
        block: the class or factory.
        norm: the stem's normalisation, "batchnorm" or "none". Default
            "batchnorm".
    """
    if not callable(block) or isinstance(block, (str, BlockFamily)):
        raise TypeError(f"blocks.own() takes a class or factory of a block, got {block!r}.")
    _checked(norm=norm)
    name = getattr(block, "__name__", None) or getattr(getattr(block, "func", None), "__name__", "custom")

    def make(filters, strides, *, name, num_blocks, kernel_regularizer, data_format):
        layout = {"data_format": data_format} if data_format == "channels_first" else {}
        layer = block(filters, strides, name=name, **layout)
        if not isinstance(layer, keras.layers.Layer):
            raise TypeError(f"block(filters, strides, name=...) must return a Keras layer, got {layer!r}.")
        return layer

    return BlockFamily(f"own({name}, norm={norm!r})", make, name.lower(), norm)


def family(block: Any) -> BlockFamily:
    """`block` as a `BlockFamily`: itself, or a class or factory of one's own as `own(block)`."""
    if isinstance(block, BlockFamily):
        return block
    if isinstance(block, str):
        factory = {"basic": "basic()", "preact": "preact()"}.get(block, "basic(), preact(), fixup(), ...")
        raise TypeError(f"block={block!r}: write block=rk.blocks.{factory} (a named block family, 0.2.0).")
    if callable(block):
        return own(block)
    raise TypeError(f"block must be a rk.blocks family or a class or factory of a block, got {block!r}.")


def __getattr__(name: str) -> Any:
    """A block family renamed since 0.2.0 is answered with its new name, in one line."""
    if name in RENAMED_FAMILIES:
        raise AttributeError(f"residual_keras.blocks.{name} is the name in residual_keras 0.2 (CHANGELOG.md, "
                             f"0.3.0); it is now residual_keras.blocks.{RENAMED_FAMILIES[name]}.")
    raise AttributeError(f"module 'residual_keras.blocks' has no attribute {name!r}")


__all__ = ["BlockFamily", "basic", "fixup", "own", "plain", "plain_preact", "preact", "zero_gamma_basic",
           "zero_last_conv_preact"]

