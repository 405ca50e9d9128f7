"""scripts/check_commits.py: the commit-message rule the hook and CI apply."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import check_commits  # noqa: E402

pytestmark = pytest.mark.no_keras_reset

BODY = "\n\nWhy, with the figures: 46 s for a class of 30.\n"


@pytest.mark.parametrize("message, words", [
    ("x" * 73 + BODY, "the subject has 73 characters, more than 72"),
    ("Lower a preset's sample sizes\n", "there is no body"),
    ("Lower a preset's sample sizes\nno blank line here\n", "the second line is not blank"),
    ("\n\nonly a body\n", "the subject is empty"),
])
def test_each_broken_rule_is_named(message, words):
    assert any(words in problem for problem in check_commits.problems(message))


def test_a_good_message_and_a_merge_pass():
    assert check_commits.problems("x" * 72 + BODY) == []
    assert check_commits.problems("Merge branch 'i41'\n", merge=True) == []


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def test_since_checks_only_the_commits_after_the_base_and_the_hook_refuses(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "an old subject " + "y" * 80)  # before the rule
    _git(repo, "commit", "-q", "--allow-empty", "-m", "Good subject" + BODY)
    monkeypatch.chdir(repo)
    assert check_commits.main(["--since", "HEAD~1"]) == 0
    # A base the clone lacks (a shallow clone in CI): the newest commit alone is checked, not the old one.
    assert check_commits.main(["--since", "HEAD~2"]) == 0
    assert "is not in this clone (shallow?); checking HEAD only" in capsys.readouterr().out
    _git(repo, "commit", "-q", "--allow-empty", "-m", "No body")
    assert check_commits.main(["--since", "HEAD~2"]) == 1
    assert "there is no body" in capsys.readouterr().err
    message = tmp_path / "MSG"
    message.write_text("# a git comment line is not the subject\n" + "z" * 80 + BODY)
    hook = subprocess.run([str(ROOT / ".githooks" / "commit-msg"), str(message)], capture_output=True, text=True,
                          cwd=ROOT)
    assert hook.returncode == 1 and "the subject has 80 characters" in hook.stderr
