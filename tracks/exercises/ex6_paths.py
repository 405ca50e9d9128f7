"""Exercise 6: counting the paths through ResNet and Transformer blocks (self-test (d), (e)).

The checks draw every L from the run's seed, small ones and ones of several
hundred: 2^L, 4^L and C(L, k) are then far beyond 64-bit integers and
floating point, so only exact integer arithmetic (Python's int, math.comb)
passes. The grader's references are Python's exact integers, computed here
(the submission's process, harness/ex6.py, only calls the student's
functions, and builds the small ResNet the instrument counts on).
"""

import math

from tracks.exercises.exercise import CheckSpec, Exercise

SKELETON = '''"""Exercise 6: how many paths? (Veit, Wilber, Belongie 2016)

Expanding (I + J_L) ... (I + J_1) gives one term per subset S of the blocks
(each block either skipped, I, or taken, J_l): each subset is one member of
the ensemble, a path through |S| branches. A Transformer block has two
residual additions (attention, then feed-forward), so L blocks are 2L steps.

Write:

- `resnet_paths(L)`: the number of paths through L residual blocks;
- `transformer_paths(L)`: through L Transformer blocks;
- `paths_of_length(L, k)`: the number of paths through exactly k of L
  blocks' branches;
- `path_count_from_the_instrument(model, x, y)`: the number of paths
  residual_keras.diagnostics.path_gradients counts for `model` in all
  (sum its "num_paths"), so that you can confirm your formula on a network.

Check your work:  python -m tracks check THIS_FILE

Hints:
- each block doubles the number of paths;
- the counts must be exact for any L, also several hundred blocks: Python's
  int is exact at any size, numpy's int64 overflows at 2^63 and a float
  keeps 53 bits;
- math.comb(n, k) is "n choose k";
- the paths' lengths run from 0 (every block skipped) to L (every block taken).
"""

import math

from residual_keras import diagnostics

EXERCISE = 6


def resnet_paths(L):
    raise NotImplementedError


def transformer_paths(L):
    raise NotImplementedError


def paths_of_length(L, k):
    raise NotImplementedError


def path_count_from_the_instrument(model, x, y):
    raise NotImplementedError
'''


def draw(rng):
    small = sorted(int(L) for L in rng.choice(range(1, 31), size=3, replace=False))
    row = int(rng.integers(10, 21))
    big = int(rng.integers(200, 601))
    ks = sorted({0, 1, big // 2 + int(rng.integers(-5, 6)), int(rng.integers(2, big - 1)), big})
    resnet, transformer = [*small, int(rng.integers(1030, 1400))], [*small, int(rng.integers(520, 700))]
    for Ls in (resnet, transformer):  # an odd L and an even one in every draw: (-2)^L is 2^L at an even L only
        if len({L % 2 for L in Ls}) == 1:
            Ls[-1] += 1
    return {"resnet": resnet,  # 2^L beyond a float's range, too
            "transformer": transformer,
            "row": row, "big": big, "big_ks": ks,
            "depth": int(rng.choice([8, 14])), "data_seed": int(rng.integers(2**31))}


def _exact(value):
    """The count sent back as an exact int, or None (a float that is not integral, a string, ...)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _shown(values):
    return ", ".join(str(v) if len(str(v)) < 14 else f"{str(v)[:6]}...({len(str(v))} digits)" for v in values)


def _overflowed(got, expected):
    """A count that went wrong the way fixed-width integers and floats do: wrapped or cut to 64 bits, or
    rounded to a float's 53 bits, while the exact count is beyond them."""
    return any(g is not None and g != e and e >= 2**53 and ((g - e) % 2**64 == 0 or abs(g - e) <= 1e-6 * e
                                                           or g in (2**63 - 1, 2**63, 2**64 - 1))
               for g, e in zip(got, expected))


_NEGATIVE = ("a count is never negative: (-2)^L is -(2^L) at an odd L (the draw holds an odd L and an even one); "
             "each block doubles the number of paths, 2 ** L")


# resnet_paths(L) -----------------------------------------------------------------------------------------




def judge_resnet(inputs, value):
    Ls, expected = inputs["resnet"], [2**L for L in inputs["resnet"]]
    got = [_exact(v) for v in value]
    detail = f"L = {', '.join(map(str, Ls))}: {_shown(value)}"
    if got == expected:
        return True, detail, ""
    if any(g is not None and g < 0 for g in got):
        return False, detail, _NEGATIVE
    if got[:-1] == expected[:-1]:
        return False, detail, ("right for small L, wrong for L = %d: fixed-width integers overflow (numpy's "
                               "int64 at 2^63) and floats stop at 2^1024; Python's int (2 ** L) is exact at "
                               "any size" % Ls[-1])
    if got[:-1] in ([2 ** (L + 1) for L in Ls[:-1]], [2 ** (L - 1) for L in Ls[:-1]]):
        return False, detail, "each block doubles the number of paths: 2^L; yours is off by one block"
    if _overflowed(got, expected):
        return False, detail, "an overflow: use Python's int, exact at any size (2 ** L)"
    return False, detail, "each block doubles the number of paths (skip it, or take its branch): 2^L"


# transformer_paths(L) ------------------------------------------------------------------------------------




def judge_transformer(inputs, value):
    Ls = inputs["transformer"]
    got, expected = [_exact(v) for v in value], [4**L for L in Ls]
    detail = f"L = {', '.join(map(str, Ls))}: {_shown(value)}"
    if got == expected:
        return True, detail, ""
    if any(g is not None and g < 0 for g in got):
        return False, detail, _NEGATIVE
    if got == [2**L for L in Ls]:
        return False, detail, ("a Transformer block has two residual additions (attention, then feed-forward), "
                               "so L blocks are 2L steps: 2^(2L) paths (yours counts one addition per block)")
    if got[:-1] == expected[:-1] or _overflowed(got, expected):
        return False, detail, ("right for small L, wrong for L = %d: an overflow or a float; 2 ** (2 * L) in "
                               "Python's int is exact" % Ls[-1])
    return False, detail, "count the residual additions: two per Transformer block, each doubles the paths"


# paths_of_length(L, k) -----------------------------------------------------------------------------------




def judge_lengths(inputs, value):
    row, big, ks = inputs["row"], inputs["big"], inputs["big_ks"]
    got_row, got_big = [_exact(v) for v in value["row"]], [_exact(v) for v in value["big"]]
    expected_row, expected_big = [math.comb(row, k) for k in range(row + 1)], [math.comb(big, k) for k in ks]
    detail = f"L = {row}: {_shown(value['row'][:4])}...; L = {big}, k = {', '.join(map(str, ks))}: " \
             f"{_shown(value['big'])}"
    if got_row == expected_row and got_big == expected_big:
        return True, detail, ""
    if got_row == [math.comb(row, k - 1) if k else 0 for k in range(row + 1)]:
        return False, detail, "choose which k of the L branches the path takes: C(L, k); yours is C(L, k - 1)"
    if got_row == expected_row:
        numeric = [v for v in value["big"] if isinstance(v, (int, float)) and not isinstance(v, bool)]
        close = len(numeric) == len(ks) and all(
            abs(float(v) - e) <= 1e-6 * e for v, e in zip(numeric, expected_big) if math.isfinite(float(v)))
        if close:
            return False, detail, ("right to about 15 digits only, at L = %d: a binomial through floating point "
                                   "(factorials as floats, a product of fractions) keeps 53 bits; math.comb(L, k) "
                                   "is exact" % big)
        return False, detail, ("right for L = %d, wrong for L = %d: an overflow or a float; math.comb(L, k) is "
                               "exact at any size" % (row, big))
    return False, detail, "choose which k of the L blocks' branches the path takes: C(L, k) = math.comb(L, k)"


# path_count_from_the_instrument ---------------------------------------------------------------------------




def judge_instrument(inputs, value):
    blocks = 3 * ((inputs["depth"] - 2) // 6)
    counted, formula = _exact(value["counted"]), _exact(value["formula"])
    ok = counted == formula == 2**blocks
    detail = f"a {blocks}-block ResNet: the instrument counts {value['counted']}, your formula {value['formula']}"
    return ok, detail, "" if ok else "sum path_gradients(model, x, y)['num_paths'] over the lengths"


EXERCISE = Exercise(
    number=6, title="counting the paths through ResNet and Transformer blocks", self_test="(d), (e)",
    filename="ex6_paths.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("resnet", "paths through L ResNet blocks, exact for large L", "resnet", judge_resnet,
                  "at each block a path takes the branch or the shortcut: two choices per block, and the "
                  "choices of different blocks multiply"),
        CheckSpec("transformer", "paths through L Transformer blocks, exact for large L", "transformer",
                  judge_transformer, "count the residual additions: each one is a choice between its sublayer "
                                     "and the stream, and a Transformer block has more than one"),
        CheckSpec("lengths", "paths through exactly k of L branches, exact for large L", "lengths",
                  judge_lengths, "a path through exactly k branches is a choice of which k of the L blocks it "
                                 "enters (math has a function for that count)"),
        CheckSpec("instrument", "path_gradients counts your number on a small ResNet", "instrument",
                  judge_instrument, "diagnostics.path_gradients(model, x, y)['num_paths']"),
    ))
