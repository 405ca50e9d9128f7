"""The vision track's model variants, declared once.

Each variant is a block family of `residual_keras.blocks` (the network
`cifar_resnet` builds), a line of help, and the plain twin it is compared
with (None for a plain variant itself). The presets, the builder and the
findings all read this one table.
"""

import dataclasses
from typing import Optional

from residual_keras import blocks


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    block: blocks.BlockFamily  # cifar_resnet(depth, block=...)
    plain_twin: Optional[str]  # the plain variant it is compared with; None: a plain variant
    help: str

    @property
    def plain(self) -> bool:
        """True for a network without shortcuts."""
        return self.block.kind == "plain"

    @property
    def fixup(self) -> bool:
        """True for Fixup's network (its optimizer's parameter groups apply)."""
        return self.block.norm == "fixup"


_TABLE = (
    Variant("plain", blocks.plain(), None, "no shortcuts"),
    Variant("residual", blocks.basic(), "plain", "identity/option-A shortcuts, ReLU(x + f(x))"),
    Variant("zero-gamma", blocks.zero_gamma_basic(), "plain", "residual with each block's last BN gamma at 0"),
    Variant("fixup", blocks.fixup(), "plain", "residual without BN, Fixup init"),
    Variant("projection", blocks.basic(shortcut="B"), "plain", "residual with option-B (1x1 conv) shortcuts"),
    Variant("preact", blocks.preact(), "plain-preact", "pre-activation blocks x + f(x) (He et al. 2016)"),
    Variant("preact-zero", blocks.zero_init_preact(), "plain-preact", "preact with each branch's last conv at 0"),
    Variant("plain-preact", blocks.plain_preact(), None, "preact's plain twin"),
    Variant("plain-nonorm", blocks.plain(norm="none"), None, "plain without any normalisation (He init)"),
    Variant("residual-nonorm", blocks.basic(norm="none"), "plain-nonorm",
            "residual without any normalisation (He init)"),
    Variant("preact-zero-nonorm", blocks.zero_init_preact(norm="none"), "plain-nonorm",
            "preact-zero without normalisation"),
)
VARIANTS = {variant.name: variant for variant in _TABLE}
VARIANT_HELP = "; ".join(f"{variant.name}: {variant.help}" for variant in _TABLE)
PLAIN_VARIANTS = tuple(variant.name for variant in _TABLE if variant.plain)

__all__ = ["PLAIN_VARIANTS", "VARIANTS", "VARIANT_HELP", "Variant"]
