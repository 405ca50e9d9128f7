"""The scalar chain, `f(x) = alpha * x`: the worked example, exactly."""

import math
from fractions import Fraction
from numbers import Rational, Real

import numpy as np

from residual_keras.checks import check_positive_int
from residual_keras._types import Results


def _exact(number):
    """A Fraction for `number`; floats are read as the decimal they print as."""
    if isinstance(number, str):
        return Fraction(number)
    if isinstance(number, Rational) and not isinstance(number, bool):
        return Fraction(int(number.numerator), int(number.denominator))
    if isinstance(number, Real) and not isinstance(number, bool):
        value = float(number)
        if not math.isfinite(value):
            raise ValueError(f"alpha must be finite, got {number!r}.")
        return Fraction(repr(value))
    raise TypeError(f"alpha must be a real number or a decimal string, got {number!r}.")


def scalar_chain(alpha: float, depth: int) -> Results:
    """Gains of L scalar blocks `f(x) = alpha * x`: plain and residual, exactly.

    A plain stack `x_l = alpha * x_{l-1}` has gain `d x_L / d x_0 = alpha^L`; a
    residual stack `x_l = x_{l-1} + alpha * x_{l-1}` has `(1 + alpha)^L`. The
    powers are computed exactly with `fractions.Fraction` and rounded once, so
    `scalar_chain(-0.1, 50)["plain_gain"] == 1e-50` holds exactly. A float
    alpha is read as the decimal it prints as (-0.1 means -1/10).

    Args:
        alpha: real number (int, float, Fraction or a decimal string).
        depth: int >= 1. L, the number of blocks.

    Returns:
        dict with `alpha` (float), `depth` (int), `plain_gain` and
        `residual_gain` (floats, signed), and for plotting `depths`
        (0..L) with `plain` and `residual` (float64 arrays of the gains
        after each depth; entries below ~1e-308 underflow to 0).

    Example:
        >>> chain = scalar_chain(-0.1, 50)
        >>> chain["plain_gain"], round(chain["residual_gain"], 10)
        (1e-50, 0.0051537752)
    """
    depth = check_positive_int("depth", depth)
    exact_alpha = _exact(alpha)
    plain = [exact_alpha**power for power in range(depth + 1)]
    residual = [(1 + exact_alpha) ** power for power in range(depth + 1)]
    return {
        "alpha": float(exact_alpha),
        "depth": depth,
        "plain_gain": float(plain[-1]),
        "residual_gain": float(residual[-1]),
        "depths": np.arange(depth + 1),
        "plain": np.array([float(value) for value in plain]),
        "residual": np.array([float(value) for value in residual]),
    }
