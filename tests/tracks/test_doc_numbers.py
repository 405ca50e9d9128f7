"""Every measured number of README.md, docs/ and the notebooks agrees with the reference run it cites.

scripts/doc_numbers.py finds the tagged numbers and the generated tables,
and on the pages a student reads the run times, growth factors, config
values and paths typed without a source; here the repository's pages are
checked, and a page edited away from its source is shown to fail (the
check can fail), the four mistakes of issue 63 among the edits.
"""

import json

import pytest

from scripts import doc_numbers


def test_every_tagged_number_and_generated_table_agrees_with_its_reference_run():
    problems = doc_numbers.check()
    assert not problems, "\n".join(problems)


def test_the_documents_carry_sourced_numbers():
    tagged = sum(len(doc_numbers.TAG.findall(path.read_text())) for path in doc_numbers.documents())
    tables = sum(len(doc_numbers.TABLE.findall(path.read_text())) for path in doc_numbers.documents())
    assert tagged >= 20 and tables >= len(doc_numbers.TABLES)


def _a_tagged_number():
    for path in doc_numbers.documents():
        text = path.read_text()
        match = doc_numbers.TAG.search(text)
        if match:
            return path, text, match
    pytest.fail("no tagged number in the documents")


def test_a_number_edited_away_from_its_source_fails_the_check():
    path, text, match = _a_tagged_number()
    number = doc_numbers.NUMBER.findall(text[max(0, match.start() - 40):match.start()])[-1]
    start = text.rindex(number, 0, match.start())
    edited = text[:start] + ("9" + number) + text[start + len(number):]  # a digit slipped in
    assert not doc_numbers.check_text(text, path.name)
    problems = doc_numbers.check_text(edited, path.name)
    assert len(problems) == 1 and f"9{number} where {match['run']} {match['path']}" in problems[0]


def test_a_generated_table_edited_by_hand_fails_the_check():
    for path in doc_numbers.documents():
        text = path.read_text()
        match = doc_numbers.TABLE.search(text)
        if match:
            break
    body = match["body"]
    digit = next(index for index, char in enumerate(body) if char.isdigit())
    edited = text.replace(body, body[:digit] + str((int(body[digit]) + 1) % 10) + body[digit + 1:], 1)
    problems = doc_numbers.check_text(edited, path.name)
    assert len(problems) == 1 and f"table {match['name']} differs" in problems[0]


def test_a_run_time_without_its_tag_fails_the_check():
    """The class's pages state run times from the reference runs: an untagged time is reported."""
    assert not any(doc_numbers.untagged_times(part.text, part.where)
                   for name in doc_numbers.STUDENT_PAGES for part in doc_numbers.parts(doc_numbers.ROOT / name)
                   if part.kind == "markdown")
    text = ("# the main job (CPU: 10-15 minutes)\n"
            "The smoke run took 0.7<!-- ref vision-smoke-s0 reference.seconds min --> minutes.\n"
            "One GPU, about 15 minutes (an estimate: not measured); 1,500 steps of 2 cores.\n"
            "It took 40 s, or 2.3 min, or 1 hour.\n")
    problems = doc_numbers.untagged_times(text, "x.md")
    assert [problem.split(" is ")[0] for problem in problems] == [
        "x.md:1: '10-15 minutes'", "x.md:4: '40 s'", "x.md:4: '2.3 min'", "x.md:4: '1 hour'"]
    assert all(problem.endswith("(tag it: NUMBER<!-- ref RUN reference.seconds min --> minutes)")
               for problem in problems)


def test_a_tag_naming_nothing_is_reported(tmp_path):
    text = "0.5<!-- ref vision-cifar10-s0 models.plain-99.train_error % -->"
    assert "no model 'plain-99'" in doc_numbers.check_text(text, "x.md")[0]
    assert "no reference run 'nowhere'" in doc_numbers.check_text(
        "1<!-- ref nowhere models.a.b % -->", "x.md")[0]


def test_the_formats():
    assert doc_numbers.formatted(0.5789, "%") == "57.9"
    assert doc_numbers.formatted(0.5789, "%0") == "58"
    assert doc_numbers.formatted(116882, "int") == "116,882"
    assert doc_numbers.formatted(1.23456, ".3f") == "1.235"
    assert doc_numbers.formatted(181.23, ".3g") == "181"
    assert doc_numbers.formatted(None, ".3f") == "—"
    with pytest.raises(doc_numbers.SourceError):
        doc_numbers.formatted(1.0, "%%")


def test_the_pages_a_student_reads_are_all_checked():
    names = {doc_numbers.page_name(path) for path in doc_numbers.documents()}
    assert {"README.md", "docs/students.md", "docs/handout_vision.md", "docs/lab_language.md",
            "notebooks/vision.ipynb", "notebooks/language.ipynb"} <= names
    assert set(doc_numbers.STUDENT_PAGES) <= names
    cells = doc_numbers.parts(doc_numbers.ROOT / "notebooks" / "vision.ipynb")
    assert {part.kind for part in cells} == {"markdown", "code"} and all(" cell " in part.where for part in cells)
    tagged = [part for part in cells if doc_numbers.TAG.search(part.text)]
    assert tagged and all(part.kind == "markdown" for part in tagged)


# The four mistakes of issue 63, put back on a copy of their page -----------------------------------


def _page(name):
    return doc_numbers.ROOT / name, (doc_numbers.ROOT / name).read_text()


def _put_back(name, old, new):
    """The page's problems with `old` replaced by `new` (`old` must be there, and the page clean)."""
    path, text = _page(name)
    assert old in text, (name, old)
    assert not doc_numbers.check_page(path, text)
    return doc_numbers.check_page(path, text.replace(old, new, 1))


def _cell_with(name, line):
    """The index of the notebook's one cell whose source holds `line`."""
    cells = json.loads(_page(name)[1])["cells"]
    found = [index for index, cell in enumerate(cells) if line in "".join(cell["source"])]
    assert len(found) == 1, (name, line, found)
    return found[0]


def _cell_put_back(name, index, old, new):
    """The same for one cell of a notebook (`old` a line of the cell's source)."""
    path, text = _page(name)
    notebook = json.loads(text)
    source = "".join(notebook["cells"][index]["source"])
    assert old in source, (name, index, old)
    notebook["cells"][index]["source"] = source.replace(old, new, 1).splitlines(keepends=True)
    assert not doc_numbers.check_page(path, text)
    return doc_numbers.check_page(path, json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


EPOCHS = "`epochs`\n   10<!-- ref vision-cifar10-s0 config.epochs str -->"
GROWTH = ("x1.07<!-- ref vision-cifar10-s0 initialisation.residual-32.gradient_gain/"
          "initialisation.residual-8.gradient_gain root24/.3g -->")


@pytest.mark.parametrize("new, expected", [
    ("`epochs` 8", "`epochs` 8 is a config value without its source"),  # as it was: no tag
    ("`epochs`\n   8<!-- ref vision-cifar10-s0 config.epochs str -->", "the text before the tag is not '10'"),
])
def test_the_quick_runs_epochs_typed_by_hand_are_reported(new, expected):
    problems = _put_back("docs/lab_vision.md", EPOCHS, new)
    assert len(problems) == 1 and expected in problems[0] and problems[0].startswith("docs/lab_vision.md:"), problems


@pytest.mark.parametrize("new, expected", [
    ("x1.06", "'x1.06' is a growth factor without its source"),
    (GROWTH.replace("x1.07", "x1.06"), "1.06 where vision-cifar10-s0 initialisation.residual-32.gradient_gain/"
                                       "initialisation.residual-8.gradient_gain gives 1.07"),
])
def test_a_growth_factor_away_from_the_findings_is_reported(new, expected):
    problems = _put_back("docs/lab_vision.md", GROWTH, new)
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_growth_tag_gives_the_findings_own_factor():
    """The lab sheet's x1.07 is the figure the finding "Gradient gain against depth" prints."""
    from scripts.reference_tables import findings_list

    factor = doc_numbers.formatted(doc_numbers.lookup(
        "vision-cifar10-s0", "initialisation.residual-32.gradient_gain/initialisation.residual-8.gradient_gain"),
        "root24/.3g")
    assert f"residual 2.99 -> 13.8 at 8/32 layers (x{factor} per layer)" in findings_list("vision-cifar10-s0")


def test_a_quick_run_time_typed_by_hand_in_a_notebook_is_reported():
    line = "2. Run `python -m tracks.vision` and compare"
    index = _cell_with("notebooks/vision.ipynb", line)
    problems = _cell_put_back(
        "notebooks/vision.ipynb", index, line,
        "2. Run `python -m tracks.vision` (about 15 minutes on a laptop CPU) and compare")
    assert problems == [f"notebooks/vision.ipynb cell {index}:3: '15 minutes' is a run time without its source "
                        "(tag it: NUMBER<!-- ref RUN reference.seconds min --> minutes)"]


@pytest.mark.parametrize("path, expected", [
    ("../shared/data/tinyshakespeare.txt", "../shared/data/tinyshakespeare.txt leads outside the repository"),
    ("../../shared/data/tinyshakespeare.txt", "leads outside the repository"),
    ("/work/shared/data/tinyshakespeare.txt", "/work/shared/data/tinyshakespeare.txt is a place on one machine"),
    ("/root/tensorflow_datasets/input.txt", "is a place on one machine"),
])
def test_a_text_path_outside_the_repository_in_a_notebook_is_reported(path, expected):
    index = _cell_with("notebooks/language.ipynb", "TEXT_PATH = None")
    problems = _cell_put_back("notebooks/language.ipynb", index, "TEXT_PATH = None", f'TEXT_PATH = "{path}"')
    assert len(problems) == 1 and expected in problems[0] and f"language.ipynb cell {index}:" in problems[0], problems


def test_paths_of_the_repository_must_exist():
    assert doc_numbers.repository_paths("see tests/library/test_preact_blocks.py and docs/reference/", "x.md") == []
    assert doc_numbers.repository_paths("docs/reference/<run>/results.json, runs/vision-...", "x.md") == []
    assert doc_numbers.repository_paths("tests/library/test_nothing.py.", "x.md") == [
        "x.md:1: tests/library/test_nothing.py is not in the repository"]
    here = doc_numbers.ROOT / "docs"
    assert doc_numbers.outside_paths("[home](../README.md), ~/tensorflow_datasets, /proc/meminfo", "x.md", here) == []


def test_config_values_need_their_tags():
    text = ("`config.json` (`warmup_steps`\n 92, `epochs` 10<!-- ref vision-cifar10-s0 config.epochs str -->, "
            "`init` `xavier`, the `quick` preset, `--epochs 3`)")
    problems = doc_numbers.untagged_config(text, "x.md")
    assert [problem.split(" is a config")[0] for problem in problems] == [
        "x.md:1: `warmup_steps` 92", "x.md:2: `init` `xavier`"]


def test_text_tags_match_whole_words():
    ok = "`epochs` 10<!-- ref vision-cifar10-s0 config.epochs str -->"
    assert doc_numbers.check_text(ok, "x.md") == []
    assert doc_numbers.check_text(ok.replace(" 10<", " 110<"), "x.md")  # not '10' at the end of '110'
    assert doc_numbers.check_text("[0, 100]<!-- ref language-tinyshakespeare-s0 config.warmup_steps json -->",
                                  "x.md") == []
    machine = doc_numbers.lookup("vision-cifar10-s0", "reference.machine")
    cpu = doc_numbers.formatted(machine, "cpu")
    assert machine.startswith(cpu) and "cores" in cpu
    assert doc_numbers.check_text(f"on {cpu}<!-- ref vision-cifar10-s0 reference.machine cpu -->", "x.md") == []
    assert doc_numbers.check_text("on 16 cores (Xeon)<!-- ref vision-cifar10-s0 reference.machine cpu -->", "x.md")


def test_a_number_a_test_states_must_be_in_that_test():
    text = "more than x1.25<!-- test tests/library/test_diagnostics.py --> per block"
    assert doc_numbers.tested_numbers(text, "x.md") == [] and doc_numbers.untagged_growth(text, "x.md") == []
    assert "1.35 is not a number of" in doc_numbers.tested_numbers(text.replace("1.25", "1.35"), "x.md")[0]
    assert "is not in the repository" in doc_numbers.tested_numbers(
        "1.25<!-- test tests/nothing.py -->", "x.md")[0]


def test_ratio_and_mean_paths():
    gain = lambda depth: doc_numbers.lookup("vision-cifar10-s0", f"initialisation.residual-{depth}.gradient_gain")
    ratio = doc_numbers.lookup("vision-cifar10-s0",
                               "initialisation.residual-32.gradient_gain/initialisation.residual-8.gradient_gain")
    assert ratio == pytest.approx(gain(32) / gain(8))
    norms = doc_numbers.lookup("language-tinyshakespeare-s0", "initialisation.post-6.block_weight_grad_norms")
    assert doc_numbers.lookup("language-tinyshakespeare-s0",
                              "initialisation.post-6.block_weight_grad_norms.mean") == pytest.approx(
        sum(norms) / len(norms))
    config = json.loads((doc_numbers.REFERENCE / "vision-cifar10-s0" / "config.json").read_text())
    assert doc_numbers.lookup("vision-cifar10-s0", "config.epochs") == config["epochs"]
    with pytest.raises(doc_numbers.SourceError):
        doc_numbers.lookup("vision-cifar10-s0", "config.no_such_key")


def test_a_number_can_come_from_a_measurement_record(tmp_path, monkeypatch):
    """`<!-- ref measurements/NAME KEY FORMAT -->`: docs/measurements/NAME.json (scripts/time_session.py)."""
    from scripts import reference_runs

    docs = tmp_path / "docs"
    (docs / "measurements").mkdir(parents=True)
    (docs / "measurements" / "session.json").write_text('{"alone": {"vision": {"seconds": 243.4}}}')
    monkeypatch.setattr(reference_runs, "ROOT", tmp_path)
    assert reference_runs.lookup("measurements/session", "alone.vision.seconds") == 243.4
    with pytest.raises(reference_runs.SourceError, match="no alone.language.seconds"):
        reference_runs.lookup("measurements/session", "alone.language.seconds")
    with pytest.raises(reference_runs.SourceError, match="no measurement record"):
        reference_runs.lookup("measurements/other", "alone.vision.seconds")
    assert doc_numbers.TAG.search("4.1<!-- ref measurements/session alone.vision.seconds min -->")
