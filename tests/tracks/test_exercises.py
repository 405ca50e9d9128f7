"""The exercises and their grader: every solution passes, typical wrong answers fail with the right hint.

The instructors' solutions are in solutions/; each wrong answer below is one
of them with one typical mistake made (the table says which line changed),
and must fail the named check with a hint that names the mistake.
"""

import json
import pathlib

import pytest

from track_helpers import run_cli
from tracks.__main__ import main as tracks_main
from tracks.exercises.catalogue import EXERCISES
from tracks.exercises.grader import grade

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"

# (exercise, what the student did, the line in the solution, the line they wrote, the check that fails, the hint)
MISTAKES = [
    (1, "the shortcut forgotten", "return x + update if self.residual else update", "return update",
     "y = x + f(x)", "the shortcut is missing"),
    (1, "a ReLU before the addition", "return x + update if self.residual else update",
     "return keras.ops.relu(x) + update if self.residual else update", "y = x + f(x)", "you add ReLU(x)"),
    (1, "a ReLU after the addition", "return x + update if self.residual else update",
     "return keras.ops.relu(x + update) if self.residual else update", "y = x + f(x)", "never negative"),
    (1, "get_config without the arguments",
     'return {**super().get_config(), "hidden": self.hidden, "residual": self.residual}',
     "return super().get_config()", "saving", "get_config returns"),
    (2, "both layers at 0", 'keras.layers.Dense(hidden, activation="relu"),',
     'keras.layers.Dense(hidden, activation="relu", kernel_initializer="zeros"),', "can learn",
     "no kernel gets a gradient"),
    (2, "the shortcut forgotten", "return rk.Residual(branch)", "return branch", "exactly the identity",
     "without the shortcut"),
    (2, "the branch not at 0", 'keras.layers.Dense(width, kernel_initializer="zeros"),',
     "keras.layers.Dense(width),", "exactly the identity", "f(x) is not 0 at initialisation"),
    (3, "the norm after the addition (Post-LN)", "x = x + self.attend(x)  # x + Attention(LN(x))",
     "x = self.attention_norm(x + self.attend(x))", "the block is the identity", "the output is normalised"),
    (3, "the shortcut forgotten", "x = x + self.attend(x)  # x + Attention(LN(x))", "x = self.attend(x)",
     "the block is the identity", "the residual addition is missing"),
    (3, "not causal", "return self.attention(h, h, use_causal_mask=True)",
     "return self.attention(h, h)", "causal", "use_causal_mask=True"),
    (3, "a step left out of residual_steps",
     'return [rk.ResidualStep("attention", self.attend), rk.ResidualStep("feedforward", self.feedforward)]',
     'return [rk.ResidualStep("attention", self.attend)]', "residual protocol", "each branch computes exactly"),
    (4, "the Jacobian in the wrong layout", "return tape.jacobian(y, x).numpy()",
     "return tape.jacobian(y, x).numpy().T", "rows: outputs", "wrong layout"),
    (4, "J2 taken at x", "J2 = jacobian(f2, y1)", "J2 = jacobian(f2, x)", "the four terms", "at y1 = x + f1(x)"),
    (4, "the product in the wrong order", '"J2J1": J2 @ J1', '"J2J1": J1 @ J2', "the four terms",
     "the later block's Jacobian on the left"),
    (5, "bounds that add instead of multiply", "return (1 - eps) ** L, (1 + eps) ** L",
     "return 1 - eps * L, 1 + eps * L", "the bounds", "multiply, they do not add"),
    (5, "off by one block", "return (1 - eps) ** L, (1 + eps) ** L",
     "return (1 - eps) ** (L - 1), (1 + eps) ** (L - 1)", "the bounds", "off by one"),
    (5, "the plain bound with an identity term", "return eps**L", "return (1 - eps) ** L", "the bounds",
     "no identity term"),
    (5, "random matrices not scaled to norm eps", "J *= eps / np.linalg.norm(J, 2)  # spectral norm exactly eps",
     "J *= eps", "random products", "spectral norm exactly eps"),
    (6, "a path count off by one", "return 2**L", "return 2 ** (L + 1)", "ResNet blocks", "off by one block"),
    (6, "one addition per Transformer block", "return 2 ** (2 * L)  # two residual additions per block",
     "return 2**L", "Transformer blocks", "two residual additions"),
    (6, "C(L, k - 1)", "return math.comb(L, k)", "return math.comb(L, k - 1) if k else 0", "exactly k",
     "off by one"),
]


def _solution(number):
    exercise = next(e for e in EXERCISES if e.number == number)
    return SOLUTIONS / exercise.skeleton


@pytest.mark.parametrize("number", [exercise.number for exercise in EXERCISES])
def test_every_solution_passes_every_check(number):
    report = grade(_solution(number))
    failed = [f"{c['name']}: {c['detail']} / {c['hint']}" for c in report["checks"] if not c["passed"]]
    assert report["passed"] and not failed, failed
    assert report["exercise"] == number and len(report["checks"]) >= 3
    assert report["seconds"] < 60  # an exercise is graded within a minute on 2 cores


@pytest.mark.parametrize("number", [exercise.number for exercise in EXERCISES])
def test_a_skeleton_as_handed_out_fails_with_hints(number):
    exercise = next(e for e in EXERCISES if e.number == number)
    report = grade(exercise.path)
    assert report["exercise"] == number and not report["passed"]
    assert all(not check["passed"] and check["hint"] for check in report["checks"]), report["checks"]


def test_there_are_three_typical_mistakes_per_exercise():
    counts = {exercise.number: sum(1 for m in MISTAKES if m[0] == exercise.number) for exercise in EXERCISES}
    assert all(count >= 3 for count in counts.values()), counts


@pytest.mark.parametrize("number, mistake, line, wrong, failing, hint", MISTAKES,
                         ids=[f"{m[0]}-{m[1]}" for m in MISTAKES])
def test_a_typical_wrong_answer_fails_with_the_hint_that_names_it(tmp_path, number, mistake, line, wrong,
                                                                  failing, hint):
    source = _solution(number).read_text()
    assert source.count(line) >= 1, f"the solution no longer has {line!r}"
    path = tmp_path / _solution(number).name
    path.write_text(source.replace(line, wrong, 1))
    report = grade(path)
    assert not report["passed"], f"{mistake}: every check passed"
    failed = [check for check in report["checks"] if not check["passed"]]
    named = [check for check in failed if failing in check["name"]]
    assert named, f"{mistake}: the check {failing!r} did not fail; failed: {[c['name'] for c in failed]}"
    assert any(hint in check["hint"] for check in named), f"{mistake}: hints {[c['hint'] for c in named]}"


def test_the_commands_list_start_and_grade_a_folder_as_json(tmp_path, capsys):
    code, out, _ = run_cli(tracks_main, ["exercises"], capsys)
    assert code == 0 and all(f"{exercise.number}. {exercise.title}" in out for exercise in EXERCISES)
    code, out, _ = run_cli(tracks_main, ["exercises", "start", "5", tmp_path / "class" / "ana"], capsys)
    assert code == 0 and (tmp_path / "class" / "ana" / "ex5_bounds.py").is_file()
    code, _, err = run_cli(tracks_main, ["exercises", "start", "5", tmp_path / "class" / "ana"], capsys)
    assert code == 2 and "exists already" in err
    code, _, err = run_cli(tracks_main, ["exercises", "start", "9", tmp_path / "x"], capsys)
    assert code == 2 and "no exercise 9" in err
    # A class: one student solved exercise 5, one handed in the skeleton.
    (tmp_path / "class" / "ben").mkdir()
    (tmp_path / "class" / "ben" / "ex5_bounds.py").write_text(_solution(5).read_text())
    files = [tmp_path / "class" / "ana" / "ex5_bounds.py", tmp_path / "class" / "ben" / "ex5_bounds.py"]
    code, out, _ = run_cli(tracks_main, ["check", *files, "--json"], capsys)
    assert code == 1  # one of them failed
    grades = json.loads(out)
    assert [entry["passed"] for entry in grades] == [False, True]
    assert grades[0]["exercise"] == 5 and all(not c["passed"] for c in grades[0]["checks"])
    code, out, _ = run_cli(tracks_main, ["check", files[1]], capsys)
    assert code == 0 and "PASS" in out and "FAIL" not in out
    code, _, err = run_cli(tracks_main, ["check", tmp_path / "missing.py"], capsys)
    assert code == 2 and "no such file" in err


def test_a_file_that_is_no_exercise_is_one_failed_check(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    report = grade(broken)
    assert not report["passed"] and report["checks"][0]["name"] == "the file imports"
    unmarked = tmp_path / "unmarked.py"
    unmarked.write_text("x = 1\n")
    assert "EXERCISE = N" in grade(unmarked)["checks"][0]["hint"]
