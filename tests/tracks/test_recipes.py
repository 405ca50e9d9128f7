"""docs/architecture.md's recipes, followed: a throwaway block, instrument, track and exercise from their steps alone.

Each section below does what the recipe's numbered steps say, in order, and
nothing else, then checks that the result works where the recipe says it
will: the block in the project's layer harness and under the instruments,
the instrument on the package's networks, the track through `cli.main`, the
exercise through the grader's probe and judge.
"""

import dataclasses
import functools
import inspect
import json
import pathlib
import re

import keras
import numpy as np
import pytest

import residual_keras as rk
from layer_checks import run_layer_test
from residual_keras.steps import identity, identity_scale, residual_steps
from tracks.common import cli
from tracks.common.config import RuntimeOptions
from tracks.common.results import ModelResult, RunResults
from tracks.common.track import Track, TrackParts
from tracks.exercises.exercise import CheckSpec, Exercise, WrongForm, array, judge_all
from tracks.exercises.harness.runner import run as run_probes
from tracks.exercises.harness.values import plain

ARCHITECTURE = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()


def _recipe(title):
    """The numbered steps of one recipe of docs/architecture.md."""
    text = re.split(r"\n\*\*|\n## ", ARCHITECTURE.split(f"**{title}**", 1)[1], maxsplit=1)[0]
    return re.findall(r"^\d+\. ", text, re.MULTILINE)


def test_the_recipes_this_file_follows_are_in_the_document():
    assert [len(_recipe(title)) for title in ("A block", "An instrument", "A track", "An exercise")] == [8, 4, 6, 5]
    assert "tests/tracks/test_recipes.py" in ARCHITECTURE


# A block: steps 1-6 (7 and 8 are for the package's own blocks: exported, a family) --------------------------


@keras.saving.register_keras_serializable(package="residual_keras")  # step 1
class RecipeBlock(rk.BlockLayer):
    """`y = ReLU(x + W2 ReLU(W1 x))`, or `ReLU(W2 ReLU(W1 x))` for its plain twin.

    Args:
        hidden: int. Units of the branch's inner layer.
        residual: bool. Add x back (True) or the plain twin (False). Default True.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        x: float tensor (batch, ..., width).
        training: bool or None. Passed to the branch. Default None.

    Example:
        >>> tuple(RecipeBlock(8)(keras.ops.ones((2, 4))).shape)
        (2, 4)
    """

    def __init__(self, hidden, *, residual=True, **kwargs):  # step 1: the arguments checked
        super().__init__(**kwargs)
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"hidden must be a positive int, got {hidden!r}.")
        if not isinstance(residual, bool):
            raise ValueError(f"residual must be True or False, got {residual!r}.")
        self.hidden, self.residual = hidden, residual

    def build(self, input_shape):  # step 2
        self.inner = keras.layers.Dense(self.hidden, activation="relu", dtype=self.dtype_policy, name="inner")
        self.outer = keras.layers.Dense(input_shape[-1], dtype=self.dtype_policy, name="outer")
        self.inner.build(input_shape)
        self.outer.build((*input_shape[:-1], self.hidden))

    def branch(self, x, training=None):
        return self.outer(self.inner(x, training=training), training=training)

    def call(self, x, training=None):  # step 3: the formula
        update = self.branch(x, training)
        return keras.activations.relu(x + update if self.residual else update)

    def residual_steps(self, training=False):  # step 4: the same addition, with the block's own branch
        return [rk.ResidualStep("", branch=functools.partial(self.branch, training=training),
                                shortcut=identity if self.residual else None, post=keras.activations.relu,
                                training=training)]

    def get_config(self):  # step 5
        return {**super().get_config(), "hidden": self.hidden, "residual": self.residual}

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)


def test_the_block_recipe_gives_a_block_the_harness_and_the_instruments_take(tmp_path):
    x = np.random.default_rng(0).standard_normal((6, 5)).astype("float32")
    for residual in (True, False):
        block = RecipeBlock(7, residual=residual)
        block(x)
        assert block.check_steps(x) < 1e-6 and block.check_steps(x, training=True) < 1e-6  # step 4's promise
        run_layer_test(RecipeBlock, {"hidden": 7, "residual": residual}, x, (6, 5), tmp_path,
                       expected_num_trainable_weights=4)
    with pytest.raises(ValueError, match="hidden must be a positive int, got 0"):
        RecipeBlock(0)
    doc = inspect.getdoc(RecipeBlock)  # step 6
    assert all(section in doc for section in ("Args:", "Call arguments:", "Example:"))
    inputs = keras.Input((5,))
    model = keras.Model(inputs, keras.layers.Dense(3)(RecipeBlock(7, name="b1")(RecipeBlock(7, name="b0")(inputs))))
    assert list(rk.diagnostics.blocks(model)) == ["b0", "b1"]
    lesion = rk.lesion(model, x, np.zeros(6, "int32"))
    assert lesion["names"] == ["b0", "b1"] and lesion["removed_as"] == ["ReLU(shortcut(x))"] * 2
    assert np.isfinite(rk.gradient_norms(model, x, np.zeros(6, "int32"))["gain"])


# An instrument: steps 1-3 (4, exporting it and its figure, is for the package's own) ----------------------------


def identity_scales(model, x, y=None, *, blocks=None):
    """Per block: how many residual steps it has, whether it adds x back, and its identity scale (None: none)."""
    del x, y  # step 1: the common signature (this instrument reads the blocks, not the data)
    found = rk.diagnostics.blocks(model)  # step 2: the blocks, through the residual protocol
    chosen = {name: found[name] for name in (blocks or found)}
    return {name: {"steps": len(residual_steps(block)),  # step 3: plain numbers, keyed by the blocks' names
                   "residual": all(step.residual for step in residual_steps(block)),
                   "identity_scale": identity_scale(block)}
            for name, block in chosen.items()}


def test_the_instrument_recipe_gives_an_instrument_of_any_network():
    x = np.random.default_rng(1).standard_normal((2, 32, 32, 3)).astype("float32")
    model = rk.cifar_resnet(8, block=rk.blocks.zero_gamma_basic(), num_classes=3)
    before = [keras.ops.convert_to_numpy(weight).copy() for weight in model.weights]
    measured = identity_scales(model, x)
    assert len(measured) == 3 and all(entry == {"steps": 1, "residual": True, "identity_scale": 0.0}
                                      for entry in measured.values())
    assert all(np.array_equal(a, keras.ops.convert_to_numpy(b)) for a, b in zip(before, model.weights))  # unchanged
    language = rk.transformer_lm(11, 6, 2, embed_dim=8, num_heads=2, rezero=True)
    assert [entry["steps"] for entry in identity_scales(language, None).values()] == [2, 2]
    assert json.dumps(identity_scales(language, None))  # plain numbers


# A track: steps 1-5 (6, its line in the registry, puts it under the contract every track passes) ----------------


@dataclasses.dataclass(frozen=True)
class RecipeConfig(RuntimeOptions):  # step 1
    preset: str = dataclasses.field(default="smoke", metadata={"cli": False})
    data: str = dataclasses.field(default="lines", metadata={"help": "lines (points on two lines)"})
    depths: tuple[int, ...] = dataclasses.field(default=(2,), metadata={"help": "blocks"})
    seed: int = dataclasses.field(default=0, metadata={"help": "random seed"})
    seeds: tuple[int, ...] = dataclasses.field(default=(), metadata={"help": "seeds"})


RECIPE_PRESETS = {"smoke": RecipeConfig()}


@dataclasses.dataclass(frozen=True)
class RecipeData:
    x: np.ndarray
    y: np.ndarray
    name: str = "lines"
    title: str = "two lines"
    banner: str = None
    plot_banner: str = None
    description: str = "data: 64 points on two lines"


@dataclasses.dataclass(frozen=True)
class RecipeSpec:
    variant: str
    depth: int
    cost: float = 1.0

    @property
    def id(self):
        return f"{self.variant}-{self.depth}"

    @property
    def plain(self):
        return self.variant == "plain"


def recipe_load_data(ctx):  # step 2
    rng = np.random.default_rng(ctx.config.seed)
    y = rng.integers(0, 2, 64).astype("int32")
    return RecipeData(np.stack([rng.normal(size=64), y + 0.1 * rng.normal(size=64)], 1).astype("float32"), y)


def recipe_grid(config):  # step 3
    return [RecipeSpec(variant, depth) for variant in ("plain", "residual") for depth in config.depths]


def recipe_build_model(spec, ctx):
    inputs = keras.Input((2,))
    x = keras.layers.Dense(4)(inputs)
    for index in range(spec.depth):
        x = RecipeBlock(4, residual=not spec.plain, name=f"block{index}")(x)
    return keras.Model(inputs, keras.layers.Dense(2)(x), name=spec.id.replace("-", "_"))


def recipe_instrument_batch(ctx):
    return ctx.data.x[:16], ctx.data.y[:16]


def recipe_train_one(spec, ctx):
    model = recipe_build_model(spec, ctx)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ctx.data.x, ctx.data.y, epochs=2, batch_size=32, verbose=0)
    return RecipeModel(spec.id, spec.variant, spec.depth, params=model.count_params(),
                       loss=float(history.history["loss"][-1]))


@dataclasses.dataclass
class RecipeModel(ModelResult):
    loss: float = None


@dataclasses.dataclass
class RecipeResults(RunResults):
    MODEL_TYPE = RecipeModel


def recipe_findings(results):  # step 4
    return []


def recipe_report(results, ctx):
    (ctx.run.path / "summary.md").write_text("# Two lines\n\n" + "\n".join(
        f"- {model.id}: loss {model.loss:.3f}" for model in results.models) + "\n")
    return f"report with figures: {ctx.run.path / 'summary.md'}"


def recipe_load_parts():  # step 5
    return TrackParts(load_data=recipe_load_data, fingerprint=lambda data: {"points": len(data.y)},
                      grid=recipe_grid, build_model=recipe_build_model, instrument_batch=recipe_instrument_batch,
                      train_one=recipe_train_one, subtitle=lambda ctx: f"two lines, seed {ctx.config.seed}",
                      report=recipe_report, seeds_report=lambda seed_runs, ctx: "", figures=lambda results: {},
                      findings=recipe_findings)


RECIPE_TRACK = Track(name="recipe", usage="python -m tracks.recipe: a throwaway track", config_cls=RecipeConfig,
                     presets=RECIPE_PRESETS, load_parts=recipe_load_parts, results=RecipeResults,
                     default_preset="smoke")


def test_the_track_recipe_gives_a_track_that_runs(tmp_path, capsys):
    code = cli.main(RECIPE_TRACK, ["--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [model["id"] for model in results["models"]] == ["plain-2", "residual-2"]
    assert all(np.isfinite(model["loss"]) for model in results["models"])
    assert "initialisation" in results and (tmp_path / "run" / "gradient_flow.png").exists()  # the shared instruments
    assert "residual-2: loss" in (tmp_path / "run" / "summary.md").read_text()


# An exercise: steps 1-3 (4, the solution and wrong answers, are files this test writes) ---------------------------


RECIPE_SKELETON = '''"""Exercise 99: a residual step on numbers: y = x + f(x) with f(x) = 2 x.

Write `residual(x)` for a numpy array x.
"""

EXERCISE = 99


def residual(x):
    raise NotImplementedError
'''


def recipe_draw(rng):  # step 1
    return {"x": rng.standard_normal(int(rng.integers(3, 9))).round(4).tolist()}


def probe_residual(module, inputs):  # step 2 (harness/ex99.py): runs the student's code, sends back its values
    return plain(module.residual(np.asarray(inputs["x"], "float64")))


def judge_residual(inputs, value):  # step 3: the grader computes the answer itself
    x = np.asarray(inputs["x"], "float64")
    got = array(value, x.shape, "residual(x)")
    if np.allclose(got, 2 * x):
        return False, "residual(x) is f(x) = 2 x", "the shortcut is missing: y = x + f(x)"
    return bool(np.allclose(got, 3 * x)), f"largest error {np.max(np.abs(got - 3 * x)):.3g}", "y = x + 2 x"


def probe_empty(module, inputs):
    return plain(module.residual(np.zeros(0)))


PROBES = {"residual": probe_residual, "empty": probe_empty}  # step 2: the harness module's table


def judge_empty(inputs, value):
    if not isinstance(value, list):
        raise WrongForm("residual(empty) is not an array")
    return value == [], f"residual(empty) = {value}", "an empty input gives an empty output"


RECIPE_EXERCISE = Exercise(  # step 4 (the package's own: one line in catalogue.py)
    number=99, title="a residual step on numbers", self_test="(a)", filename="ex99_residual.py",
    skeleton=RECIPE_SKELETON, draw=recipe_draw, checks=(
        CheckSpec("residual", "y = x + f(x)", "residual", judge_residual, "write residual(x)"),
        CheckSpec("empty", "an empty input", "empty", judge_empty, "write residual(x)", optional=True),
    ))


def _grade(path, seed=5):
    inputs = json.loads(json.dumps(RECIPE_EXERCISE.inputs(seed)))
    records = []
    run_probes(str(path), PROBES, RECIPE_EXERCISE.probes, inputs,
               lambda record: records.append(json.loads(record if isinstance(record, str) else json.dumps(record))))
    return judge_all(RECIPE_EXERCISE, inputs, {r["probe"]: r for r in records if "probe" in r}, missing="no result")


@pytest.mark.parametrize("body, passed, hint", [
    ("    return x + 2 * x\n", [True, True], ""),
    ("    return 2 * x\n", [False, True], "the shortcut is missing"),
    ("    raise NotImplementedError\n", [False, False], "write residual(x)"),
])
def test_the_exercise_recipe_gives_an_exercise_the_grader_grades(tmp_path, body, passed, hint):
    path = tmp_path / RECIPE_EXERCISE.filename
    path.write_text(RECIPE_SKELETON.replace("    raise NotImplementedError\n", body))
    checks = _grade(path)
    assert [check.passed for check in checks] == passed and [check.optional for check in checks] == [False, True]
    assert hint in checks[0].hint
    assert RECIPE_EXERCISE.inputs(5) == RECIPE_EXERCISE.inputs(5) != RECIPE_EXERCISE.inputs(6)
