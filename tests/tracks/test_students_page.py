"""The students' way in (docs/students.md): linked first, and a glossary of every term the handouts use.

The rule is mechanical. A handout marks a term it uses as a link to the
term's glossary entry, `[the stream](students.md#the-stream)`, a heading
under "## Glossary" of docs/students.md. Here:

- every such link resolves to a glossary heading (a term whose entry is
  missing fails), and so does every `#anchor` link of students.md itself;
- every technical word of TERMS that a handout uses (outside code) is
  linked at least once in that handout;
- every word that looks technical (CamelCase, an acronym, a hyphenated
  compound: `LayerNorm`, `CNN`, `pre-activation`) in a handout is one of
  TERMS or of NOT_TERMS, so a term added to a handout later fails here
  until it has an entry and a link.
"""

import pathlib
import re
import unicodedata

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HANDOUTS = ("handout_vision.md", "handout_language.md")

# A technical word or phrase of the handouts (a regular expression, case-insensitive) -> its glossary anchor.
TERMS = {
    r"residual blocks?": "residual-block",
    r"branch(?:es)?": "branch",
    r"shortcuts?": "shortcut",
    r"plain (?:twin|stack|networks?|nets?|blocks?)": "plain-network",
    r"(?:residual )?stream": "the-stream",
    r"jacobians?": "jacobian",
    r"spectral norm": "spectral-norm",
    r"(?:gradient )?gain": "gradient-gain",
    r"scalar chain": "scalar-chain",
    r"float32": "float32",
    r"identity[- ]initiali[sz](?:ation|ed)|zero-branch": "identity-initialisation",
    r"zero[- ]gammas?": "zero-gamma",
    r"fixup": "fixup",
    r"rezero": "rezero",
    r"pre-activation": "pre-activation-block",
    r"option [ab]": "option-a-and-option-b",
    r"normali[sz]ation|batchnorm": "batchnorm",
    r"layernorm": "layernorm",
    r"pre-ln": "pre-ln",
    r"post-ln": "post-ln",
    r"sublayers?": "sublayer",
    r"attention": "attention",
    r"feed-forward": "feed-forward-network",
    r"warm-?up": "warm-up",
    r"epochs?": "epoch",
    r"(?:training|test) error": "training-error-and-test-error",
    r"overfit(?:s|ting)?": "overfitting",
    r"degradation problem": "degradation-problem",
    r"paths?": "paths",
    r"lesions?": "lesion",
    r"dynamics": "dynamics",
    r"(?:effective )?rank": "rank-and-effective-rank",
    r"unigram|character frequencies": "unigram-loss",
    r"logit lens": "logit-lens",
    r"findings?": "finding",
    r"cnns?": "cnn",
}
# Words that look technical but are names or what the course assumes (some Keras, NumPy, a data set).
NOT_TERMS = {"NumPy", "CIFAR-10", "GPT-2", "learning-rate", "Transformers", "Transformer"}
LOOKS_TECHNICAL = re.compile(r"\b[A-Z][a-z]+[A-Z][\w-]*|\b[A-Z][A-Z0-9]+(?:-[\w]+)?\b|\b[A-Za-z]+-[A-Za-z]+\b")
LINK = re.compile(r"\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]*)\)")


def slug(heading):
    """The anchor MkDocs (Python-Markdown's toc) gives a heading; GitHub gives the same to the glossary's."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def glossary(text):
    """{anchor: heading} of the `### ` headings under "## Glossary"."""
    body = re.search(r"^## Glossary\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert body, "docs/students.md has no ## Glossary"
    return {slug(heading): heading for heading in re.findall(r"^### (.+)$", body.group(1), re.M)}


def prose(text):
    """`text` without code blocks, code spans, comments and link targets: what a reader reads as words."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = LINK.sub(lambda match: match["text"], text)
    return re.sub(r"`[^`]*`", "", text)


def glossary_problems(students, handouts):
    """Every broken glossary link, unlinked term and unlisted technical word.

    `students`: the text of docs/students.md; `handouts`: {name: text}.
    """
    entries = glossary(students)
    problems = [f"students.md: glossary heading {heading!r} has characters GitHub and MkDocs anchor "
                "differently (use letters, digits, single spaces and hyphens)"
                for heading in entries.values() if not re.fullmatch(r"[A-Za-z0-9]+(?:[ -][A-Za-z0-9]+)*", heading)]
    problems += [f"TERMS: {pattern!r} points at {anchor!r}, which is no glossary entry"
                 for pattern, anchor in TERMS.items() if anchor not in entries]
    anchors = {slug(heading) for heading in re.findall(r"^#{2,6} (.+)$", students, re.M)}
    for match in LINK.finditer(students):
        if match["target"].startswith("#") and match["target"][1:] not in anchors:
            problems.append(f"students.md: the link {match[0]!r} names no heading")
    for name, text in handouts.items():
        linked = set()
        for match in LINK.finditer(text):
            page, _, anchor = match["target"].partition("#")
            if page == "students.md" and anchor:
                if anchor not in anchors:
                    problems.append(f"{name}: the link {match[0]!r} names no heading of students.md")
                linked.add(anchor)
        words = prose(text)
        for pattern, anchor in TERMS.items():
            if re.search(rf"\b(?:{pattern})\b", words, re.I) and anchor not in linked:
                problems.append(f"{name}: uses {pattern!r} but links it nowhere to students.md#{anchor}")
        for word in sorted(set(LOOKS_TECHNICAL.findall(words))):
            known = word in NOT_TERMS or any(re.fullmatch(pattern, word, re.I) or re.search(
                rf"\b(?:{pattern})\b", word, re.I) for pattern in TERMS)
            if not known:
                problems.append(f"{name}: {word!r} looks like a term, and neither TERMS nor NOT_TERMS has it "
                                "(give it a glossary entry in students.md and link it)")
    return problems


def _pages():
    return (DOCS / "students.md").read_text(), {name: (DOCS / name).read_text() for name in HANDOUTS}


def test_every_term_the_handouts_use_has_a_glossary_entry_and_a_link():
    students, handouts = _pages()
    assert len(glossary(students)) >= 30
    problems = glossary_problems(students, handouts)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name, old, new, expected", [
    # a new technical word in a handout, without an entry
    ("handout_vision.md", "What happens, and why?", "What happens, and why? Try GroupNorm.", "'GroupNorm' looks like"),
    ("handout_language.md", "Which hurts more", "Which skip-connection hurts more", "'skip-connection' looks like"),
    # a term the handout uses, its link removed
    ("handout_vision.md", "[scalar chain](students.md#scalar-chain)", "scalar chain",
     "uses 'scalar chain' but links it nowhere"),
    # a link to an entry that does not exist
    ("handout_language.md", "(students.md#logit-lens)", "(students.md#the-logit-lens)",
     "names no heading of students.md"),
])
def test_a_term_without_its_entry_or_link_is_reported(name, old, new, expected):
    students, handouts = _pages()
    assert old in handouts[name]
    handouts[name] = handouts[name].replace(old, new, 1)
    problems = glossary_problems(students, handouts)
    assert any(expected in problem for problem in problems), problems


def test_a_glossary_entry_removed_breaks_the_links_to_it():
    students, handouts = _pages()
    edited = re.sub(r"^### Fixup\n\n.*?(?=^### )", "", students, flags=re.M | re.S)
    assert edited != students
    problems = glossary_problems(edited, handouts)
    assert any("'fixup', which is no glossary entry" in problem for problem in problems)
    assert any("handout_vision.md: the link '[Fixup](students.md#fixup)'" in problem for problem in problems)


def test_slugs_are_what_mkdocs_writes():
    assert slug("Option A and option B") == "option-a-and-option-b"
    assert slug("Pre-LN") == "pre-ln"
    assert slug('When a finding says "does not hold"') == "when-a-finding-says-does-not-hold"
    assert slug("Before you look: the one surprise") == "before-you-look-the-one-surprise"


def test_students_find_their_page_first():
    readme = (ROOT / "README.md").read_text()
    first_student = readme.index("(docs/students.md)")
    for instructors in ("(docs/lab_vision.md)", "(docs/session_plan.md)", "(docs/grading.md)"):
        assert first_student < readme.index(instructors), instructors
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    assert "students.md" in nav and nav.index("students.md") < nav.index("For instructors")
    assert nav.index("students.md") < min(nav.index(page) for page in ("lab_vision.md", "running.md"))


def test_the_students_page_says_what_to_do():
    students, _ = _pages()
    sections = re.findall(r"^## (.+)$", students, re.M)
    for wanted in ("Install", "What to run, in what order", "Before you look: the one surprise",
                   "Per figure, what to look for", "What to hand in", 'When a finding says "does not hold"',
                   "Glossary"):
        assert wanted in sections, wanted
    for command in ('pip install -e ".[notebooks]"', "python -m tracks exercises start", "python -m tracks check",
                    "EXERCISE = N", "python -m tracks.vision compare", "python -m tracks.language compare"):
        assert command in students, command
    surprise = re.search(r"^## Before you look.*?(?=^## )", students, re.M | re.S).group(0)
    assert "<!-- ref vision-cifar10-s0 initialisation.plain-32.gradient_gain" in surprise  # measured, tagged
    times = re.search(r"^## What to run.*?(?=^## )", students, re.M | re.S).group(0)
    assert len(re.findall(r"<!-- ref [\w-]+ reference\.seconds min -->", times)) >= 6
    assert len(re.findall(r"<!-- ref [\w-]+ reference\.machine cpu -->", times)) >= 5  # on which CPU


def test_every_figure_of_the_reference_runs_has_what_to_look_for():
    students, _ = _pages()
    figures = re.search(r"^## Per figure.*?(?=^## )", students, re.M | re.S).group(0)
    made = {path.name for track in ("vision", "language")
            for path in (DOCS / "reference").glob(f"{track}-*/*.png")}
    assert len(made) >= 14
    missing = sorted(name for name in made if f"`{name}`" not in figures)
    assert not missing, missing


def _markdown(notebook):
    import json

    cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")


@pytest.mark.parametrize("notebook", ["vision.ipynb", "language.ipynb"])
def test_each_notebook_names_the_extra_that_installs_jupyter(notebook):
    text = _markdown(notebook)
    install, run = text.find('pip install -e ".[notebooks]"'), text.find(f"jupyter notebook notebooks/{notebook}")
    assert 0 <= install < run, "the notebook says how to get Jupyter before it says to run it"
    extras = re.search(r"^notebooks = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert extras and '"notebook' in extras.group(1) and "ipykernel" in extras.group(1)


def _text_cell():
    import json

    cells = json.loads((ROOT / "notebooks" / "language.ipynb").read_text())["cells"]
    (cell,) = [cell for cell in cells if cell["cell_type"] == "code" and "TEXT_PATH = " in "".join(cell["source"])]
    return "".join(line for line in cell["source"] if not line.startswith("%"))


def test_the_language_notebook_says_which_text_it_reads(tmp_path, capsys):
    """TEXT_PATH unset: Python's documentation, said out loud; set: that file; a missing file: an error."""
    code = _text_cell()
    namespace = {}
    exec(compile(code, "language.ipynb", "exec"), namespace)
    out = capsys.readouterr().out
    assert "TEXT_PATH is not set" in out and "pydoc" in out and namespace["data"].name == "pydoc"
    text = tmp_path / "play.txt"
    text.write_text("ROMEO: a line of a play.\n" * 200)
    namespace = {}
    exec(compile(code.replace("TEXT_PATH = None", f"TEXT_PATH = {str(text)!r}"), "language.ipynb", "exec"),
         namespace)
    assert namespace["text"] == namespace["data"].train_text and namespace["text"].startswith("ROMEO:")
    assert "TEXT_PATH is not set" not in capsys.readouterr().out
    with pytest.raises(ValueError, match="text file not found"):
        exec(compile(code.replace("TEXT_PATH = None", f"TEXT_PATH = {str(tmp_path / 'none.txt')!r}"),
                     "language.ipynb", "exec"), {})
