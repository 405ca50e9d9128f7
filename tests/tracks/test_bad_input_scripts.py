"""Bad input to scripts/replot.py and scripts/mutants.py: one line on stderr, exit 2, nothing written.

Each case calls the script's `main(argv)` as the command line does and
checks the three halves of the project's rule: the status is 2, stderr is
exactly one line naming what is wrong, and no file was written (the run
directory keeps its bytes, --out and --keep stay as they were).
"""

import hashlib
import json
import pathlib
import shutil
import sys

import pytest

from scripts import mutants

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOY = ROOT / "docs" / "reference" / "toy-spirals-s0"
sys.path.insert(0, str(ROOT / "scripts"))
import replot  # noqa: E402

pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model


def digests(directory):
    return {path.relative_to(directory): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def refused(main, argv, capsys):
    """The one line `main(argv)` printed on stderr, after checking it returned 2 and printed one line only."""
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), (argv, err)
    return err


@pytest.mark.parametrize("script, argv", [(replot, []), (replot, ["RUN", "--outt", "DIR"]),
                                          (mutants, ["--seed", "abc"]), (mutants, ["--jobs", "two", "--seed", "1"])])
def test_a_bad_argument_is_one_line_and_exit_status_2(script, argv, capsys):
    with pytest.raises(SystemExit) as exit:
        script.main(argv)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), (argv, err)


@pytest.fixture
def toy_run(tmp_path):
    run = tmp_path / "toy-spirals-s0"
    shutil.copytree(TOY, run)
    return run


# scripts/replot.py ------------------------------------------------------------------------------------


@pytest.mark.parametrize("out", ["notes.txt", "notes.txt/below"])
def test_replot_refuses_an_out_that_is_a_file(toy_run, tmp_path, capsys, out):
    (tmp_path / "notes.txt").write_text("my notes\n")
    before = digests(tmp_path)
    err = refused(replot.main, [str(toy_run), "--out", str(tmp_path / out)], capsys)
    assert "notes.txt is a file, not a directory" in err
    assert digests(tmp_path) == before


def test_replot_refuses_an_out_inside_the_run(toy_run, capsys):
    before = digests(toy_run)
    err = refused(replot.main, [str(toy_run), "--out", str(toy_run / "copies")], capsys)
    assert "is inside" in err
    assert digests(toy_run) == before and not (toy_run / "copies").exists()


def test_replot_checks_data_before_it_copies_the_run(toy_run, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    before = digests(toy_run)
    err = refused(replot.main, [str(toy_run), "--out", str(out), "--data", "bogus:x"], capsys)
    assert "--data bogus:x" in err
    assert list(out.iterdir()) == [] and digests(toy_run) == before


@pytest.mark.parametrize("key", ["stream_rms", "stream_grad_norms", "block_weight_grad_norms"])
@pytest.mark.parametrize("to_out", [False, True])
def test_replot_refuses_results_without_a_number_it_draws(toy_run, tmp_path, capsys, key, to_out):
    results = json.loads((toy_run / "results.json").read_text())
    label = sorted(results["initialisation"])[-1]
    del results["initialisation"][label][key]
    (toy_run / "results.json").write_text(json.dumps(results))
    out = tmp_path / "out"
    out.mkdir()
    before = digests(toy_run)
    err = refused(replot.main, [str(toy_run)] + (["--out", str(out)] if to_out else []), capsys)
    assert str(toy_run / "results.json") in err and key in err and label in err
    assert digests(toy_run) == before and list(out.iterdir()) == []


@pytest.mark.parametrize("initialisation", [
    [1, 2], {"plain-2": 5}, {"plain-2": {"stream_rms": []}},
    {"plain-2": {"stream_rms": [], "stream_grad_norms": [1.0], "block_weight_grad_norms": [1.0]}},  # no batch
    {"plain-2": {"stream_rms": [1.0, 1.0], "stream_grad_norms": [1.0], "block_weight_grad_norms": [1.0]}}])
def test_replot_refuses_results_whose_initialisation_is_not_numbers_by_model(toy_run, capsys, initialisation):
    results = json.loads((toy_run / "results.json").read_text())
    results["initialisation"] = initialisation
    (toy_run / "results.json").write_text(json.dumps(results))
    before = digests(toy_run)
    err = refused(replot.main, [str(toy_run)], capsys)
    assert "results.json" in err
    assert digests(toy_run) == before


@pytest.mark.parametrize("to_out", [False, True])
def test_replot_refuses_results_the_track_cannot_read(toy_run, tmp_path, capsys, to_out):
    results = json.loads((toy_run / "results.json").read_text())
    results["schema"] = 99  # written by a newer residual_keras
    (toy_run / "results.json").write_text(json.dumps(results))
    out = tmp_path / "out"
    out.mkdir()
    before = digests(toy_run)
    err = refused(replot.main, [str(toy_run)] + (["--out", str(out)] if to_out else []), capsys)
    assert "results.json has schema 99" in err
    assert digests(toy_run) == before and list(out.iterdir()) == []


# scripts/mutants.py -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_mutants_refuses_a_seed_the_grader_refuses(tmp_path, capsys, seed):
    keep = tmp_path / "keep"
    err = refused(mutants.main, ["--seed", "1", "--seed", seed, "--exercise", "5", "--keep", str(keep)], capsys)
    assert f"--seed must be in 0..{2**32 - 1}" in err and seed in err
    assert not keep.exists()


@pytest.mark.parametrize("keep", ["notes.txt", "notes.txt/below"])
def test_mutants_refuses_a_keep_that_is_a_file(tmp_path, capsys, keep):
    (tmp_path / "notes.txt").write_text("my notes\n")
    err = refused(mutants.main, ["--seed", "1", "--exercise", "5", "--keep", str(tmp_path / keep)], capsys)
    assert "--keep" in err and "notes.txt is a file, not a directory" in err
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("text", ["equivalent = 5", "equivalent = [1, 2]", "[equivalent]\nmutant = 'k'\nwhy = 'w'",
                                  "equivalent = 'a key'"])
def test_mutants_refuses_an_equivalents_file_that_is_not_an_array_of_tables(tmp_path, capsys, text):
    equivalents = tmp_path / "equivalents.toml"
    equivalents.write_text(text + "\n")
    keep = tmp_path / "keep"
    err = refused(mutants.main, ["--seed", "1", "--exercise", "5", "--equivalents", str(equivalents),
                                 "--keep", str(keep)], capsys)
    assert str(equivalents) in err and "array of tables" in err
    assert not keep.exists()
