"""TransformerBlock's arguments: their checks and positional traps, in one place.

`transformer_lm` (models.py) and `TransformerBlock` (transformer.py) take the
same `residual`, `rezero` and `norm_position`; both check them here, so a bad
value is refused with the same message from either.
"""

from residual_keras.checks import check_choice

NORM_POSITIONS = ("pre", "post")


def check_residual(residual):
    """Raises `ValueError` unless `residual` is True or False (ReZero is `rezero=True`)."""
    # `1 in (True, False)` is True in Python: compare by identity for the bools.
    if residual is True or residual is False:
        return residual
    hint = ""
    if isinstance(residual, str) and residual.lower() == "rezero":
        hint = " For ReZero pass rezero=True (with residual=True, the default)."
    raise ValueError(f"Unknown residual={residual!r}. Accepted: True, False.{hint}")


def resolve_residual(residual, rezero):
    """(residual, rezero) as two bools; `ValueError` for any other `residual`, or ReZero without a residual."""
    check_residual(residual)
    if rezero and residual is False:
        raise ValueError("rezero=True needs residual=True: ReZero is x + alpha * F(x).")
    return residual, bool(rezero)


def check_norm_position(norm_position):
    """`norm_position` if it is "pre" or "post"; `ValueError` naming both otherwise."""
    return check_choice("norm_position", norm_position, NORM_POSITIONS)


def refuse_positional(args):
    """Raises `TypeError` for positional arguments: the libraries TransformerBlock is ported from disagree on their order."""
    if args:
        raise TypeError(
            "TransformerBlock takes keyword arguments only: TransformerBlock(num_heads=..., "
            "intermediate_dim=...). keras-io's TransformerBlock(embed_dim, num_heads, ff_dim) is "
            "TransformerBlock(num_heads=num_heads, intermediate_dim=ff_dim) here (the width comes "
            "from the input), and keras-hub's TransformerDecoder(intermediate_dim, num_heads) is "
            f"TransformerBlock(num_heads=num_heads, intermediate_dim=intermediate_dim); got "
            f"{len(args)} positional argument(s) {args!r}."
        )


__all__ = ["NORM_POSITIONS", "check_norm_position", "check_residual", "refuse_positional", "resolve_residual"]
