"""The exercises, found through this registry: one module each, numbered as the course's self-test.

Self-test (a) the Jacobian of stacked residual blocks and the identity-path
term: exercises 1, 2 and 4; (b) the bounds at depth 50: exercise 5; (c) why
identity initialisation makes a deep net start shallow: exercise 2 (and
exercise 3's Pre-LN block, measured by the same instruments); (d) how many
identity paths run through L Transformer blocks against L ResNet blocks,
and (e) the 2^L expansion as an ensemble of paths: exercise 6.

Each module (tracks/exercises/exN_*.py) holds the exercise's question and
the file a student starts from (its `SKELETON`), the inputs a grading run
draws from its seed, and its checks with their reference values; the
instructors' solution is solutions/<the same file name>. A new exercise is
one module, its probes in harness/exN.py, and two edits here: its import,
and its place in `EXERCISES`. Importing this registry loads neither Keras
nor a student's file.
"""

from tracks.exercises import (ex1_residual_layer, ex2_identity_init, ex3_preln_block, ex4_two_block_jacobian,
                              ex5_bounds, ex6_paths)
from tracks.exercises.exercise import Exercise

EXERCISES = tuple(module.EXERCISE for module in (ex1_residual_layer, ex2_identity_init, ex3_preln_block,
                                                  ex4_two_block_jacobian, ex5_bounds, ex6_paths))
BY_NUMBER = {exercise.number: exercise for exercise in EXERCISES}



def checks_by_key(report):
    """{check key: its verdict} of a file's report (a report's `checks` are in its exercise's order); {} for a
    file that is no exercise."""
    if not report["exercise"]:
        return {}
    return dict(zip((spec.key for spec in BY_NUMBER[report["exercise"]].checks), report["checks"]))


__all__ = ["BY_NUMBER", "EXERCISES", "Exercise", "checks_by_key"]
