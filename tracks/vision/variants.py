"""The vision track's model variants, declared once.

Each variant names a block family of `residual_keras.blocks` (the network
`cifar_resnet` builds) and its arguments, a line of help, and the plain
twin it is compared with (None for a plain variant itself). The presets,
the builder and the findings all read this one table. The families are
made when a model is built: reading the table (options, --help, a refusal)
loads neither Keras nor TensorFlow.
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    family: str  # a factory of residual_keras.blocks: "basic", "plain", "fixup", ...
    options: dict  # its arguments
    plain_twin: Optional[str]  # the plain variant it is compared with; None: a plain variant
    help: str

    @property
    def block(self):
        """The block family: `cifar_resnet(depth, block=variant.block)`."""
        from residual_keras import blocks

        return getattr(blocks, self.family)(**self.options)

    @property
    def plain(self) -> bool:
        """True for a network without shortcuts."""
        return self.family in ("plain", "plain_preact")

    @property
    def fixup(self) -> bool:
        """True for Fixup's network (its optimizer's parameter groups apply)."""
        return self.family == "fixup"


_TABLE = (
    Variant("plain", "plain", {}, None, "no shortcuts"),
    Variant("residual", "basic", {}, "plain", "identity/option-A shortcuts, ReLU(x + f(x))"),
    Variant("zero-gamma", "zero_gamma_basic", {}, "plain", "residual with each block's last BN gamma at 0"),
    Variant("fixup", "fixup", {}, "plain", "residual without BN, Fixup init"),
    Variant("projection", "basic", {"shortcut": "B"}, "plain", "residual with option-B (1x1 conv) shortcuts"),
    Variant("preact", "preact", {}, "plain-preact", "pre-activation blocks x + f(x) (He et al. 2016)"),
    Variant("preact-zero", "zero_last_conv_preact", {}, "plain-preact", "preact with each branch's last conv at 0"),
    Variant("plain-preact", "plain_preact", {}, None, "preact's plain twin"),
    Variant("plain-nonorm", "plain", {"norm": "none"}, None, "plain without any normalisation (He init)"),
    Variant("residual-nonorm", "basic", {"norm": "none"}, "plain-nonorm",
            "residual without any normalisation (He init)"),
    Variant("preact-zero-nonorm", "zero_last_conv_preact", {"norm": "none"}, "plain-nonorm",
            "preact-zero without normalisation"),
)
VARIANTS = {variant.name: variant for variant in _TABLE}
VARIANT_HELP = "; ".join(f"{variant.name}: {variant.help}" for variant in _TABLE)
PLAIN_VARIANTS = tuple(variant.name for variant in _TABLE if variant.plain)
# The plain twin each residual variant is compared with.
PLAIN_TWIN = {variant.name: variant.plain_twin for variant in _TABLE if variant.plain_twin}

__all__ = ["PLAIN_TWIN", "PLAIN_VARIANTS", "VARIANTS", "VARIANT_HELP", "Variant"]
