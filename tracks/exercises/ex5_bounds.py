"""Exercise 5: the bounds of L residual and plain blocks, against random matrices (self-test (b)).

The checks draw eps, L and n from the run's seed, so bounds written for
eps = 0.2, L = 50 only fail; the references are computed here. The random
products are checked for factors of norm eps (the first, and the second
read off the product of two), for singular values within the bounds
computed here, for one new J per layer (a product of one J reused,
(I + J)^L, fails), and for following their seed.
"""

import numpy as np

from tracks.exercises.exercise import CheckSpec, Exercise, WrongForm, array, close, number

SKELETON = '''"""Exercise 5: bounds on the Jacobian of L blocks.

If every branch has ||J_f|| <= eps < 1, each residual factor I + J stretches
a vector by at least 1 - eps and at most 1 + eps, so

    (1 - eps)^L <= ||(I + J_L) ... (I + J_1) v|| / ||v|| <= (1 + eps)^L,

while a plain stack J_L ... J_1 has norm at most eps^L. For eps = 0.2 and
L = 50 that is a factor 4^50 ~ 1.3e30 between them.

Write:

- `residual_bounds(eps, L)`: (lower, upper) for the residual stack's
  stretch of any vector, as above;
- `plain_bound(eps, L)`: the upper bound of the plain stack's norm;
- `random_residual_product(eps, L, n, seed)`: the (n, n) product
  (I + J_L) ... (I + J_1) of L random matrices J_l, a new one for each
  layer, each scaled to spectral norm exactly eps (numpy;
  np.linalg.norm(J, 2) is the spectral norm), drawn from
  np.random.default_rng(seed): the same seed gives the same product;
- `ANSWERS`: a dict with the numbers for eps = 0.2, L = 50 (the functions
  are checked at other eps and L too):
  "residual_lower", "residual_upper", "plain_upper".

Check your work:  python -m tracks check THIS_FILE

Hints:
- the bounds hold for every vector, so the product's smallest and largest
  singular values lie between them (np.linalg.svd(..., compute_uv=False));
- a random matrix divided by its spectral norm has spectral norm 1.
"""

import numpy as np

EXERCISE = 5


def residual_bounds(eps, L):
    raise NotImplementedError


def plain_bound(eps, L):
    raise NotImplementedError


def random_residual_product(eps, L, n, seed=0):
    raise NotImplementedError


ANSWERS = {"residual_lower": None, "residual_upper": None, "plain_upper": None}
'''


def draw(rng):
    pairs = set()
    while len(pairs) < 4:
        pairs.add((round(float(rng.uniform(0.05, 0.6)), 3), int(rng.integers(3, 90))))
    if len({L % 2 for _, L in pairs}) == 1:  # an odd L and an even one in every draw: (eps - 1)^L is (1 - eps)^L
        eps, L = max(pairs)  # at an even L only (the new L has the other parity, so it meets no other pair)
        pairs = (pairs - {(eps, L)}) | {(eps, L + 1 if L < 89 else L - 1)}
    first = int(rng.integers(2**30))
    return {"pairs": sorted(pairs), "eps": round(float(rng.uniform(0.1, 0.4)), 3), "L": int(rng.integers(20, 61)),
            "n": int(rng.integers(6, 17)), "seeds": [first, first + 1 + int(rng.integers(2**30))]}


def _same(got, expected, rtol=1e-9):
    """Elementwise equal to `rtol` of each expected value, at any magnitude: the bounds run from 1e-116 to 1e18,
    and an absolute tolerance (numpy's isclose adds 1e-8) would take 0.2^45 for 0.2^50. NaN is never the same."""
    got, expected = np.asarray(got, "float64"), np.asarray(expected, "float64")
    return bool(got.shape == expected.shape and np.all(np.abs(got - expected) <= rtol * np.abs(expected)))


# residual_bounds and plain_bound ---------------------------------------------------------------------------




def judge_bounds(inputs, value):
    pairs = inputs["pairs"]
    try:
        got = np.array([[number(low), number(high), number(top)] for (low, high), top in value])
    except (TypeError, ValueError) as error:
        raise WrongForm(f"residual_bounds must return (lower, upper) and plain_bound one number ({error})") from None
    if got.shape != (len(pairs), 3):
        raise WrongForm(f"{len(got)} answers for {len(pairs)} (eps, L) pairs")
    eps, L = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs], dtype=float)
    expected = np.stack([(1 - eps) ** L, (1 + eps) ** L, eps**L], axis=1)
    detail = "; ".join(f"eps {e}, L {l}: [{g[0]:.4g}, {g[1]:.4g}], plain {g[2]:.4g}" for (e, l), g in zip(pairs, got))
    if _same(got, expected):
        return True, detail, ""
    residual = got[:, :2]
    if _same(got, np.array([(0.8**50, 1.2**50, 0.2**50)] * len(pairs))) or np.ptp(got, axis=0).max() == 0:
        hint = ("your bounds do not change with eps and L (the numbers of eps = 0.2, L = 50?): compute them from the "
                "arguments, (1 - eps)^L and (1 + eps)^L")
    elif _same(residual, np.stack([1 - eps * L, 1 + eps * L], axis=1)):
        hint = ("the bounds multiply, they do not add: each of the L factors stretches by at most 1 + eps, so the "
                "product by at most (1 + eps)^L")
    elif any(_same(residual, np.stack([(1 - eps) ** (L + d), (1 + eps) ** (L + d)], axis=1))
             for d in (-1, 1)):
        hint = "off by one: L blocks give L factors, (1 - eps)^L and (1 + eps)^L"
    elif _same(residual, expected[:, :2]) and (_same(got[:, 2], expected[:, 0]) or _same(got[:, 2], expected[:, 1])):
        hint = ("the plain stack has no identity term: its factors are the J's alone, each of norm at most eps, so "
                "the product is at most eps^L")
    elif np.any(got < 0):
        hint = ("a bound below 0 (at an odd L?): a stretch is never negative, and 1 - eps > 0 is the least a factor "
                "stretches by: (1 - eps)^L, not (eps - 1)^L")
    else:
        hint = ("each residual factor I + J stretches a vector by a factor in [1 - eps, 1 + eps]; a plain one by at "
                "most eps")
    return False, detail, hint


# random_residual_product -----------------------------------------------------------------------------------




def _products(inputs, value):
    n = inputs["n"]
    return {key: array(value[key], (n, n), f"the product ({key})") for key in ("one", "two", "L", "again", "other")}


def judge_in_bounds(inputs, value):
    eps, L = inputs["eps"], inputs["L"]
    products = _products(inputs, value)
    factor = float(np.linalg.norm(products["one"] - np.eye(inputs["n"]), 2))
    if not _same(factor, eps, 1e-6):
        return False, f"one factor I + J has ||J|| = {factor:.4g}, not eps = {eps}", \
            "scale each random matrix to spectral norm exactly eps: J * eps / np.linalg.norm(J, 2)"
    reproducible = np.array_equal(products["L"], products["again"])  # else the seed check says why
    second = _second_factor(products["one"], products["two"], inputs["n"]) if reproducible else []
    if second and not any(_same(norm, eps, 1e-6) for norm in second):
        return False, f"the second factor I + J of the product of two has ||J|| = {second[0]:.4g}, not eps = {eps}", \
            "every factor's J has spectral norm exactly eps, the second as much as the first"
    singular = np.linalg.svd(products["L"], compute_uv=False)
    low, high = (1 - eps) ** L, (1 + eps) ** L
    ok = low * (1 - 1e-6) <= singular.min() and singular.max() <= high * (1 + 1e-6)
    return ok, (f"eps {eps}, L {L}, n {inputs['n']}: singular values {singular.min():.3g} to {singular.max():.3g}, "
                f"bounds {low:.3g} to {high:.3g}"), "multiply the factors (I + J_l) in order, each a new random J"


def _second_factor(one, two, n):
    """||J2|| of the product of two, (I + J2)(I + J1), from I + J1 = the product of one, read for each side
    the student may multiply on: [left, right]; [] when the first factor is singular."""
    try:
        inverse = np.linalg.inv(one)
    except np.linalg.LinAlgError:
        return []
    return [float(np.linalg.norm(two @ inverse - np.eye(n), 2)), float(np.linalg.norm(inverse @ two - np.eye(n), 2))]


def judge_independent(inputs, value):
    L = inputs["L"]
    products = _products(inputs, value)
    one, two = products["one"], products["two"]
    if close(two, one @ one, 1e-9) or close(products["L"], np.linalg.matrix_power(one, L), 1e-6):
        return False, "the product of 2 factors is (I + J)^2: one J reused", \
            ("draw a new J for every layer inside the loop: one J reused gives (I + J)^L, a single direction "
             "amplified L times, not the product of L independent factors the bound is about")
    if not np.array_equal(products["L"], products["again"]):
        return False, "the same seed gave two different products", \
            "draw from rng = np.random.default_rng(seed), not from the global np.random, so a seed gives one product"
    if close(products["L"], products["other"], 1e-9):
        return False, "two seeds gave the same product", "use the seed: rng = np.random.default_rng(seed)"
    return True, "a new J for every layer; the same seed gives the same product, another seed another one", ""


# ANSWERS --------------------------------------------------------------------------------------------------




def judge_answers(inputs, value):
    expected = {"residual_lower": 0.8**50, "residual_upper": 1.2**50, "plain_upper": 0.2**50}
    value = value if isinstance(value, dict) else {}
    wrong = [key for key, right in expected.items()
             if isinstance(value.get(key), bool) or not isinstance(value.get(key), (int, float))
             or not _same(float(value[key]), right, 1e-6)]
    return not wrong, "all three right" if not wrong else f"wrong or missing: {wrong}", \
        ("ANSWERS holds the bounds' values at eps = 0.2, L = 50: what residual_bounds(0.2, 50) and "
         "plain_bound(0.2, 50) return when they are right (each is compared to 1e-6 of its own size: "
         "a number near 0, such as 0.2^50 ~ 1e-35, must be that number, not merely small)")


EXERCISE = Exercise(
    number=5, title="the bounds of L residual and plain blocks, against random matrices", self_test="(b)",
    filename="ex5_bounds.py", skeleton=SKELETON, draw=draw, checks=(
        CheckSpec("bounds", "the bounds at four (eps, L) drawn for this run", "bounds", judge_bounds,
                  "a factor I + J with ||J|| <= eps stretches a vector by at least 1 - eps and at most 1 + eps, "
                  "and L factors in a row combine by multiplication; a plain factor J alone stretches by at most eps"),
        CheckSpec("in_bounds", "random products: factors of norm eps, singular values within the bounds",
                  "products", judge_in_bounds,
                  "build the product with numpy: product = (I + J) @ product, L times"),
        CheckSpec("independent", "random products: a new J for each layer, from the seed", "products",
                  judge_independent, "draw each J from rng = np.random.default_rng(seed), inside the loop"),
        CheckSpec("answers", "ANSWERS: the three numbers", "answers", judge_answers, "fill in ANSWERS"),
    ))
