"""The vision track's model variants, declared once.

Each variant is a set of `cifar_resnet` arguments, a line of help, and the
plain twin it is compared with (None for a plain variant itself). The
presets, the builder and the findings all read this one table.
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    builder: dict  # keyword arguments of residual_keras.cifar_resnet
    plain_twin: Optional[str]  # the plain variant it is compared with; None: a plain variant
    help: str

    @property
    def plain(self) -> bool:
        """True for a network without shortcuts."""
        return self.builder.get("residual", True) is False


_TABLE = (
    Variant("plain", {"residual": False}, None, "no shortcuts"),
    Variant("residual", {}, "plain", "identity/option-A shortcuts, ReLU(x + f(x))"),
    Variant("zero-gamma", {"zero_gamma": True}, "plain", "residual with each block's last BN gamma at 0"),
    Variant("fixup", {"norm": "fixup"}, "plain", "residual without BN, Fixup init"),
    Variant("projection", {"shortcut": "B"}, "plain", "residual with option-B (1x1 conv) shortcuts"),
    Variant("preact", {"block": "preact"}, "plain-preact", "pre-activation blocks x + f(x) (He et al. 2016)"),
    Variant("preact-zero", {"block": "preact", "zero_init_last": True}, "plain-preact",
            "preact with each branch's last conv at 0"),
    Variant("plain-preact", {"block": "preact", "residual": False}, None, "preact's plain twin"),
    Variant("plain-nonorm", {"norm": "none", "residual": False}, None,
            "plain without any normalisation (He init)"),
    Variant("residual-nonorm", {"norm": "none"}, "plain-nonorm", "residual without any normalisation (He init)"),
    Variant("preact-zero-nonorm", {"block": "preact", "norm": "none", "zero_init_last": True}, "plain-nonorm",
            "preact-zero without normalisation"),
)
VARIANTS = {variant.name: variant for variant in _TABLE}
VARIANT_HELP = "; ".join(f"{variant.name}: {variant.help}" for variant in _TABLE)
PLAIN_VARIANTS = tuple(variant.name for variant in _TABLE if variant.plain)

__all__ = ["PLAIN_VARIANTS", "VARIANTS", "VARIANT_HELP", "Variant"]
