"""`python -m tracks release --out DIR`: the students' edition, made from the instructor's source.

The repository is the instructor's source, as nbgrader's `source/` and
Otter-Grader's master notebooks are: its notebooks hold each exercise's
solution (a cell tagged `solution`, after the student's stub) and notes for
the instructor (cells tagged `instructor`); solutions/ and the lab sheets
(docs/lab_*.md, the answer keys) are for instructors only. The release is
what an instructor hands out, with no solution text in any of it:

    DIR/README.md                 how to start (install, what to open, what to hand in)
    DIR/docs/                     the students' pages: students.md, the handouts, exercises.md,
                                  and the reference runs' numbers (docs/reference/) that `compare` reads
    DIR/notebooks/*.ipynb         the notebooks without their solution and instructor cells, outputs cleared:
                                  each exercise's stub raises NotImplementedError, so its check fails clearly
    DIR/exercises/exN_*.py        the six exercises' files, as `python -m tracks exercises start N` writes them
    DIR/wheel/residual_keras-*.whl this version of the package (no solutions in it), unless --without-wheel

A link in a students' page to a page the release leaves out is kept as its
text. docs/release.md is the instructor's page.
"""

import json
import pathlib
import re
import shutil

from tracks.common.option_ranges import out_problem
from tracks.common.run_directory import describe_os_error
from tracks.exercises.autograder import build_wheel, project_root, repository_problem
from tracks.exercises.catalogue import EXERCISES

# The pages a student reads, copied into DIR/docs/ (the links between them keep working).
STUDENT_PAGES = ("students.md", "handout_vision.md", "handout_language.md", "exercises.md")
NOTEBOOKS = ("vision.ipynb", "language.ipynb")
# Cells of the instructor's notebooks that the students' edition leaves out.
INSTRUCTOR_TAGS = {"solution", "instructor"}
# What `compare` reads of a reference run: its numbers and bands. Not its summary.md and figures, whose
# findings the lab sheets' answers quote.
REFERENCE_FILES = ("results.json", "config.json", "reference.json", "bands.json")
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")

README = """# Residual connections, `y = x + f(x)`: the students' edition

Your course's copy of residual_keras's students' material: the handouts,
two notebooks and six exercises. Start with
[docs/students.md](docs/students.md): what to run in what order, what to
look for in each figure, a glossary of the handouts' words, and what to do
when a run's finding says "does not hold".

## Install

Python 3.11 or newer; a virtual environment keeps the package apart from
the rest of your Python:

```bash
python -m venv .venv && source .venv/bin/activate   # Windows: .venv\\Scripts\\activate
{install}
python -m tracks.vision --preset smoke --data synthetic   # checks the install (a minute or so)
```

## What is here

- `docs/handout_vision.md`, `docs/handout_language.md`: the questions you
  answer with your own runs (`python -m tracks.vision`, `python -m
  tracks.language`).
- `notebooks/vision.ipynb`, `notebooks/language.ipynb`: open them with
  `jupyter notebook notebooks/vision.ipynb`. Each cell marked **Exercise**
  is yours to write; the cell after it checks your answer, and fails with
  "NotImplementedError: Exercise N ..." until you do.
- `exercises/ex1_residual_layer.py` ... `ex6_paths.py`: the graded
  exercises. Fill in a file, then `python -m tracks check
  exercises/ex1_residual_layer.py`; hand in the file (keep its line
  `EXERCISE = N`) as your course says.
- `docs/reference/`: the numbers of the reference runs your own runs are
  compared with: `python -m tracks.vision compare RUN
  docs/reference/vision-offline-s0`.
"""


class ReleaseError(ValueError):
    """Why the release cannot be written, in one line."""


def student_notebook(notebook):
    """The students' edition of an instructor's notebook (a dict in nbformat 4): no solution or instructor
    cells, outputs and execution counts cleared, the cells' ids kept (so a solution can be put back)."""
    cells = []
    for cell in notebook["cells"]:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & INSTRUCTOR_TAGS:
            continue
        cell = json.loads(json.dumps(cell))
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    return {**notebook, "cells": cells}


def _unlinked(text, kept):
    """`text` (Markdown) with every relative link to a page outside `kept` (names, in the same folder) replaced
    by its text; links within a page (#...), to kept pages, to docs/reference/ and to the web stay."""

    def replace(match):
        image, label, target = match.groups()
        page = target.split("#", 1)[0]
        if image or not page or "://" in target or page in kept or page.startswith("reference/"):
            return match.group(0)
        return label

    return _LINK.sub(replace, text)


def write_release(out, *, wheel=True):
    """Writes the students' edition into `out` (a new or empty folder); returns the files written.

    It is written into a folder beside `out` (`.NAME.partial`), made before anything else (a place it cannot be
    made in is refused there), and renamed to `out` once whole; on any failure (a full disk, a wheel that would not
    build, Ctrl-C) that folder is removed, so a second try finds `out` as it was.
    """
    root = project_root()
    if root is None or not (root / "notebooks").is_dir():
        raise ReleaseError("the release is made from the course's source: run it in a clone of the repository "
                           "(its notebooks/ and docs/ are not installed with the package)")
    out = pathlib.Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseError(f"--out {out} exists and is not an empty folder: choose a new one, or delete it")
    problem = repository_problem(out) or out_problem(out)
    if problem:
        raise ReleaseError(problem)
    partial = out.with_name(f".{out.name}.partial")
    try:
        shutil.rmtree(partial, ignore_errors=True)  # left by a release that was killed
        partial.mkdir(parents=True)
    except OSError as error:
        raise ReleaseError(f"--out {out}: cannot create {describe_os_error(error)}; choose another --out") from None
    try:
        _write_edition(partial, root, wheel)
        partial.replace(out)  # onto an empty folder too
    except OSError as error:
        raise ReleaseError(f"--out {out}: cannot write the release ({error.strerror or error}; nothing was kept): "
                           f"free some space, or choose another --out") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return sorted(path for path in out.rglob("*") if path.is_file())


def _write_edition(out, root, wheel):
    """The release's files (the module's docstring), from the repository `root`, into the new folder `out`."""
    docs = out / "docs"
    docs.mkdir()
    for name in STUDENT_PAGES:
        (docs / name).write_text(_unlinked((root / "docs" / name).read_text(), set(STUDENT_PAGES)))
    for run in sorted((root / "docs" / "reference").iterdir()):
        for name in REFERENCE_FILES:
            if (run / name).is_file():
                (docs / "reference" / run.name).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(run / name, docs / "reference" / run.name / name)
    (out / "notebooks").mkdir()
    for name in NOTEBOOKS:
        notebook = json.loads((root / "notebooks" / name).read_text())
        (out / "notebooks" / name).write_text(json.dumps(student_notebook(notebook), indent=1,
                                                         ensure_ascii=False) + "\n")
    (out / "exercises").mkdir()
    for exercise in EXERCISES:
        (out / "exercises" / exercise.filename).write_text(exercise.skeleton)
    if wheel:
        (out / "wheel").mkdir()
        built = build_wheel(out / "wheel")
        install = (f'pip install "wheel/{built.name}[notebooks]"        # the package, the tracks and Jupyter')
    else:
        install = 'pip install "residual-keras[notebooks]"      # the package, the tracks and Jupyter'
    (out / "README.md").write_text(README.format(install=install))


__all__ = ["INSTRUCTOR_TAGS", "NOTEBOOKS", "README", "ReleaseError", "STUDENT_PAGES", "student_notebook",
           "write_release"]
