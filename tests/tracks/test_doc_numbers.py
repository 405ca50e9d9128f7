"""Every measured number of README.md and docs/ agrees with the committed reference run it cites.

scripts/doc_numbers.py finds the tagged numbers and the generated tables;
here the repository's documents are checked, and a document edited away
from its source is shown to fail (the check can fail).
"""

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
    assert not any(doc_numbers.untagged_times((doc_numbers.ROOT / name).read_text(), name)
                   for name in doc_numbers.TIMED_PAGES)
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
