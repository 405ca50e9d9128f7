"""Bad input to scripts/mutants.py: one line on stderr, exit 2, nothing written.

Each case calls the script's `main(argv)` as the command line does and
checks the three halves of the project's rule: the status is 2, stderr is
exactly one line naming what is wrong, and no file was written (--keep
stays as it was).
"""

import pytest

from scripts import mutants

pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model


def refused(main, argv, capsys):
    """The one line `main(argv)` printed on stderr, after checking it returned 2 and printed one line only."""
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), (argv, err)
    return err


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
