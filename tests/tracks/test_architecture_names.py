"""docs/architecture.md names only what exists: every file, module, function, class and field it mentions.

The recipes' test (test_recipes.py) follows the document's steps; this one
reads every name the document gives a reader to look up, and finds it in the
source, without importing it (the parse is `ast`'s):

- a file (`tracks/vision/source.py`, `steps.py`, or a name in the diagrams
  such as prepare.py): a file of that path, or ending so, in the repository;
- a dotted name (`resume.check_run`, `tracks.common.track.Track`,
  `TRACK.parts.load_data(ctx)`, `tracks/common/run.py: train_one_run`): each
  part defined where the one before it says, a module's names in that module
  and a class's members in that class or its bases (a method's return
  annotation gives the class of what follows it);
- a bare name (`fit_defaults`, `plot_banner`): defined somewhere (a module, a
  function, a class, a class's field or attribute, a parameter).

Formulas (`shortcut(x) + branch(x)`), command lines' options, run outputs
(results.json) and the placeholders in angle brackets are not names, and are
left out; so are Keras' and TensorFlow's own (`keras.ops`, `model.fit`).
Issue 68 found `plan.resources`, `_conv_layers.py` and a `process` module
named after they were gone: a name removed from the code now fails here.
"""

import ast
import builtins
import pathlib
import re

import pytest

pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "architecture.md"
PACKAGES = ("residual_keras", "tracks", "scripts", "tests")
# How the document calls an object by the name of the variable that usually holds it.
INSTANCES = {"rk": "residual_keras", "TRACK": "Track", "track": "Track", "ctx": "RunContext",
             "parts": "TrackParts", "block": "BlockLayer"}
# Keras' and TensorFlow's names, not this repository's.
OUTSIDE = ("keras.", "tf.", "model.")
# Backticked words that are no code name, each with what it is.
NOT_NAMES = {
    "f": "the f of a formula (`f(track, argv)`, a command's function)",
    "smoke": "a preset's name (a key of PRESETS)",
    "mixed_bfloat16": "a Keras dtype policy's name",
    "_private": "what the rule on private names is about",
}
FILE_SUFFIXES = (".py", ".md", ".json", ".csv", ".yml", ".png", ".keras", ".toml")
IDENTIFIER = r"[A-Za-z_][A-Za-z_0-9]*"
NAME = re.compile(rf"^\.?({IDENTIFIER}(?:\.{IDENTIFIER})*)\.?(?:\(.*\))?(?:\s*=.*)?$", re.DOTALL)


class Source:
    """What the repository's Python files define, by module and by class, read with `ast`."""

    def __init__(self, packages=PACKAGES):
        self.files = sorted(path.relative_to(ROOT).as_posix() for package in packages
                            for path in (ROOT / package).rglob("*") if path.is_file()
                            and "__pycache__" not in path.parts)
        self.modules = {}  # dotted name -> {name: node or module name}
        self.classes = {}  # class name -> [(members, base names)]
        self.defined = set()  # every name defined anywhere: modules, functions, classes, members, parameters
        for file in self.files:
            if file.endswith(".py"):
                self._read(file)

    def _read(self, file):
        dotted = file[:-3].replace("/", ".").removesuffix(".__init__")
        tree = ast.parse((ROOT / file).read_text(), filename=file)
        names = self.modules.setdefault(dotted, {})
        self.defined.update(dotted.split("."))
        parent = dotted.rpartition(".")[0]
        if parent:
            self.modules.setdefault(parent, {})[dotted.rpartition(".")[2]] = dotted
        for node in tree.body:
            for name, value in _bound(node):
                names[name] = value
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args
                self.defined.update(argument.arg for argument in (
                    *arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs))
            elif isinstance(node, ast.ClassDef):
                members = {}
                for statement in node.body:
                    members.update(_bound(statement))
                for inner in ast.walk(node):
                    if (isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store)
                            and isinstance(inner.value, ast.Name) and inner.value.id == "self"):
                        members.setdefault(inner.attr, inner)
                bases = [base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
                         for base in node.bases]
                self.classes.setdefault(node.name, []).append((members, bases))
                self.defined.add(node.name)
                self.defined.update(members)
        self.defined.update(names)

    def member(self, class_name, name, seen=()):
        """The node that defines `name` in class `class_name` or one of its bases; None where none does."""
        for members, bases in self.classes.get(class_name, []):
            if name in members:
                return members[name]
            for base in bases:
                if base and base not in seen:
                    found = self.member(base, name, (*seen, class_name))
                    if found is not None:
                        return found
        return None

    def modules_named(self, first):
        """The dotted names of the modules `first` may stand for: a full dotted name, or a module's last part."""
        if first in self.modules:
            return [first]
        return [dotted for dotted in self.modules if dotted.rpartition(".")[2] == first]

    def resolve(self, parts):
        """None where the dotted name `parts` is defined as the document says; else what is missing."""
        first, rest = INSTANCES.get(parts[0], parts[0]), list(parts[1:])
        if first in self.classes:
            return self._in_class(first, rest, first)
        # The longest run of parts that names a module (tracks.common.cli, then main in it).
        for length in range(len(parts), 0, -1):
            prefix = ".".join([first, *parts[1:length]]) if length > 1 else first
            candidates = self.modules_named(prefix) if length == 1 else (
                [prefix] if prefix in self.modules else [])
            if candidates:
                rest = list(parts[length:])
                if not rest:
                    return None
                missing = [self._in_module(module, rest) for module in candidates]
                return None if None in missing else missing[0]
        if len(parts) == 1:
            return None if first in self.defined or hasattr(builtins, first) else f"{first}: defined nowhere"
        return f"{first}: no module or class of that name"

    def _in_module(self, module, rest):
        names = self.modules[module]
        if rest[0] not in names:
            return f"{rest[0]}: not in {module}"
        value = names[rest[0]]
        if len(rest) == 1:
            return None
        if isinstance(value, str):  # a submodule
            return self._in_module(value, rest[1:])
        if isinstance(value, ast.ClassDef):
            return self._in_class(value.name, rest[1:], f"{module}.{value.name}")
        if isinstance(value, ast.alias):  # imported: look for it where it comes from
            return self.resolve([value.name, *rest[1:]])
        return f"{'.'.join(rest)}: {module}.{rest[0]} is no module or class"

    def _in_class(self, class_name, rest, where):
        for index, name in enumerate(rest):
            node = self.member(class_name, name)
            if node is None:
                return f"{name}: not a member of {where}"
            returns = getattr(node, "returns", None)
            if index + 1 < len(rest):
                if returns is None:
                    return f"{rest[index + 1]}: {where}.{name} says nothing of what it returns"
                class_name = returns.attr if isinstance(returns, ast.Attribute) else getattr(
                    returns, "id", getattr(returns, "value", None))
                where = class_name
        return None


def _bound(statement):
    """(name, node) for each name a module- or class-level statement binds."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield statement.name, statement
    elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    yield node.id, statement
    elif isinstance(statement, (ast.Import, ast.ImportFrom)):
        for alias in statement.names:
            if isinstance(statement, ast.ImportFrom):
                origin = "." * statement.level + (statement.module or "")
                yield alias.asname or alias.name, ast.alias(name=f"{origin}.{alias.name}".lstrip("."))
            else:
                yield alias.asname or alias.name.split(".")[0], ast.alias(name=alias.name.split(".")[0])
    elif isinstance(statement, (ast.If, ast.Try)):
        for inner in [*statement.body, *getattr(statement, "orelse", []), *getattr(statement, "finalbody", [])]:
            yield from _bound(inner)


FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def spans(text):
    """The backticked spans of `text` outside fenced code blocks, whitespace made single spaces; in the fenced
    blocks (the diagrams), their dotted names (`experiment.grid`) and keywords (`resources=`), as spans."""
    found = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", FENCED.sub("", text))]
    for block in FENCED.findall(text):
        for dotted in re.findall(rf"(?<![\w/.<>-])({IDENTIFIER}(?:\.{IDENTIFIER})+)", block):
            if not dotted.endswith(FILE_SUFFIXES + (".csv",)):
                found.append(dotted)
        found += [f"{keyword}=" for keyword in re.findall(rf"\b({IDENTIFIER})=", block)]
    return found


def file_names(text):
    """Every path to a Python file the text names, in backticks or not (the diagrams name files bare); a
    placeholder (`harness/exN.py`, exercise N's) is no file."""
    named = re.findall(r"(?<![\w/.<>-])((?:[\w.-]+/)*[\w]+\.py)\b", text)
    return sorted({name for name in named if not re.search(r"\bexN\b", name)})


def problems(text, source):
    """['what: why'] for each file and name of `text` the repository lacks."""
    found = []
    for file in file_names(text):
        if not any(path == file or path.endswith("/" + file) for path in source.files):
            found.append(f"{file}: no such file")
    for span in spans(text):
        path, _, name = span.partition(": ")
        if "<" in span or span.startswith(("--", "python ")) or span in NOT_NAMES or span.startswith(OUTSIDE):
            continue
        if "/" in path or path.endswith(FILE_SUFFIXES):
            if path.endswith(".py") and name and NAME.match(name):
                module = path[:-3].replace("/", ".")
                candidates = [dotted for dotted in source.modules if dotted == module or dotted.endswith("." + module)]
                parts = NAME.match(name).group(1).split(".")
                missing = [source._in_module(dotted, parts) for dotted in candidates] or [f"{path}: no such module"]
                if None not in missing:
                    found.append(f"`{span}`: {missing[0]}")
            elif "/" in path and not (ROOT / path.rstrip("/")).exists() and not path.endswith(FILE_SUFFIXES):
                found.append(f"`{span}`: no such folder")
            continue
        match = NAME.match(span)
        if match is None:  # a formula, a tuple, a command: no name to look up
            continue
        names = [match.group(1)]
        value = span.partition("=")[2].strip()  # `resources=prepare.resources`: the value is a name too
        if re.fullmatch(rf"{IDENTIFIER}(?:\.{IDENTIFIER})+", value) and not value.startswith("self."):
            names.append(value)
        for name in names:
            missing = source.resolve(name.split("."))
            if missing:
                found.append(f"`{span}`: {missing}")
    return found


@pytest.fixture(scope="module")
def source():
    return Source()


def test_every_name_the_document_gives_exists(source):
    assert problems(DOCUMENT.read_text(), source) == []


def test_the_document_names_what_is_checked(source):
    """A guard: the spans and files read are the document's (an empty list would pass vacuously)."""
    named = set(spans(DOCUMENT.read_text()))
    assert {"resume.check_run", "parts.fit_defaults", "cpu_bf16", "RunContext", "tracks/vision/source.py"} <= named
    assert {"tracks/common/run.py", "steps.py", "prepare.py"} <= set(file_names(DOCUMENT.read_text()))
    assert len(named) > 200


@pytest.mark.parametrize("drift, why", [
    ("`resources=plan.resources`", "plan: no module or class of that name"),
    ("the blocks' sublayers, _conv_layers.py", "_conv_layers.py: no such file"),
    ("`process.configure_process`", "process: no module or class of that name"),
    ("`resume.check_plan`", "check_plan: not in tracks.common.resume"),
    ("`parts.resources`", "resources: not a member of TrackParts"),
    ("`TRACK.parts.fetch_data(ctx)`", "fetch_data: not a member of TrackParts"),
    ("`tracks/vision/prepare.py: parse_source`", "parse_source: not in tracks.vision.prepare"),
    ("`ConvBlock`", "ConvBlock: defined nowhere"),
    ("`tracks/vision/planning/`", "no such folder"),
])
def test_a_name_the_code_lacks_fails(source, drift, why):
    """The drift issue 68 found, and names one edit away from real ones, are each refused with the reason."""
    assert [problem for problem in problems(drift, source) if why in problem], problems(drift, source)


def test_a_name_removed_from_the_code_fails():
    """Removing a definition (here `fit_defaults` from every module and class) makes the document's name fail."""
    source = Source()  # its own: the one the other tests share stays whole
    assert source.resolve(["parts", "fit_defaults"]) is None
    for module in source.modules.values():
        module.pop("fit_defaults", None)
    for members, _ in source.classes["TrackParts"]:
        members.pop("fit_defaults")
    source.defined.discard("fit_defaults")
    assert "fit_defaults" in " ".join(problems(DOCUMENT.read_text(), source))
