"""The README's promises: its example runs, its quick start is what CI runs."""

import math
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _block_after(marker):
    start = README.index(marker)
    match = re.search(r"```python\n(.*?)```", README[start:], re.S)
    return match.group(1)


def test_own_model_example_runs_and_measures_the_gradient(capsys):
    code = _block_after("<!-- example: own-model")
    assert len(code.strip().splitlines()) <= 16
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    model, flow = namespace["model"], namespace["flow"]
    assert model.output_shape == (None, 10)
    assert math.isfinite(flow["gain"]) and flow["gain"] > 0
    assert "gradient gain" in capsys.readouterr().out


def test_protocol_example_runs_and_its_block_is_measured(capsys):
    namespace = {}
    exec(compile(_block_after("<!-- example: own-model"), "README.md", "exec"), namespace)
    code = _block_after("<!-- example: protocol")
    assert len(code.strip().splitlines()) <= 17
    exec(compile(code, "README.md", "exec"), namespace)
    assert capsys.readouterr().out.splitlines()[-1] == "(4, 8) 0.0"
    keras, rk = namespace["keras"], namespace["rk"]
    assert isinstance(namespace["block"], rk.BlockLayer)
    assert "x + self.branch(x)" in code.split("def call", 1)[1].split("def ", 1)[0]  # the formula in call
    assert rk.check_residual_steps(namespace["block"], keras.random.normal((4, 8))) == 0.0
    inputs = keras.Input((8,))
    x = namespace["Damped"](name="damped1")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3)(namespace["Damped"](name="damped2")(x)))
    result = rk.lesion(model, keras.random.normal((16, 8)), keras.ops.zeros((16,), "int32"))
    assert result["names"] == ["damped1", "damped2"] and result["removed_as"] == ["shortcut(x)"] * 2


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    start = README.index("## Quick start")
    section = README[start:README.index("\n## ", start + 1)]
    commands = [line for line in section.splitlines() if line.startswith("pip install")]
    assert len(commands) == 2
    assert commands[1] in (ROOT / ".ci" / "run").read_text()
