"""No file of the product names a path outside the repository (issue 63).

The product: the package (residual_keras/, tracks/), README.md, docs/ (the
committed reference runs' records included), the notebooks, solutions/ and
the tests' data (tests/fixtures/, tests/exercise_fixtures/). A path that
leaves the repository with `../`, or names a place only the development
machines have (/work/..., /root/...), is a path no user has: the language
notebook once read `../shared/data/tinyshakespeare.txt` and silently fell
back when it was missing. scripts/doc_numbers.py's `outside_paths` is the
rule; a run record (a reference run's config.json or results.json) also
names its data as `folder:PATH` or `text:PATH`, never by a local absolute
path (its reference.json's command already does).
"""

import json
import pathlib
import re
import subprocess

import pytest

from scripts import doc_numbers

ROOT = doc_numbers.ROOT
PRODUCT = ("README.md", "docs", "notebooks", "residual_keras", "tracks", "solutions", "tests/fixtures",
           "tests/exercise_fixtures", "pyproject.toml", "MANIFEST.in")
DATA_FIELDS = ("data", "dataset", "source")
LOCAL_DATA = re.compile(r"^(?:folder|text):/")


def product_files():
    """The product's files under version control (text files only), as paths relative to the root."""
    listed = subprocess.run(["git", "ls-files", "-z", *PRODUCT], cwd=ROOT, capture_output=True, check=True)
    names = [name for name in listed.stdout.decode().split("\0") if name]
    if not names:
        pytest.skip("not a git checkout: no file list")
    return [name for name in names if (ROOT / name).is_file() and not name.endswith((".png", ".keras", ".npz"))]


def _data_paths(value, where):
    """Local absolute data paths in a run record's `data`, `dataset` or fingerprint `source` fields."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in DATA_FIELDS and isinstance(item, str) and LOCAL_DATA.match(item):
                found.append(f"{where}: {key} {item!r} names a local path (record it as folder:PATH or text:PATH)")
            else:
                found += _data_paths(item, where)
    elif isinstance(value, list):
        for item in value:
            found += _data_paths(item, where)
    return found


def problems_of(name, text):
    """Every path outside the repository that the product file `name` (its content `text`) names."""
    path = ROOT / name
    found = doc_numbers.outside_paths(text, name, path.parent)
    if name.startswith("docs/reference/") and path.name in ("config.json", "results.json"):
        found += _data_paths(json.loads(text), name)
    return found


def _problems(names):
    problems = []
    for name in names:
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        problems += problems_of(name, text)
    return problems


def test_no_product_file_names_a_path_outside_the_repository():
    names = product_files()
    assert len(names) > 200 and "notebooks/language.ipynb" in names
    problems = _problems(names)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name, text, expected", [
    ("notebooks/language.ipynb", '"text_path = \\"../shared/data/tinyshakespeare.txt\\""', "leads outside"),
    ("tracks/language/data.py", 'DEFAULT = "/work/shared/data/tinyshakespeare.txt"', "a place on one machine"),
    ("docs/running.md", "the data are in /root/tensorflow_datasets", "a place on one machine"),
    ("docs/reference/vision-x-s0/config.json", '{"data": "folder:/tmp/data/cifar10-jpeg"}', "names a local path"),
    ("docs/reference/vision-x-s0/results.json",
     '{"models": [], "data_fingerprint": {"source": "text:/tmp/input.txt"}}', "names a local path"),
])
def test_a_path_no_user_has_is_reported(name, text, expected):
    problems = problems_of(name, text)
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.parametrize("name, text", [
    ("docs/running.md", "`~/tensorflow_datasets`, `/proc/meminfo`, `/dev/nvidia0`, [home](../README.md)"),
    ("docs/gpu_and_docker.md", '-v "$PWD/runs:/home/student/runs" ... --data folder:/data/images'),
    ("docs/reference/vision-x-s0/config.json", '{"data": "folder:PATH", "seed": 0}'),
    ("notebooks/vision.ipynb", "%pip install -e /content/<repository>"),
])
def test_paths_every_user_has_are_not_reported(name, text):
    assert problems_of(name, text) == []
