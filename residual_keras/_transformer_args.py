"""TransformerBlock's arguments: keras-hub's aliases and the deprecated spellings, resolved in one place.

`transformer_lm` (models.py) and `TransformerBlock` (transformer.py) take the
same `residual`, `rezero` and `norm_position`; both resolve them here, so a
deprecated spelling warns the same way from either.
"""

import warnings

from residual_keras._checks import check_choice

NORM_POSITIONS = ("pre", "post")


def check_residual(residual):
    """Raises `ValueError` unless `residual` is True, False or (deprecated) "rezero"."""
    # `1 in (True, False)` is True in Python: compare by identity for the bools.
    if residual is True or residual is False or residual == "rezero":
        return residual
    raise ValueError(f"Unknown residual={residual!r}. Accepted: True, False.")


def resolve_residual(residual, rezero, stacklevel=3):
    """(residual, rezero) as two bools; `residual="rezero"` (deprecated) means `rezero=True`."""
    check_residual(residual)
    if residual == "rezero":
        warnings.warn('residual="rezero" is deprecated: use rezero=True.', DeprecationWarning,
                      stacklevel=stacklevel)
        residual, rezero = True, True
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


def heads_from_positional(args, num_heads, intermediate_dim, stacklevel=3):
    """(num_heads, intermediate_dim), from keywords or the deprecated positional `(num_heads, intermediate_dim)`."""
    if not args:
        return num_heads, intermediate_dim
    if len(args) > 2 or num_heads is not None:
        raise TypeError(
            "TransformerBlock takes keyword arguments: TransformerBlock(num_heads=..., "
            "intermediate_dim=...). keras-io's TransformerBlock(embed_dim, num_heads, ff_dim) "
            "is TransformerBlock(num_heads=num_heads, intermediate_dim=ff_dim) here (the width "
            f"comes from the input); got {len(args)} positional arguments."
        )
    warnings.warn(
        "Positional arguments to TransformerBlock are deprecated (keras-hub puts "
        "intermediate_dim first, this package put num_heads first): pass num_heads= and "
        "intermediate_dim= by name.", DeprecationWarning, stacklevel=stacklevel,
    )
    return args[0], args[1] if len(args) == 2 else intermediate_dim


__all__ = ["NORM_POSITIONS", "check_residual", "heads_from_positional", "resolve_norm_position", "resolve_residual"]
