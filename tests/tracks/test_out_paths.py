"""An `--out` given as `~/...` (quoted, so the shell left it) is made in the home folder, where its checks looked."""

import pytest

from track_helpers import run_cli
from tracks.__main__ import main as tracks_main

pytestmark = pytest.mark.no_keras_reset  # collect writes files; nothing here builds a model


def test_collect_makes_a_quoted_tilde_out_in_the_home_folder(tmp_path, capsys, monkeypatch):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    download = tmp_path / "download" / "Jane Doe_123456_assignsubmission_file_"
    download.mkdir(parents=True)
    (download / "ex5_bounds.py").write_text("EXERCISE = 5\n")
    code, _, err = run_cli(tracks_main, ["collect", tmp_path / "download", "--out", "~/class"], capsys)
    assert code == 0, err
    assert (home / "class").is_dir() and not (work / "~").exists()
    # And where the home folder's place is a file, the refusal names it, with nothing made in the working folder.
    (home / "blocked").write_text("a file")
    code, _, err = run_cli(tracks_main, ["collect", tmp_path / "download", "--out", "~/blocked/class"], capsys)
    assert code == 2 and "is a file, not a directory" in err and err.count("\n") == 1
    assert not (work / "~").exists()
