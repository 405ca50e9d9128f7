"""Bad input that reached a traceback: options, variables and run files refused in one line, exit 2.

Each case was a traceback before its fix (an isdigit() that lets "²" through,
a float overflow in a run's estimate, a run file that is not UTF-8, a
bands.json of another shape, an infinite --input-range, a module that fails
to import); now it is one line on stderr, exit code 2, and nothing written.
"""

import dataclasses
import json
import shutil
import types

import pytest

import keras
from track_helpers import run_cli, snapshot
from tracks.common.config import ConfigError
from tracks.common.option_ranges import MAX_INTEGER, whole_number
from tracks.common.resume import refuse_too_large
from tracks.common.run_directory import RunDirectory
from tracks.language import prepare as language_prepare
from tracks.language.__main__ import main as language_main
from tracks.language.presets import PRESETS as LANGUAGE_PRESETS
from tracks.toy import prepare as toy_prepare
from tracks.toy.__main__ import main as toy_main
from tracks.toy.presets import PRESETS as TOY_PRESETS
from tracks.vision import prepare as vision_prepare
from tracks.vision.__main__ import main as vision_main
from tracks.vision.presets import PRESETS as VISION_PRESETS

HUGE = "1" + "0" * 160  # a float holds it, its square does not


def _refused(main, argv, capsys, said, folder):
    """`main(argv)` exits 2 with one stderr line holding `said`, and `folder` is unchanged (but for a
    resumed run's lock file, the one thing `--resume` writes before it reads the run's config)."""
    before = snapshot(folder)
    code, _, err = run_cli(main, argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and said in err, err
    assert {path: digest for path, digest in snapshot(folder).items() if not path.endswith(".lock")} == before
    return err


# Run files that are not UTF-8, or not JSON this package reads, name the file.

def _toy_run(folder, **fields):
    """A toy run directory (no model finished) whose config.json holds `fields` over the smoke preset's."""
    folder.mkdir(parents=True)
    config = {"track": "toy", **json.loads(json.dumps(dataclasses.asdict(TOY_PRESETS["smoke"]))), **fields}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "results.json").write_text(json.dumps({"models": []}))
    return folder


def test_a_resumed_run_whose_config_is_not_utf8_names_the_file(tmp_path, capsys):
    run = _toy_run(tmp_path / "run")
    (run / "config.json").write_bytes(b'{"track": "toy", "note": "\xff"}')
    _refused(toy_main, ["--resume", run], capsys, f"{run / 'config.json'} is damaged (not UTF-8 text: byte 0xff",
             tmp_path)


def _vision_run(path, *, seed=0):
    """A finished vision run's results.json and config.json (as tests/tracks/test_compare.py writes them)."""
    path.mkdir(parents=True)
    models = [{"id": f"{variant}-8", "variant": variant, "depth": 8, "train_error": 0.4, "test_error": 0.41}
              for variant in ("plain", "residual")]
    (path / "results.json").write_text(json.dumps({"track": "vision", "dataset": "cifar10", "models": models}))
    (path / "config.json").write_text(json.dumps({"track": "vision", "preset": "quick", "seed": seed}))
    return path


@pytest.mark.parametrize("name, content, said", [
    ("config.json", b'{"seed": "\xff"}', "config.json is damaged (not UTF-8 text: byte 0xff at offset 10)"),
    ("results.json", b"\xfe\xff", "results.json is damaged (not UTF-8 text: byte 0xfe at offset 0)"),
    ("config.json", b"[]", "config.json does not describe a run (a JSON list, not an object)"),
    ("config.json", b'{"seed": ' + b"9" * 5000 + b"}", "config.json is damaged (not JSON this package reads"),
    ("results.json", b"[" * 100_000 + b"]" * 100_000, "results.json is damaged (not JSON this package reads"),
])
def test_compare_names_a_run_file_it_cannot_read(name, content, said, tmp_path, capsys):
    run, reference = _vision_run(tmp_path / "run"), _vision_run(tmp_path / "reference")
    (run / name).write_bytes(content)
    _refused(vision_main, ["compare", run, reference], capsys, said, tmp_path)


def test_sample_names_a_run_file_that_is_not_utf8(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_bytes(b'{"track": "language\xff", "models": []}')
    _refused(language_main, ["sample", run], capsys, "its results.json is damaged", tmp_path)
    (run / "best_model.keras").write_bytes(b"")
    (run / "vocab.json").write_bytes(b"\xff")
    _refused(language_main, ["sample", run], capsys, f"{run / 'vocab.json'} is damaged (not UTF-8 text)", tmp_path)


# compare checks bands.json's shape.

@pytest.mark.parametrize("bands, said", [
    ([], '(not an object {"bands": {figure: [low, high]}})'),
    ({"bands": []}, '(not an object {"bands": {figure: [low, high]}})'),
    ({"bands": {"plain-8 training error": 5}}, "the band of 'plain-8 training error' is 5, not [low, high]"),
    ({"bands": {"plain-8 training error": [0.1, 0.2, 0.3]}}, "is [0.1, 0.2, 0.3], not [low, high]"),
    ({"bands": {"plain-8 training error": ["a", "b"]}}, 'is ["a", "b"], not [low, high]'),
    ({"bands": {"plain-8 training error": [None, 0.5]}}, "is [null, 0.5], not [low, high]"),
    ({"bands": {"plain-8 training error": [True, 0.5]}}, "is [true, 0.5], not [low, high]"),
    ({"bands": {"plain-8 training error": [0.5, 0.1]}}, "is [0.5, 0.1], not [low, high]"),
    ({"bands": {"plain-8 training error": [0, 10 ** 400]}}, "not [low, high] with finite numbers"),
])
def test_compare_refuses_a_bands_file_of_another_shape(bands, said, tmp_path, capsys):
    run, reference = _vision_run(tmp_path / "run"), _vision_run(tmp_path / "reference")
    (reference / "bands.json").write_text(json.dumps(bands))
    err = _refused(vision_main, ["compare", run, reference], capsys, said, tmp_path)
    assert f"error: {reference / 'bands.json'} is damaged" in err


def test_compare_still_reads_a_good_bands_file(tmp_path, capsys):
    run, reference = _vision_run(tmp_path / "run"), _vision_run(tmp_path / "reference")
    (reference / "bands.json").write_text(json.dumps({"rule": "by hand", "bands": {
        "plain-8 training error": [0.1, 0.3], "residual-8 training error": [0, 1]}}))
    code, out, err = run_cli(vision_main, ["compare", run, reference], capsys)
    assert code == 0, err
    assert "1 of 2 values with a band lie outside it" in out and "bands: by hand" in out


# --out with a literal tilde: the directory checked is the one made.

def test_create_makes_the_directory_check_new_checked(tmp_path, monkeypatch):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    (home / "taken").mkdir()
    (home / "taken" / "notes.txt").write_text("not a run\n")
    for check in (lambda: RunDirectory.check_new("~/taken"),
                  lambda: RunDirectory.create("toy", TOY_PRESETS["smoke"], out="~/taken")):
        with pytest.raises(ConfigError, match="taken already exists and is not empty"):
            check()
    with RunDirectory.create("toy", TOY_PRESETS["smoke"], out="~/fresh") as run:
        assert run.path == home / "fresh" and run.config_path.is_file()
    assert not any(cwd.iterdir())  # no directory named "~" here
    shutil.rmtree(home / "fresh")


# A whole number is ASCII digits ("²".isdigit() is true; int("²") fails).

def test_a_whole_number_is_ascii_digits_only():
    assert whole_number("12") == 12 and whole_number(" 7 ") == 7 and whole_number("-3", signed=True) == -3
    for text in ("²", "١", "--1", "-3", "1.5", "1_000", "", "9" * 5000):
        assert whole_number(text) is None, text
    assert whole_number("--1", signed=True) is None


@pytest.mark.parametrize("value", ["²", "١", "9" * 5000])
def test_cpu_replicas_that_are_not_ascii_digits_are_refused(value, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RESIDUAL_KERAS_CPU_REPLICAS", value)
    _refused(toy_main, ["--out", tmp_path / "run"], capsys, "RESIDUAL_KERAS_CPU_REPLICAS=", tmp_path)


# Integer options are at most a 64-bit integer; the estimate never overflows below that.

@pytest.mark.parametrize("main, argv", [
    (vision_main, ["--width", HUGE]),
    (vision_main, ["--epochs", "1" + "0" * 306, "--force"]),
    (vision_main, ["--train-size", HUGE]),
    (vision_main, ["diagnose", "--instrument-images", HUGE]),
    (language_main, ["--embed-dim", "4" + "0" * 160]),
    (language_main, ["--steps", HUGE, "--force"]),
    (toy_main, ["--width", HUGE]),
    (toy_main, ["diagnose", "--width", HUGE]),
    (toy_main, ["--epochs", str(MAX_INTEGER + 1)]),
])
def test_an_integer_option_above_64_bits_is_refused(main, argv, tmp_path, capsys):
    err = _refused(main, [*argv, "--out", tmp_path / "run"], capsys, f"must be at most {MAX_INTEGER}", tmp_path)
    assert len(err) < 200  # the number is shortened


def _at_most(config, **sizes):
    """`config`'s fields as a namespace, with `sizes` (the range checks would refuse such a config)."""
    return types.SimpleNamespace(**{**{field.name: getattr(config, field.name)
                                       for field in dataclasses.fields(config)}, **sizes})


@pytest.mark.parametrize("resources, config, fields", [
    (vision_prepare.resources, VISION_PRESETS["smoke"], ("width", "epochs", "batch_size", "train_size",
                                                         "validation_size")),
    (language_prepare.resources, LANGUAGE_PRESETS["smoke"], ("embed_dim", "steps", "batch_size",
                                                             "sequence_length", "num_heads")),
    (toy_prepare.resources, TOY_PRESETS["smoke"], ("width", "epochs", "steps_per_epoch", "batch_size", "points")),
])
def test_the_estimate_stays_finite_up_to_the_largest_integer_and_an_overflow_is_refused(resources, config, fields):
    largest = resources(_at_most(config, **{field: MAX_INTEGER for field in fields}))
    assert all(float(value) < float("inf") for value in dataclasses.astuple(largest))
    beyond = _at_most(config, **{field: int(HUGE) ** 2 for field in fields})
    with pytest.raises(OverflowError):
        resources(beyond)
    track = types.SimpleNamespace(resources=resources)
    with pytest.raises(ConfigError, match="too large to estimate"):
        refuse_too_large(track, beyond, force=True)


def test_a_resumed_run_whose_config_holds_a_huge_integer_is_refused(tmp_path, capsys):
    run = _toy_run(tmp_path / "run", width=int(HUGE))
    _refused(toy_main, ["--resume", run], capsys, f"config.json does not describe a toy run (--width must be at "
             f"most {MAX_INTEGER}", tmp_path)
    probe = RunDirectory(run, "toy")
    probe.lock()  # ConfigError if the refusal had kept the run's lock
    probe.release()


# diagnose --model: --output-index, the random inputs' range, and a module that fails to import.

@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """A saved model of one residual block (Dense), float inputs of 4 features."""
    from residual_keras import Residual

    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    x = keras.layers.Dense(8)(inputs)
    x = Residual(keras.layers.Dense(8), name="block")(x)
    path = tmp_path_factory.mktemp("models") / "small.keras"
    keras.Model(inputs, keras.layers.Dense(2)(x)).save(path)
    return path


@pytest.mark.parametrize("index", ["--1", "²"])
def test_an_output_index_that_is_no_integer_is_a_name_the_model_lacks(index, small_model, tmp_path, capsys):
    argv = ["diagnose", "--model", small_model, "--input-shape", "4", "--examples", "2",
            f"--output-index={index}", "--out", tmp_path / "run"]
    _refused(toy_main, argv, capsys, f"output_index={index!r}, but model", tmp_path)


@pytest.mark.parametrize("value_range, extra, said", [
    ("0,inf", [], "--input-range needs finite LOW and HIGH"),
    ("-1e308,1e308", [], "--input-range needs finite LOW and HIGH less than about 1.8e308 apart"),
    ("nan,1", [], "--input-range needs finite LOW and HIGH"),
    ("0,inf", ["--input-dtype", "int32"], "--input-range needs finite LOW and HIGH"),
    ("0,1000", ["--input-dtype", "int8"], "--input-range [0, 1000) does not fit int8 (-128..127)"),
    ("-1e30,0", ["--input-dtype", "int64"], "does not fit int64"),
])
def test_an_input_range_no_dtype_can_draw_from_is_refused(value_range, extra, said, small_model, tmp_path, capsys):
    argv = ["diagnose", "--model", small_model, "--input-shape", "4", f"--input-range={value_range}", *extra,
            "--out", tmp_path / "run"]
    _refused(toy_main, argv, capsys, said, tmp_path)


@pytest.mark.parametrize("source, said", [
    ("def broken(:\n", "--import broken_module failed: SyntaxError: invalid syntax"),
    ("value = name_nobody_defined\n", "--import broken_module failed: NameError: name 'name_nobody_defined'"),
    ("raise RuntimeError('first line\\nsecond line')\n", "--import broken_module failed: RuntimeError: first line"),
    (None, "--import broken_module failed: ModuleNotFoundError: No module named 'broken_module'"),
])
def test_a_module_that_fails_to_import_is_one_line(source, said, small_model, tmp_path, capsys, monkeypatch):
    modules = tmp_path / "modules"
    modules.mkdir()
    if source is not None:
        (modules / "broken_module.py").write_text(source)
    monkeypatch.syspath_prepend(str(modules))
    argv = ["diagnose", "--model", small_model, "--input-shape", "4", "--import", "broken_module",
            "--out", tmp_path / "run"]
    _refused(toy_main, argv, capsys, said, tmp_path)




def test_a_path_too_long_that_no_option_check_read_is_one_line_not_a_traceback(monkeypatch, capsys):
    """The options refuse the paths they read (test_bad_input.py); any other path the file system finds too
    long (a file a command makes inside a long folder, say) ends the track's or the grader's command in one
    line with exit 2, the path shown by its ends."""
    import errno
    import os

    from tracks.__main__ import main as tracks_main
    from tracks.common import cli as track_cli
    from tracks.exercises import cli as exercises_cli

    def too_long(*args, **kwargs):
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), "c" * 5000)

    said = f"error: {'c' * 200}...{'c' * 200} (5,000 characters): {os.strerror(errno.ENAMETOOLONG)}\n"
    monkeypatch.setattr(track_cli, "train_command", too_long)
    monkeypatch.setattr(exercises_cli, "_main", too_long)
    for main, argv in ((toy_main, ["--out", "run"]), (tracks_main, ["check", "mine.py"])):
        code, out, err = run_cli(main, argv, capsys)
        assert (code, out, err) == (2, "", said), argv

    def other_error(*args, **kwargs):  # any other OSError is not a path's length: not turned into this line
        raise OSError(errno.EIO, os.strerror(errno.EIO), "disk")

    monkeypatch.setattr(exercises_cli, "_main", other_error)
    with pytest.raises(OSError, match="Input/output error"):
        tracks_main(["check", "mine.py"])
