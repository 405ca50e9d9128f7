"""The grader's strength, measured: every single-point mutant of the six solutions is killed, or explained.

scripts/mutants.py writes every mutant its operators make of each solution
in solutions/ and grades them as one class with the real grader
(`python -m tracks grade`, each file confined in its own process). The slow
test does that on two seeds (CI runs the first; the second is a maintainer's,
docs/maintainers.md) and fails on any mutant that passes every
check and is not listed in tests/exercise_fixtures/equivalent_mutants.toml
(a hole in the checks), and on any listed one that was killed (a stale
entry, or a grader that fails a right answer). The fast tests check the
tool itself: the operators, the keys (stable when the solution is edited
elsewhere) and the equivalents file (every entry a mutant the tool makes,
each with a reason).
"""

import ast
import re

import pytest

from scripts import mutant_operators, mutants

pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model: the grader's processes do

SEEDS = (38, 2026)
REQUIRED_OPERATORS = {"binop", "compare", "boolop", "number", "flag", "activation", "statement", "keyword",
                      "keywords", "arguments"}


@pytest.fixture(scope="module")
def every_mutant():
    return mutants.all_mutants()


def test_each_mutant_is_one_change_that_compiles_and_is_made_once(every_mutant):
    keys = [mutant.key for mutant in every_mutant]
    assert len(keys) == len(set(keys))
    assert len({mutant.source for mutant in every_mutant}) == len(every_mutant)
    for mutant in every_mutant:
        solution = (mutants.SOLUTIONS / mutant.file).read_text()
        compile(mutant.source, mutant.file, "exec")
        assert ast.unparse(ast.parse(solution)) != mutant.source.strip()
        assert mutant.before and mutant.after and mutant.before != mutant.after, mutant.key
        assert "EXERCISE = " in mutant.source  # the line the grader reads is never mutated
    assert {mutant.exercise for mutant in every_mutant} == {1, 2, 3, 4, 5, 6}


SAMPLE = '''"""A file with one of everything the operators change."""
import keras
import numpy as np

EXERCISE = 5


class Block(keras.layers.Layer):
    def __init__(self, hidden, residual=True, **kwargs):
        super().__init__(**kwargs)
        self.first = keras.layers.Dense(hidden, activation="relu", kernel_initializer="zeros", dtype="float32")
        self.last = keras.layers.Dense(hidden)

    def call(self, x):
        return x + self.last(keras.activations.gelu(self.first(x)))


def f(a, b, scale):
    total = len(a) - len(b)
    for value in a:
        if value < b and not value == 0 or value in b:
            total += -value * 2 ** scale @ b % 3 // 4
    return np.linalg.norm(np.clip(a, b, scale), 2)
'''


def test_every_operator_the_docstring_names_makes_mutants(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    made = mutant_operators.mutants_of(path, 5)
    operators = {mutant.operator for mutant in made}
    named = set(re.findall(r"^- `(\w+)`|`(\w+)`: ", mutant_operators.__doc__, re.MULTILINE))
    named = {name for pair in named for name in pair if name}
    assert REQUIRED_OPERATORS <= operators == named, (REQUIRED_OPERATORS - operators, operators ^ named)
    afters = {mutant.after for mutant in made}
    for after in ("if value <= b and (not value == 0) or value in b:",
                  "if (value < b or not value == 0) or value in b:",
                  "if value < b and value == 0 or value in b:",
                  "if value < b and (not value == 0) or value not in b:",
                  "return x + self.last(keras.activations.silu(self.first(x)))",
                  "return x + self.first(keras.activations.gelu(self.first(x)))",
                  "total = len(a) - len(a)",
                  "def __init__(self, hidden, residual=False, **kwargs):",
                  "return np.linalg.norm(np.clip(a, b, scale))",
                  "return np.linalg.norm(np.clip(b, a, scale), 2)",
                  "total -= -value * 2 ** scale @ b % 3 // 4",
                  "total = -value * 2 ** scale @ b % 3 // 4",
                  "total += -value * 2 ** scale @ b % 3 // 5",
                  "total += -value * 2 ** scale @ b % 3 // -4"):
        assert after in afters, after


def test_the_solutions_mutants_include_the_mistakes_students_make(every_mutant):
    diffs = {(mutant.file, mutant.after) for mutant in every_mutant}
    # the two of issue 64, a forgotten shortcut, a ReLU for GELU, J2 taken at x, the Frobenius norm
    for file, after in [
            ("ex3_preln_block.py", "self.attention = keras.layers.MultiHeadAttention(width // self.num_heads, "
                                   "self.num_heads, name='attention')"),
            ("ex5_bounds.py", "ANSWERS = {'residual_lower': 0.8 ** 50, 'residual_upper': 1.2 ** 50, "
                              "'plain_upper': 0.2 ** 51}"),
            ("ex1_residual_layer.py", "return x - update if self.residual else update"),
            ("ex3_preln_block.py", "self.mlp_in = keras.layers.Dense(self.hidden, activation='relu', name='mlp_in')"),
            ("ex4_two_block_jacobian.py", "J2 = jacobian(f2, x)"),
            ("ex5_bounds.py", "J *= eps / np.linalg.norm(J)"),
            ("ex3_preln_block.py", "x = x + self.mlp(self.attention_norm(x))")]:
        assert (file, after) in diffs, after


def test_a_key_does_not_change_when_the_solution_is_edited_elsewhere(tmp_path):
    solution = (mutants.SOLUTIONS / "ex5_bounds.py").read_text()
    edited = tmp_path / "ex5_bounds.py"
    edited.write_text("# a comment\n\n\n" + solution.replace("import numpy as np", "import numpy as np\nimport math")
                      + "\n\ndef unrelated(a):\n    return a + 1\n")
    before = {mutant.key for mutant in mutants.mutants_of(mutants.SOLUTIONS / "ex5_bounds.py", 5)}
    after = {mutant.key for mutant in mutants.mutants_of(edited, 5)}
    assert before <= after and len(after - before) >= 3  # unrelated's mutants are new; none of the others moved


def test_every_equivalent_names_a_mutant_the_tool_makes_and_says_why(every_mutant):
    equivalents = mutants.read_equivalents()
    made = {mutant.key for mutant in every_mutant}
    assert set(equivalents) <= made, set(equivalents) - made
    assert all(len(why.split()) >= 5 for why in equivalents.values())


def test_the_score_counts_survivors_that_are_not_listed_and_listed_ones_that_were_killed(every_mutant):
    sample = [mutant for mutant in every_mutant if mutant.exercise == 6][:3]
    verdicts = {sample[0].key: (True, "a check"), sample[1].key: (False, ""), sample[2].key: (False, "")}
    scores = mutants.score(sample, verdicts, {sample[2].key: "why", sample[0].key: "why"})[6]
    assert (scores.mutants, scores.killed, scores.survived, scores.equivalent) == (3, 1, 2, 1)
    assert scores.unexplained == [sample[1]] and [m for m, _ in scores.stale] == [sample[0]]
    assert scores.score == "1/2"


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_every_mutant_of_the_solutions_is_killed_or_listed_as_equivalent(every_mutant, seed, tmp_path):
    verdicts = mutants.grade(every_mutant, seed, jobs=2, timeout=60, keep=tmp_path)
    scores = mutants.score(every_mutant, verdicts, mutants.read_equivalents())
    holes = [f"{mutant.diff} [{mutant.operator}]" for entry in scores.values() for mutant in entry.unexplained]
    stale = [f"{mutant.diff}: killed by {why}" for entry in scores.values() for mutant, why in entry.stale]
    assert not holes, "survived, and not in equivalent_mutants.toml:\n" + "\n".join(holes)
    assert not stale, "listed as equivalent, and killed:\n" + "\n".join(stale)


def test_bad_input_is_refused_in_one_line_before_anything_is_graded(tmp_path, capsys):
    broken = tmp_path / "equivalents.toml"
    broken.write_text("[[equivalent]]\nmutant = 'a key'\n")  # no why
    for argv, message in ((["--exercise", "9", "--seed", "1"], "no exercise 9"),
                          (["--jobs", "0", "--seed", "1"], "must be >= 1"),
                          (["--timeout", "86401", "--seed", "1", "--keep", str(tmp_path / "kept")],
                           "argument --timeout: must be at most 86400"),  # the grader's own range
                          (["--timeout", "1", "--seed", "1", "--keep", str(tmp_path / "kept")],
                           "argument --timeout: must be at least"),
                          ([], "give --seed S"),
                          (["--seed", "1", "--equivalents", str(tmp_path / "missing.toml")], "No such file"),
                          (["--seed", "1", "--equivalents", str(broken)], "needs a mutant and a why")):
        assert mutants.main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (argv, err)
    assert not (tmp_path / "kept").exists()  # nothing written for a grader that would refuse it
