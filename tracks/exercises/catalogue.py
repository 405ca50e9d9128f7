"""The exercises: the course's self-test, numbered, with the file a student starts from.

Self-test (a) the Jacobian of stacked residual blocks and the identity-path
term: exercises 1, 2 and 4; (b) the bounds at depth 50: exercise 5; (c) why
identity initialisation makes a deep net start shallow: exercise 2 (and
exercise 3's Pre-LN block, measured by the same instruments); (d) how many
identity paths run through L Transformer blocks against L ResNet blocks,
and (e) the 2^L expansion as an ensemble of paths: exercise 6.
"""

import dataclasses
import pathlib

SKELETONS = pathlib.Path(__file__).resolve().with_name("skeletons")


@dataclasses.dataclass(frozen=True)
class Exercise:
    number: int
    title: str
    self_test: str  # which part of the course's self-test it makes runnable
    skeleton: str  # its file in skeletons/

    @property
    def path(self):
        return SKELETONS / self.skeleton


EXERCISES = (
    Exercise(1, "y = x + f(x) as a Keras layer, with a plain twin", "(a), and the core skill",
             "ex1_residual_layer.py"),
    Exercise(2, "start the block as the identity (zero initialisation)", "(a), (c)", "ex2_identity_init.py"),
    Exercise(3, "a Pre-LN Transformer block from keras.layers parts", "(c), (d)", "ex3_preln_block.py"),
    Exercise(4, "the two-block Jacobian and its four terms, with autodiff", "(a)", "ex4_two_block_jacobian.py"),
    Exercise(5, "the bounds of L residual and plain blocks, against random matrices", "(b)", "ex5_bounds.py"),
    Exercise(6, "counting the paths through ResNet and Transformer blocks", "(d), (e)", "ex6_paths.py"),
)
BY_NUMBER = {exercise.number: exercise for exercise in EXERCISES}

__all__ = ["BY_NUMBER", "EXERCISES", "Exercise"]
