"""One question numbering: the handout's, shared by the lab sheet's answer key and the session plan.

Each track has a student handout (docs/handout_TRACK.md, its questions a
numbered list under "## Questions", each starting with its title in bold)
and a lab sheet (docs/lab_TRACK.md) whose "## Self-test questions" answer
them under headings "### N. Title" and whose "## Short answer key" has one
entry "N." each. The session plan and the students' page cite questions as
"vision question 7" or "language questions 4-6"; a lab sheet or handout
may write "question 7" for its own track's. Every numbered question must
have the same number and title in handout and lab sheet, an entry in the
key, and every citation must name a question that exists.
"""

import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
TRACKS = ("vision", "language")
CITING_PAGES = ("session_plan.md", "students.md")  # they name the track of every question they cite
# "question 7", "vision questions 6 and 8", "Questions 1 to 3", "questions 1, 2, 3 and 6", "questions 4-6"
CITATION = re.compile(r"\b(?:(?P<track>vision|language)\s+)?questions?\s+(?P<numbers>\d+(?:(?:,\s+|\s+and\s+|\s+to\s+|-)\d+)*)\b",
                      re.I)


def section(text, heading):
    """The text under a `## heading` line, up to the next `## ` heading."""
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else None


def _title(text):
    return re.sub(r"\s+", " ", text).strip().rstrip(".").strip()


def handout_questions(text):
    """{number: title} of a handout's "## Questions" (`1. **Title.** ...`)."""
    body = section(text, "Questions") or ""
    return {int(number): _title(title) for number, title in
            re.findall(r"^(\d+)\. \*\*(.+?)\*\*", body, re.M | re.S)}


def lab_questions(text):
    """{number: title} of a lab sheet's "## Self-test questions" (`### N. Title`)."""
    body = section(text, "Self-test questions") or ""
    return {int(number): _title(title) for number, title in re.findall(r"^### (\d+)\. (.+)$", body, re.M)}


def key_entries(text):
    """The numbers of a lab sheet's "## Short answer key" entries (`N. ...`)."""
    body = section(text, "Short answer key") or ""
    return [int(number) for number in re.findall(r"^(\d+)\. ", body, re.M)]


def citations(text, own_track=None):
    """[(line, track or None, number)] for every question the text cites."""
    found = []
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        numbers = []
        for low, high in re.findall(r"(\d+)(?:(?:\s+to\s+|-)(\d+))?", match["numbers"]):
            numbers += list(range(int(low), int(high or low) + 1))
        track = (match["track"] or "").lower() or own_track
        found += [(line, track, number) for number in numbers]
    return found


def numbering_problems(pages):
    """Every disagreement between the handouts, lab sheets, session plan and students' page.

    `pages`: {file name in docs/: its text}.
    """
    problems = []
    questions = {}
    for track in TRACKS:
        handout, lab = pages[f"handout_{track}.md"], pages[f"lab_{track}.md"]
        asked, answered = handout_questions(handout), lab_questions(lab)
        questions[track] = asked
        if sorted(asked) != list(range(1, len(asked) + 1)) or not asked:
            problems.append(f"handout_{track}.md: its questions are numbered {sorted(asked)}, not 1 to N")
        for number in sorted(set(asked) | set(answered)):
            if number not in answered:
                problems.append(f"lab_{track}.md: no answer to handout question {number} ({asked[number]!r})")
            elif number not in asked:
                problems.append(f"lab_{track}.md: question {number} ({answered[number]!r}) is not in the handout")
            elif asked[number] != answered[number]:
                problems.append(f"lab_{track}.md: question {number} is {answered[number]!r}, the handout's "
                                f"{number} is {asked[number]!r}")
        keyed = key_entries(lab)
        if keyed != sorted(asked):
            problems.append(f"lab_{track}.md: the short answer key has entries {keyed}, the handout "
                            f"questions {sorted(asked)}")
    cited = [(f"{kind}_{track}.md", text, track) for track in TRACKS for kind in ("handout", "lab")
             for text in [pages[f"{kind}_{track}.md"]]]
    cited += [(name, pages[name], None) for name in CITING_PAGES]
    for name, text, own_track in cited:
        for line, track, number in citations(text, own_track):
            if track is None:
                problems.append(f"{name}:{line}: question {number} without its track (write 'vision question "
                                f"{number}' or 'language question {number}')")
            elif number not in questions[track]:
                problems.append(f"{name}:{line}: {track} question {number} does not exist "
                                f"(the {track} handout has {len(questions[track])})")
    return problems


def _pages():
    names = [f"{kind}_{track}.md" for track in TRACKS for kind in ("handout", "lab")] + list(CITING_PAGES)
    return {name: (DOCS / name).read_text() for name in names}


def test_handouts_lab_sheets_and_session_plan_share_one_numbering():
    pages = _pages()
    assert all(len(handout_questions(pages[f"handout_{track}.md"])) >= 8 for track in TRACKS)
    problems = numbering_problems(pages)
    assert not problems, "\n".join(problems)


def test_the_session_plan_cites_questions_of_both_handouts():
    found = citations(_pages()["session_plan.md"])
    assert {track for _, track, _ in found} == set(TRACKS) and len(found) >= 10


def _edited(name, old, new):
    pages = _pages()
    assert old in pages[name], (name, old)
    pages[name] = pages[name].replace(old, new, 1)
    return numbering_problems(pages)


@pytest.mark.parametrize("name, old, new, expected", [
    # the lab sheet answers a question under another number (as lab Q5 was handout Q6)
    ("lab_vision.md", "### 6. How many paths?", "### 5. How many paths?", "lab_vision.md: question 5 is"),
    # a handout question without an answer (as handout Q5 and Q9 were)
    ("lab_language.md", "### 7. Where the prediction forms", "### Where the prediction forms",
     "lab_language.md: no answer to handout question 7"),
    # a question added to the handout only
    ("handout_vision.md", "\nTransformers (", "\n11. **Skip connections.** Why?\n\nTransformers (",
     "no answer to handout question 11"),
    # the short answer key loses an entry
    ("lab_vision.md", "\n9. The gain jumps", "\nThe gain jumps", "the short answer key has entries"),
    # the session plan mixes numberings: a question without its track, one that does not exist
    ("session_plan.md", "(vision questions 1-3)", "(handout questions 1-3)", "question 1 without its track"),
    ("session_plan.md", "vision question 7", "vision question 12", "vision question 12 does not exist"),
    ("students.md", "(language question 2;", "(language question 9;", "language question 9 does not exist"),
])
def test_a_numbering_that_drifts_apart_is_reported(name, old, new, expected):
    problems = _edited(name, old, new)
    assert any(expected in problem for problem in problems), problems


def test_citations_are_read_with_their_ranges_and_lists():
    text = "vision questions 6 and 8; Language questions 4-6; questions 1, 2, 3 and 6; question 10"
    assert citations(text, own_track="vision") == [
        (1, "vision", 6), (1, "vision", 8), (1, "language", 4), (1, "language", 5), (1, "language", 6),
        (1, "vision", 1), (1, "vision", 2), (1, "vision", 3), (1, "vision", 6), (1, "vision", 10)]
