"""Commit messages as the project writes them: a subject of at most 72 characters, then a body.

    python scripts/check_commits.py --message FILE     # one message (the commit-msg hook)
    python scripts/check_commits.py --since COMMIT     # every commit after COMMIT (CI)

The subject says what changed; the body, after a blank line, says why, with
the figures. A merge needs no body (its subject names the branch). The
hook is `.githooks/commit-msg`: `git config core.hooksPath .githooks`
turns it on in a clone (docs/maintainers.md). CI checks the commits after
the one recorded in `.ci/commits_checked_from`, the first commit held to
this rule; the history before it is left as it was written.

Exit 0 when every message passes, 1 with one line per problem otherwise,
2 for a bad command line. Standard library only.
"""

import argparse
import pathlib
import subprocess
import sys

MAX_SUBJECT = 72


def problems(message, merge=False):
    """The rule's problems with one commit message (git's comment lines already removed)."""
    lines = message.rstrip("\n").splitlines()
    subject = lines[0].strip() if lines else ""
    found = []
    if not subject:
        found.append("the subject is empty")
    elif len(subject) > MAX_SUBJECT:
        found.append(f"the subject has {len(subject)} characters, more than {MAX_SUBJECT}: "
                     "say what changed there and why in the body")
    if len(lines) > 1 and lines[1].strip():
        found.append("the second line is not blank: a blank line separates the subject from the body")
    if not merge and not any(line.strip() for line in lines[1:]):
        found.append("there is no body: say why, with the figures, after a blank line")
    return found


def _message_file(path):
    text = pathlib.Path(path).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def _git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def _commits_since(base):
    """[(hash, message, is_merge)] of the commits after `base` on HEAD's history, oldest first."""
    hashes = _git("rev-list", "--reverse", f"{base}..HEAD").split()
    commits = []
    for commit in hashes:
        parents = _git("rev-list", "--parents", "-n", "1", commit).split()[1:]
        commits.append((commit, _git("log", "-1", "--format=%B", commit), len(parents) > 1))
    return commits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--message", help="a commit message file (the commit-msg hook's argument)")
    which.add_argument("--since", help="check every commit after this one on HEAD's history")
    args = parser.parse_args(argv)
    if args.message:
        found = [(None, problem) for problem in problems(_message_file(args.message))]
    else:
        base = args.since
        if subprocess.run(["git", "cat-file", "-e", f"{base}^{{commit}}"], capture_output=True).returncode:
            # A shallow clone without the base: check what it has, the newest commit.
            print(f"check_commits: {base[:12]} is not in this clone (shallow?); checking HEAD only")
            base = "HEAD~1" if subprocess.run(["git", "cat-file", "-e", "HEAD~1^{commit}"],
                                              capture_output=True).returncode == 0 else None
        try:
            commits = _commits_since(base) if base else [
                (_git("rev-parse", "HEAD").strip(), _git("log", "-1", "--format=%B"), False)]
        except subprocess.CalledProcessError as error:
            print(f"check_commits: git cannot list the commits after {args.since}: "
                  f"{error.stderr.strip() or error}", file=sys.stderr)
            return 2
        found = [(commit, problem) for commit, message, merge in commits for problem in problems(message, merge)]
        print(f"check_commits: {len(commits)} commit(s) after {(base or 'the root')[:12]}, "
              f"{len({commit for commit, _ in found})} with problems")
    for commit, problem in found:
        print(f"{commit[:12] + ': ' if commit else ''}{problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
