"""TransformerBlock's arguments: keras-hub's aliases and positional traps, in one place.

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


def resolve_norm_position(norm_position, normalize_first=None):
    """`norm_position` from our name or keras-hub's `normalize_first` (True = "pre")."""
    if normalize_first is not None:
        from_flag = "pre" if normalize_first else "post"
        if norm_position is not None and norm_position != from_flag:
            raise ValueError(
                f"norm_position={norm_position!r} and normalize_first={normalize_first!r} "
                "disagree; pass one of them."
            )
        return from_flag
    return check_choice("norm_position", "pre" if norm_position is None else norm_position, NORM_POSITIONS)


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


__all__ = ["NORM_POSITIONS", "check_residual", "refuse_positional", "resolve_norm_position", "resolve_residual"]
