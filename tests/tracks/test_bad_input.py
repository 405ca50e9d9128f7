"""Bad command lines and environments, refused at the boundary: exit 2, one line, nothing written, no TensorFlow.

`CASES` is the table: across the three tracks (training, diagnose, diagnose
--model, compare, prefetch, sample), the exercises and the grader, and the
environment variables the commands read. They all run in one fresh
interpreter (refusal_runner.py; tests/conftest.py, which imports Keras, does
not run there), which reports after each case whether TensorFlow or Keras
was imported. A few run again as real `python -m` commands.
"""

import dataclasses
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from track_helpers import snapshot

pytestmark = pytest.mark.no_keras_reset

ROOT = Path(__file__).resolve().parents[2]
V, L, T, M = "tracks.vision.__main__", "tracks.language.__main__", "tracks.toy.__main__", "tracks.__main__"
OUT = ["--out", "new-run"]  # must not exist after any case
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # the CPU-time refusals, whatever the machine has
WORKERS = '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": %s}}'

LONG_NAME = "a" * 300  # one name longer than the 255 bytes a file system takes
LONG_PATH = "/".join(["b" * 200] * 25)  # names it takes, 5,024 bytes in all: more than its 4,096
SHOWN = f"{'a' * 30}...{'a' * 30} (300 characters)"  # how a line shows LONG_NAME: its ends and its length
TOO_LONG = f"{SHOWN} has a name of 300 bytes; a file system takes at most 255"

# (module, argv, environment, what the one line says)
CASES = [
    # The cases of issue 39.
    (V, ["--seed", "4294967296", *OUT], {}, "--seed must be in 0..4294967295"),
    (V, ["--seeds", "0,4294967296", *OUT], {}, "--seeds must be in 0..4294967295 (NumPy's 32-bit seeds), got 4294967296"),
    (L, ["--lesion-sequences", "0", *OUT], {}, "--lesion-sequences must be >= 1, got 0"),
    (L, ["--lesion-sequences", "-1", *OUT], {}, "--lesion-sequences must be >= 1, got -1"),
    (L, ["--embed-dim", "32", "--num-heads", "32", *OUT], {}, "heads of 1 features; the library needs at least 4"),
    (V, [*OUT], {"RESIDUAL_KERAS_CPU_REPLICAS": "abc"}, "RESIDUAL_KERAS_CPU_REPLICAS='abc': use a whole number"),
    (V, [*OUT], {"RESIDUAL_KERAS_CPU_REPLICAS": "-1"}, "from 1 to 64"),
    (V, ["--train-size", "1000000000000", *OUT], {}, "needs about 2.86e+06 GiB of memory (2.86e+06 GiB of data"),
    (V, ["--depths", "60002", *OUT], {}, "--depths 60002 is outside 8..1202"),
    (L, ["--layer-norm-epsilon", "1e309", *OUT], {}, "argument --layer-norm-epsilon: expected a finite number, got '1e309'"),
    (V, ["--depths", "abc", *OUT], {}, "--depths expects a comma-separated list of int, got 'abc'"),
    (V, ["--depths", "8,,14", *OUT], {}, "--depths expects a comma-separated list of int, got '8,,14'"),
    (L, ["--variants", "pre,", *OUT], {}, "--variants expects a comma-separated list of str, got 'pre,'"),
    (V, ["--seeds=", *OUT], {}, "--seeds expects a comma-separated list of int, got ''"),
    (V, ["--seed", "\u0663", *OUT], {}, "argument --seed: expected a whole number, got '\u0663'"),  # Arabic-Indic 3
    (T, ["--epochs", "1_0", *OUT], {}, "argument --epochs: expected a whole number, got '1_0'"),
    (V, ["--preset", "smok", *OUT], {}, "unknown preset 'smok'; choose one of: smoke, quick"),
    # Ranges and choices of the training options.
    (V, ["--depths", "9", *OUT], {}, "--depths 9: depths must be 6n+2"),
    (V, ["--epochs", "0", *OUT], {}, "--epochs must be >= 1, got 0"),
    (V, ["--learning-rate", "nan", *OUT], {}, "argument --learning-rate: expected a finite number, got 'nan'"),
    (V, ["--momentum", "1.5", *OUT], {}, "--momentum must be in [0, 1), got 1.5"),
    (V, ["--synthetic-faintest", "0", *OUT], {}, "--synthetic-faintest must be in (0, 1] (an opacity; 1: every "
     "object fully painted), got 0.0"),
    (V, ["--synthetic-faintest", "1.5", *OUT], {}, "--synthetic-faintest must be in (0, 1]"),
    (V, ["--variants", "plain,bogus", *OUT], {}, "unknown variant 'bogus'"),
    (V, ["--precision", "fp64", *OUT], {}, "argument --precision: invalid choice: 'fp64'"),
    (V, ["--train-size", "0", *OUT], {}, "--train-size must be >= 1"),
    (V, ["--preset", "paper", *OUT], NO_GPU, "more than a day: lower the sizes, or add --force"),
    (V, ["--resume", "no-such-run"], {}, "--resume no-such-run: no such directory"),
    # not "no --resume", which would start a new run:
    (T, ["--resume="], {}, "argument --resume: an empty path (''); give the folder of the run to continue"),
    (L, ["--resume", " "], {}, "argument --resume: an empty path (' ')"),
    (V, ["--resume", "notes/ideas.txt"], {}, "--resume notes/ideas.txt: a file, not a run directory"),
    (L, ["--sample-chars", "4294967296", *OUT], {}, "--sample-chars must be at most 100,000"),
    (L, ["--sequence-length", "1", *OUT], {}, "--sequence-length must be >= 2: with one character attention has "
     "nothing to choose between"),
    (L, ["--layer-norm-epsilon", "1e39", *OUT], {}, "--layer-norm-epsilon must be > 0 and at most 3.4028235e+38"),
    (V, ["--resume", "empty-run", "--epochs", "3"], {}, "--epochs cannot change there"),
    (V, ["--resume", "empty-run", *OUT], {}, "--out and --resume cannot be combined"),
    (L, ["--num-heads", "0", *OUT], {}, "--num-heads must be >= 1, got 0"),
    (L, ["--embed-dim", "30", "--num-heads", "4", *OUT], {}, "--embed-dim 30 is not divisible by --num-heads 4"),
    (L, ["--depths", "97", *OUT], {}, "--depths 97 is outside 1..96"),
    (L, ["--dropout", "1", *OUT], {}, "--dropout must be in [0, 1), got 1.0"),
    (L, ["--warmup-steps", "5000", *OUT], {}, "--warmup-steps 5000 must be < --steps"),
    (L, ["--seed", "-3", *OUT], {}, "--seed must be in 0..4294967295"),
    (L, ["--strategy", "multiworker", *OUT], {}, "--strategy multiworker needs the TF_CONFIG environment variable"),
    (L, ["--strategy", "multiworker", *OUT], {"TF_CONFIG": "{not json"}, "TF_CONFIG must be JSON like"),
    (L, ["--strategy", "multiworker", *OUT], {"TF_CONFIG": WORKERS % 2}, "task index 2 does not name one of its 2"),
    (L, ["--strategy", "multiworker", *OUT], {"TF_CONFIG": WORKERS % '"0"'}, "task index '0' does not name one"),
    (T, ["--depths", "0", *OUT], {}, "--depths 0 is outside 1..256"),
    (T, ["--depths", "257", *OUT], {}, "--depths 257 is outside 1..256"),
    (T, ["--noise", "1", *OUT], {}, "--noise must be in [0, 1), got 1.0"),
    (T, ["--batch-size", "1000", *OUT], {}, "--batch-size 1000 is more than the 512 training points"),
    (T, ["--epochs", "100000000", *OUT], NO_GPU, "more than a day"),
    (T, ["--width", "1000000", *OUT], {}, "of memory ("),
    (T, ["--seeds", "5", *OUT], {}, "--seeds needs at least two seeds"),
    (T, ["--learning-rate", "inf", *OUT], {}, "argument --learning-rate: expected a finite number, got 'inf'"),
    # The --data value, checked before TensorFlow loads (the data themselves load after it).
    (V, ["--data", "bogus:x", *OUT], {}, "unknown data source 'bogus:x'; accepted: auto, cifar10, synthetic"),
    (V, ["--data", "folder:/no/such/folder", *OUT], {}, "/no/such/folder is not a directory"),
    (V, ["--data", "folder:", *OUT], {}, "has no path: use folder:PATH"),
    (L, ["--data", "shakespeare", *OUT], {}, "unknown data source 'shakespeare'; accepted: 'auto'"),
    (L, ["--data", "text:", *OUT], {}, "names no file: use 'text:PATH'"),
    (V, ["diagnose", "--data", "cifar100", *OUT], {}, "unknown data source 'cifar100'"),
    # The environment.
    (T, [*OUT], {"RESIDUAL_KERAS_CPU_REPLICAS": "0"}, "RESIDUAL_KERAS_CPU_REPLICAS='0'"),
    (T, [*OUT], {"RESIDUAL_KERAS_CPU_REPLICAS": "1.5"}, "RESIDUAL_KERAS_CPU_REPLICAS='1.5'"),
    (T, [*OUT], {"RESIDUAL_KERAS_CPU_REPLICAS": "65"}, "from 1 to 64"),
    (T, [*OUT], {"RESIDUAL_KERAS_THREAD_SPINNING": "yes"}, "RESIDUAL_KERAS_THREAD_SPINNING='yes': use 1"),
    (L, ["compare", "empty-run", "empty-run"], {"RESIDUAL_KERAS_THREAD_SPINNING": "2"},
     "RESIDUAL_KERAS_THREAD_SPINNING='2'"),
    # diagnose, diagnose --model, compare, prefetch, sample.
    (V, ["diagnose", "--resume", "empty-run"], {}, "diagnose does not resume"),
    (T, ["diagnose", "--seeds", "0,1", *OUT], {}, "diagnose trains nothing, so --seeds has nothing to average"),
    (V, ["diagnose", "--depths", "10", *OUT], {}, "--depths 10: depths must be 6n+2"),
    (V, ["diagnose", "--model", "junk.keras", *OUT], {}, "--model junk.keras: not a zip file, so not a Keras archive"),
    (V, ["diagnose", "--model", "notes.keras", *OUT], {}, "a zip file but not a Keras archive: no metadata.json"),
    (L, ["diagnose", "--model", "old.h5", *OUT], {}, "an HDF5 file (Keras 2's .h5 format)"),
    (L, ["diagnose", "--model", "missing.keras", *OUT], {}, "--model missing.keras: no such file"),
    (T, ["diagnose", "--model", "empty-run", *OUT], {}, "a directory, not a .keras file"),
    (T, ["diagnose", "--model", "junk.keras", "--input-shape", "2,x", *OUT], {}, "--input-shape expects positive"),
    (T, ["compare", "empty-run", "empty-run"], {}, "RUN empty-run has no finished model"),
    (T, ["compare", "vision-run", "empty-run"], {}, "RUN vision-run is a 'vision' run, not a 'toy' run"),
    (V, ["compare", "vision-run", "not-a-run"], {}, "REFERENCE not-a-run: no results.json there"),
    (V, ["compare", "vision-run"], {}, "the following arguments are required: reference"),
    (T, ["prefetch"], {}, "python -m tracks.toy makes its data itself: there is nothing to download"),
    (V, ["prefetch", "--bogus"], {}, "unrecognized arguments: --bogus"),
    (V, ["prefetch", "--data-dir", "notes/ideas.txt"], {}, "--data-dir 'notes/ideas.txt' names no folder to keep cifar10"),
    (L, ["prefetch", "--data-dir", ""], {}, "--data-dir '' names no folder to keep tiny_shakespeare"),
    (V, ["--data-dir", "notes/ideas.txt", *OUT], {}, "--data-dir 'notes/ideas.txt' names no folder for the data sets"),
    (L, ["--data-dir", " ", *OUT], {}, "--data-dir ' ' names no folder for the data sets"),
    (L, ["sample", "not-a-run"], {}, "not-a-run has no best_model.keras: not a finished language run"),
    (L, ["sample", "lm-run"], {}, "lm-run has best_model.keras but no vocab.json"),
    (L, ["sample", "not-a-run", "--temperature", "-1"], {}, "--temperature must be >= 0 (0 = greedy), got -1.0"),
    (L, ["sample", "not-a-run", "--seed", "4294967296"], {}, "--seed must be in 0..4294967295"),
    (L, ["sample", "not-a-run", "--num-chars", "10" + "0" * 29], {}, "--num-chars must be in 0..100,000, got 1"),
    (L, ["sample", ""], {}, "argument run_dir: an empty path (''); name a file or folder"),
    (L, ["sample", "not-a-run", "--top-k", "\u0663"], {}, "argument --top-k: expected a whole number, got '\u0663'"),
    (V, ["diagnose", "--model", "", *OUT], {}, "argument --model: an empty path ('')"),
    # Paths longer than a file system takes: refused from their text, before anything touches the disk.
    (T, ["--out", LONG_NAME], {}, f"--out {TOO_LONG}; choose another --out"),
    (T, ["--out", LONG_PATH], {}, "(5,024 characters) is 5,024 bytes long; a file system takes at most 4096"),
    (V, ["--resume", LONG_NAME], {}, f"argument --resume: {TOO_LONG}"),
    (V, ["--data", "folder:" + LONG_NAME, *OUT], {}, f"data source folder:{TOO_LONG}"),
    (L, ["--data", "text:" + LONG_NAME, *OUT], {}, f"data source text:{TOO_LONG}"),
    (L, ["--data-dir", LONG_NAME, *OUT], {}, f"{TOO_LONG}; give another folder"),
    (T, ["compare", LONG_NAME, "empty-run"], {}, f"argument run: {TOO_LONG}"),
    (L, ["sample", LONG_NAME], {}, f"argument run_dir: {TOO_LONG}"),
    (M, ["check", LONG_NAME + ".py"], {}, "(303 characters) has a name of 303 bytes"),
    (M, ["grade", "no-such-class", "--out", LONG_PATH], {}, "is 5,024 bytes long; a file system takes at most 4096"),
    # Bytes that are not UTF-8 in a path a track hands to TensorFlow (its writers refused them mid-run).
    (T, ["--out", "run\udcff"], {}, "--out run\\xff is not UTF-8 text (TensorFlow takes UTF-8 paths only); "
     "choose another --out"),
    (V, ["--resume", "run\udcff"], {}, "argument --resume: run\\xff is not UTF-8 text"),
    (V, ["--data", "folder:images\udcff", *OUT], {}, "data source folder:images\\xff is not UTF-8 text"),
    # The exercises and the grader (python -m tracks ...).
    (M, ["check", "no-such-solution.py"], {}, "no such file: no-such-solution.py"),
    (M, ["exercises", "start", "99", "new-run"], {}, "no exercise 99"),
    (M, ["exercises", "start", "1"], {}, "start needs the exercise's number and a folder"),
    (M, ["--bogus"], {}, "unrecognized arguments: --bogus"),
    (M, ["check"], {}, "the following arguments are required: files"),
    (M, ["exercises", "bogus"], {}, "invalid choice: 'bogus'"),
    (M, ["check", "no-such-solution.py", "--seed", "-5"], {}, "--seed: must be in 0..4294967295"),
    (M, ["grade", "no-such-class", "--out", "new-book"], {}, "no such folder: no-such-class"),
    (M, ["grade", "no-such-class", "--out", "new-book", "--jobs", "0"], {}, "--jobs: must be a whole number >= 1, got '0'"),
    (M, ["grade", "no-such-class", "--out", "new-book", "--timeout", "nan"], {}, "--timeout: must be a finite number above 0, got nan"),
    (M, ["grade", "no-such-class", "--out", "new-book", "--jobs", "100000"], {}, "--jobs: must be at most "),
    (M, ["grade", "", "--out", "new-book"], {}, "argument folder: an empty path (''); name a file or folder"),
    (M, ["check", " "], {}, "argument files: an empty path (' ')"),
    (M, ["collect", "", "--out", "new-book"], {}, "argument download: an empty path ('')"),
    (M, ["exercises", "start", "\u0663", "new-run"], {}, "argument number: expected a whole number"),
    # Issue 51: every --out form, every variable the package reads, answered before TensorFlow loads.
    (T, ["--out", "junk.keras"], {}, "--out junk.keras is a file, not a directory"),
    (V, ["--out", "empty-run"], {}, "empty-run already exists and is not empty; use --resume empty-run"),
    (L, ["--out", "junk.keras/sub"], {}, "junk.keras is a file, not a directory"),
    (T, ["--out", ""], {}, "--out '' names no directory"),
    (T, ["diagnose", "--out", ""], {}, "--out '' names no directory"),
    (V, ["--out", " "], {}, "--out ' ' names no directory"),
    (V, ["diagnose", "--out", "vision-run"], {}, "choose another --out (diagnose always writes a new directory)"),
    (L, ["diagnose", "--out", "notes.keras"], {}, "--out notes.keras is a file, not a directory"),
    (T, ["--out", "notes"], {}, "notes already exists and is not empty; choose another --out"),
    (L, ["--out", "vision-run"], {}, "vision-run already exists and is not empty"),
    (V, ["--seeds", "0,1", "--out", "junk.keras"], {}, "--out junk.keras is a file"),
    (T, ["--out", "notes.keras/x/y"], {}, "notes.keras is a file, not a directory"),
    (T, [*OUT], {"RESIDUAL_KERAS_FUSED_BATCHNORM": "abc"}, "RESIDUAL_KERAS_FUSED_BATCHNORM='abc': use 0"),
    (V, [*OUT], {"RESIDUAL_KERAS_FUSED_BATCHNORM": "2"}, "RESIDUAL_KERAS_FUSED_BATCHNORM='2'"),
    (L, ["compare", "empty-run", "empty-run"], {"RESIDUAL_KERAS_FUSED_BATCHNORM": "maybe"},
     "RESIDUAL_KERAS_FUSED_BATCHNORM='maybe'"),
    (V, ["--resume", "empty-run"], {"RESIDUAL_KERAS_FUSED_BATCHNORM": "yes please"}, "RESIDUAL_KERAS_FUSED_BATCHNORM="),
    (V, ["--data", "folder:not-a-run", *OUT], {"RESIDUAL_KERAS_CACHE": "junk.keras"},
     "RESIDUAL_KERAS_CACHE=junk.keras: "),
    (V, ["--data", "folder:not-a-run", *OUT], {"RESIDUAL_KERAS_CACHE": ""}, "RESIDUAL_KERAS_CACHE='' names no directory"),
    (V, ["diagnose", "--data", "folder:not-a-run", *OUT], {"RESIDUAL_KERAS_CACHE": "junk.keras/cache"},
     "is a file, not a directory"),
    (M, ["check", "not-a-run"], {}, "not-a-run: a folder, not a file"),
    (M, ["check", "junk.keras", "not-a-run"], {}, "a folder, not a file"),
    (M, ["exercises", "start", "1", "junk.keras"], {}, "junk.keras is a file, not a folder"),
    (M, ["exercises", "start", "2", "junk.keras/deeper"], {}, "junk.keras is a file, not a folder"),
    (M, ["grade", "no-such-class", "--out", "new-book", "--disk-mb", "0"], {}, "--disk-mb: must be a finite number above 0"),
    (M, ["check", "junk.keras", "--disk-mb", "lots"], {}, "--disk-mb: must be a number, got 'lots'"),
    (L, ["diagnose", "--out", "empty-run"], {}, "(diagnose always writes a new directory)"),
    (L, ["sample", "empty-run"], {}, "empty-run is a 'toy' run, not a language run"),
    (L, ["sample", "vision-run"], {}, "vision-run is a 'vision' run, not a language run"),
]


def _fixtures(folder):
    """Runs that are not what the commands need, and files that are not models."""
    folder.mkdir()
    for name, track, models in (("empty-run", "toy", []), ("vision-run", "vision", [{"id": "plain-8"}])):
        (folder / name).mkdir()
        (folder / name / "results.json").write_text(json.dumps({"track": track, "models": models}))
        (folder / name / "config.json").write_text(json.dumps({"track": track, "preset": "smoke", "seed": 0}))
    (folder / "not-a-run").mkdir()
    (folder / "lm-run").mkdir()  # its vocab.json lost
    (folder / "lm-run" / "best_model.keras").write_text("refused before it is read\n")
    (folder / "notes").mkdir()
    (folder / "notes" / "ideas.txt").write_text("not a run\n")
    (folder / "junk.keras").write_text("not a model\n")
    with zipfile.ZipFile(folder / "notes.keras", "w") as archive:
        archive.writestr("config.json", "{}")
    (folder / "old.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64))


def _run_all(cases, cwd):
    payload = json.dumps([{"module": module, "argv": argv, "env": env} for module, argv, env, _ in cases])
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("RESIDUAL_KERAS_", "TF_CONFIG"))},
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("refusal_runner.py"))], input=payload,
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_table_has_over_40_cases_across_the_commands():
    assert len(CASES) >= 40
    assert {module for module, *_ in CASES} == {V, L, T, M}
    commands = {argv[0] for _, argv, _, _ in CASES if argv and not argv[0].startswith("-")}
    assert {"diagnose", "compare", "prefetch", "sample", "check", "exercises"} <= commands
    assert sum(1 for *_, env, _ in CASES if any(k.startswith(("RESIDUAL_KERAS_", "TF_CONFIG")) for k in env)) >= 8


def test_every_bad_input_is_refused_in_one_line_before_tensorflow_and_writes_nothing(tmp_path):
    cwd = tmp_path / "cwd"
    _fixtures(cwd)
    before = snapshot(cwd)
    outcomes = _run_all(CASES, cwd)
    assert len(outcomes) == len(CASES)
    wrong = []
    for (module, argv, env, said), outcome in zip(CASES, outcomes):
        lines = outcome["stderr"].splitlines()
        if not (outcome["code"] == 2 and len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0]
                and outcome["stdout"] == "" and outcome["imported"] == []):  # imported: the first to import it
            wrong.append((f"{module} {' '.join(argv)} {env or ''}", outcome))
    assert wrong == []
    assert snapshot(cwd) == before and not (cwd / "new-run").exists() and not (cwd / "runs").exists()


def test_the_fused_batchnorm_spellings_the_boundary_accepts_are_those_the_layer_reads(monkeypatch):
    from residual_keras import batchnorm
    from tracks.common.config import ConfigError
    from tracks.common.environment import FUSED_SWITCH, FUSED_VARIABLE, read_environment

    for spelling, on in [*FUSED_SWITCH.items(), *((key.upper(), on) for key, on in FUSED_SWITCH.items())]:
        monkeypatch.setenv(FUSED_VARIABLE, spelling)
        read_environment()  # accepted at the boundary ...
        assert batchnorm.fused_enabled() == on, spelling  # ... and read by the layer as the boundary reads it
    for spelling in ("abc", "2", "yes please", "o n"):
        monkeypatch.setenv(FUSED_VARIABLE, spelling)
        with pytest.raises(ConfigError):
            read_environment()
        with pytest.raises(ValueError):
            batchnorm.fused_enabled()


def test_tensorflows_start_up_lines_below_the_level_are_left_out_and_the_rest_kept():
    from tracks.common.environment import filter_native_log

    text = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
            "I0000 00:00:1796451894.802595    1789 port.cc:153] oneDNN custom operations are on.\n"
            "I0000 00:00:1796451933.267484    1915 cpu_feature_guard.cc:227] This TensorFlow binary is optimized\n"
            "To enable the following instructions: AVX2 AVX512F, in other operations, rebuild TensorFlow\n"
            "W1205 06:40:01.000001    1789 loader.cc:12] a warning\n"
            "E0000 00:00:1796451904.297168    1789 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n"
            "E1205 06:40:02.000001    1789 op.cc:7] a real error\n"
            "a Python warning of its own\n")
    assert filter_native_log(text, 2) == "E1205 06:40:02.000001    1789 op.cc:7] a real error\na Python warning of its own\n"
    assert filter_native_log(text, 3) == "a Python warning of its own\n"
    assert filter_native_log(text, 0) == text
    assert "a warning" in filter_native_log(text, 1) and "cuInit" not in filter_native_log(text, 1)


@pytest.mark.parametrize("level", [None, pytest.param("3", marks=pytest.mark.slow)])
def test_a_refusal_after_tensorflow_loads_is_one_line_whatever_the_log_level(tmp_path, level):
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    if level:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    done = subprocess.run([sys.executable, "-m", "tracks.vision", "--preset", "smoke", "--data", "synthetic",
                           "--warmup-steps", "100000", "--out", str(tmp_path / "run")],
                          env={**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "error: --warmup-steps 100000 is more than the 4 steps of warm-up a quarter of the run's 16 steps allow; "
        "lower it"], done.stderr
    assert not (tmp_path / "run").exists()


def test_a_presets_warm_up_that_does_not_fit_is_lowered_with_a_line_and_diagnose_checks_no_training_option(capsys):
    import types

    from tracks.common.resume import fit_samples
    from tracks.vision.presets import PRESETS
    from tracks.vision.track import TRACK

    data = types.SimpleNamespace(y_train=list(range(1000)), y_test=list(range(10_000)), name="synthetic")
    config = dataclasses.replace(PRESETS["quick"], train_size=1000)
    lowered = fit_samples(TRACK, config, data, given={})
    assert lowered.warmup_steps == 1000 // config.batch_size * config.epochs // 4 < config.warmup_steps
    assert f"--warmup-steps: the preset's {config.warmup_steps} is more than the {lowered.warmup_steps}" in \
        capsys.readouterr().out + capsys.readouterr().err
    with pytest.raises(ValueError, match=f"--warmup-steps {config.warmup_steps} is more than"):
        fit_samples(TRACK, config, data, given={"warmup_steps": config.warmup_steps})  # typed: refused
    assert fit_samples(TRACK, config, data, given={"warmup_steps": config.warmup_steps}, trains=False) == config
    tiny = types.SimpleNamespace(y_train=list(range(40)), y_test=list(range(40)), name="folder")
    from tracks.common.track import RunContext

    TRACK.parts.check(RunContext(config, data=tiny, trains=False))  # no --batch-size refusal: diagnose uses none
    with pytest.raises(ValueError, match="--batch-size"):
        TRACK.parts.check(RunContext(config, data=tiny))


def test_help_and_version_answer_without_tensorflow(tmp_path):
    cases = [(V, ["--help"], {}, ""), (L, ["diagnose", "--help"], {}, ""), (T, ["--version"], {}, ""),
             (V, ["compare", "--help"], {}, ""), (M, ["--version"], {}, "")]
    outcomes = _run_all(cases, tmp_path)
    for (module, argv, _, _), outcome in zip(cases, outcomes):
        assert outcome["code"] == 0 and outcome["stderr"] == "" and outcome["imported"] == [], (argv, outcome)
    assert "8..1202" in outcomes[0]["stdout"] and "--force" in outcomes[0]["stdout"]  # the bounds are stated
    assert "--model PATH.keras" in outcomes[1]["stdout"]  # diagnose's other form is in its help
    assert outcomes[2]["stdout"].startswith("residual-keras ") and "(keras 3." in outcomes[2]["stdout"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module, argv", [
    ("tracks.vision", ["--seed", "4294967296"]),
    ("tracks.language", ["--embed-dim", "32", "--num-heads", "32"]),
    ("tracks.toy", ["--depths", "abc"]),
])
def test_a_real_command_line_refuses_in_one_line(module, argv, tmp_path):
    done = subprocess.run([sys.executable, "-m", module, *argv, "--out", str(tmp_path / "run")],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr
    assert list(tmp_path.iterdir()) == []


def test_importing_the_tracks_changes_nothing_in_the_process():
    code = ("import os, sys\n"
            "before = dict(os.environ)\n"
            "import tracks, tracks.common.cli, tracks.__main__\n"
            "for track in ('vision', 'language', 'toy'):\n"
            "    __import__(f'tracks.{track}.__main__'); __import__(f'tracks.{track}.track')\n"
            "print(dict(os.environ) == before, [m for m in ('tensorflow', 'keras') if m in sys.modules])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL")}
    done = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip() == "True []", done.stdout + done.stderr


def test_the_running_guide_gives_the_tables_size():
    text = " ".join((ROOT / "docs" / "running.md").read_text().split())
    assert f"`tests/tracks/test_bad_input.py` holds {len(CASES)} such command lines and environments" in text
