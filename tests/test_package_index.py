"""What a package index and an sdist user see (issue 42): a README without broken links, the tested floor.

(.ci/package_check builds the sdist, checks it holds the tests and runs the
library's tests from the unpacked sdist.)
"""

import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_package_index_readme_has_no_relative_link():
    # README.md links to docs/ by relative paths, which a package index cannot follow.
    readme = (ROOT / PROJECT["readme"]).read_text()
    targets = re.findall(r"\]\(([^)]+)\)", readme) + re.findall(r"<img [^>]*src=\"([^\"]+)\"", readme)
    relative = [target for target in targets if not re.match(r"https?://", target)]
    assert not relative, relative


def test_requires_python_is_the_version_ci_tests():
    floor = re.fullmatch(r">=(\d+)\.(\d+)", PROJECT["requires-python"])
    assert floor, PROJECT["requires-python"]
    assert (int(floor[1]), int(floor[2])) == (3, 11)  # .ci/run's venv is Python 3.11
    assert f"Programming Language :: Python :: {floor[1]}.{floor[2]}" in PROJECT["classifiers"]
    assert sys.version_info[:2] >= (3, 11)


def test_the_sdist_rules_include_the_library_tests_and_no_answer():
    rules = (ROOT / "MANIFEST.in").read_text().split("\n")
    assert "graft tests" in rules and (ROOT / "tests" / "conftest.py").exists()
    # anyone can download an sdist: the answers stay in the repository (.ci/package_check lists it)
    assert not any(rule.split()[:2] in (["graft", "solutions"], ["include", "solutions"]) for rule in rules if rule)
    assert {"prune tests/tracks", "prune tests/exercise_fixtures", "exclude docs/lab_*.md"} <= set(rules)
