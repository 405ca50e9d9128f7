"""Exercise 5's probes: the student's bounds at the grader's (eps, L), and random products from its seeds."""

from .values import plain


def probe_bounds(module, inputs):
    return [[plain(module.residual_bounds(eps, L)), plain(module.plain_bound(eps, L))] for eps, L in inputs["pairs"]]


def probe_products(module, inputs):
    eps, L, n, (first, second) = inputs["eps"], inputs["L"], inputs["n"], inputs["seeds"]
    product = module.random_residual_product
    return {"one": plain(product(eps, 1, n, first)), "two": plain(product(eps, 2, n, first)),
            "L": plain(product(eps, L, n, first)), "again": plain(product(eps, L, n, first)),
            "other": plain(product(eps, L, n, second))}


def probe_answers(module, inputs):
    answers = getattr(module, "ANSWERS", None)
    return plain(dict(answers)) if isinstance(answers, dict) else None


PROBES = {"bounds": probe_bounds, "products": probe_products, "answers": probe_answers}
