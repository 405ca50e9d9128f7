"""A cheat on exercise 3: no block at all; it replaces the harness's probes with ones that send back forged values.

The forged values are what a Pre-LN block's checks once compared with each
other: the input as every output (as if each sublayer wrote 0), the right
parameter count, a config. The grader computes what a block must output
from weights it draws itself, so the forgery fails.
"""
# expect-reason: checks failed

import sys

EXERCISE = 3

probes = next(module.PROBES for name, module in list(sys.modules.items()) if name.endswith("harness.ex3"))


def forged_block(module, inputs):
    x = inputs["x"]
    return {"weights": [], "parts": {"attention": [], "norms": [], "dense": []}, "full": x, "training": x,
            "other": inputs["other"], "attention": {"zeroed": [], "parts": 1, "x": x, "changed": x},
            "mlp": {"zeroed": [], "parts": 1, "x": x, "changed": x}, "identity": x}


def forged_parameters(module, inputs):
    width, heads, hidden = inputs["width"], inputs["heads"], inputs["hidden"]
    return [[width, heads, width // heads]] * 3 + [[heads, width // heads]] * 3 + [[heads, width // heads, width],
            [width], [width], [width], [width], [width], [width, hidden], [hidden], [hidden, width], [width]]


def forged_saving(module, inputs):
    x = inputs["x"]
    return {"config": {"num_heads": inputs["heads"], "hidden": inputs["hidden"]}, "weights": [],
            "parts": {"attention": [], "norms": [], "dense": []}, "output": x, "clone": x, "loaded": x}


probes.update(block=forged_block, parameters=forged_parameters, saving=forged_saving)
