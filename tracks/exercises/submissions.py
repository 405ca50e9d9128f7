"""What a submission is: a `.py` file as it is, or a notebook's code cells as one Python file.

A notebook (`.ipynb`) is read with nbformat as JSON, never run and never
trusted: its stored outputs are ignored. Its code cells, in order, become
the Python the grader runs, each after a `# cell N` line so that an error's
line can be given as the cell's. What IPython would run but Python cannot is
dropped, each with a note in the file's row:

- a cell magic that runs its cell as Python (`%%time`, `%%timeit`,
  `%%capture`) loses its first line; any other (`%%bash`, `%%writefile f`)
  drops its cell;
- in a cell that does not parse as Python (a cell that does is kept as it
  is: a line may start with `%` as a continued modulo), a line magic or
  shell line (`%pip install x`, `!ls`, `x = !ls`, `len?`) becomes `pass` at
  its indentation, so the lines around it still parse.

A notebook that is not JSON, not a notebook, or has no code gets a reason
instead of a file to run; the grader's report says it in the file's row.
"""

import ast
import dataclasses
import json
import pathlib
import re
import shlex

NOTEBOOK_SUFFIX = ".ipynb"
SUFFIXES = (".py", NOTEBOOK_SUFFIX)
# What the grader reads in its own process before any sandbox: a file larger than this is refused unread. A
# notebook may carry its figures (base64 images), so it may be larger; its code may not.
MAX_SOURCE_BYTES = 10 * 2**20
MAX_NOTEBOOK_BYTES = 50 * 2**20
# Cell magics whose cell is still Python: their first line is dropped, the rest is kept.
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun")
_SHELL_ASSIGNMENT = re.compile(r"^[\w.\[\], ]+=\s*[!%]")  # x = !ls, files = %sx ls


@dataclasses.dataclass(frozen=True)
class Submission:
    """The Python to grade, or why there is none.

    Attributes:
        source: the Python source, bytes (None when `problem` says why there is none).
        notes: what was changed to make it Python (dropped magics), one line each.
        cells: for a notebook, (cell number, its first line) of each line of `source`, else None.
        problem: why the file cannot be graded (not JSON, no code), or None.
    """

    source: bytes = None
    notes: tuple = ()
    cells: tuple = None
    problem: str = None

    def where(self, line):
        """A line of `source` as the student knows it: "line 12" in a file, "cell 3, line 2" in a notebook."""
        if self.cells is None or not isinstance(line, int) or not 1 <= line <= len(self.cells):
            return f"line {line}"
        cell, first = self.cells[line - 1]
        return f"cell {cell}, line {line - first + 1}" if cell else f"line {line}"

    @property
    def is_notebook(self):
        return self.cells is not None


def printable(name):
    """A file's name as UTF-8 text can hold it (a CSV, a Markdown page, the terminal): bytes of the name that are
    not UTF-8 (which Python keeps as surrogate escapes) as \\xNN, any other lone surrogate as \\uNNNN."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


def shell_word(path):
    """A path as one word of a command line to copy into a shell: quoted where it has spaces or other signs the
    shell reads (`'my work/ex1.py'`), after ./ where it starts with - (an option to the command otherwise)."""
    text = str(path)
    return shlex.quote(f"./{text}" if text.startswith("-") else text)


def read_submission(path):
    """The `Submission` of a `.py` file or a notebook (never raises for what the file holds)."""
    path = pathlib.Path(path)
    limit = MAX_NOTEBOOK_BYTES if path.suffix == NOTEBOOK_SUFFIX else MAX_SOURCE_BYTES
    try:
        size = path.stat().st_size
        if size > limit:
            return Submission(problem=f"too large: {size / 2**20:.1f} MiB (the grader reads at most "
                                      f"{limit / 2**20:.0f} MiB of a {path.suffix} file)")
        data = path.read_bytes()
    except OSError as error:
        return Submission(problem=f"cannot be read: {error.strerror}")
    if path.suffix != NOTEBOOK_SUFFIX:
        return Submission(source=data)
    return notebook_submission(data)


def _cell_sources(data):
    """[(cell number, source)] of the notebook's code cells, or raise ValueError saying what is wrong."""

    import nbformat

    try:
        notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    except UnicodeDecodeError as error:
        raise ValueError(f"not a notebook: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except (json.JSONDecodeError, nbformat.reader.NotJSONError) as error:
        first = str(error).strip().splitlines()[0][:120] if str(error).strip() else "invalid JSON"
        raise ValueError(f"not a notebook: invalid JSON ({first})") from None
    except Exception as error:  # noqa: BLE001  (nbformat's other refusals: no nbformat version, a bad version)
        raise ValueError(f"not a notebook: {type(error).__name__}: {str(error).strip()[:120]}") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise ValueError("not a notebook: it has no list of cells")
    sources = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        sources.append((number, "".join(source) if isinstance(source, list) else str(source)))
    return sources


def _python_lines(number, source, notes):
    """The cell's lines as Python: magics and shell lines replaced, each noted."""
    lines = source.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("%%"):
        magic = first[2:].split()[0] if first[2:].split() else ""
        if magic not in PYTHON_CELL_MAGICS:
            notes.append(f"cell {number}: dropped a %%{magic} cell (not Python)")
            return []
        notes.append(f"cell {number}: dropped %%{magic} (the cell is kept)")
        lines = lines[lines.index(next(line for line in lines if line.strip())) + 1:]
        lines = [""] + lines  # the magic's line stays a line, so the cell's lines keep their numbers
    try:
        ast.parse("\n".join(lines))
        return lines  # Python as it is (a line may start with % as a continued modulo)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the grader's parse says why, later
        pass
    kept = []
    for line in lines:
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        help_request = stripped.endswith("?") and not stripped.startswith("#")
        if stripped.startswith(("%", "!", "?")) or help_request or _SHELL_ASSIGNMENT.match(stripped):
            notes.append(f"cell {number}: dropped {stripped[:60]!r} (IPython, not Python)")
            kept.append(f"{indent}pass  # dropped by the grader: IPython, not Python")
        else:
            kept.append(line)
    return kept


def _is_unicode(text):
    """False for a string with a lone surrogate (JSON's "\\ud800" decodes to one), which UTF-8 cannot write."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def notebook_submission(data):
    """The `Submission` of a notebook's bytes: its code cells as one Python file."""
    try:
        sources = _cell_sources(data)
    except ValueError as error:
        return Submission(problem=str(error))
    if not any(source.strip() for _, source in sources):
        return Submission(problem="no code: the notebook has no code cell with anything in it")
    unwritable = next((number for number, source in sources if not _is_unicode(source)), None)
    if unwritable is not None:
        return Submission(problem=f"cell {unwritable} holds a character that is not Unicode text (a lone surrogate, "
                                  f"such as \\ud800 in the notebook's JSON): it cannot be run as Python")
    notes, text, cells = [], [], []
    for number, source in sources:
        lines = _python_lines(number, source, notes)
        text.append(f"# cell {number}")
        cells.append((0, len(cells) + 1))
        first = len(cells) + 1
        for line in lines:
            text.append(line)
            cells.append((number, first))
    source = ("\n".join(text) + "\n").encode("utf-8")
    if len(source) > MAX_SOURCE_BYTES:
        return Submission(problem=f"too large: its code is {len(source) / 2**20:.1f} MiB (the grader reads at most "
                                  f"{MAX_SOURCE_BYTES / 2**20:.0f} MiB of code)")
    return Submission(source=source, notes=tuple(notes), cells=tuple(cells))


__all__ = ["NOTEBOOK_SUFFIX", "SUFFIXES", "Submission", "notebook_submission", "printable", "read_submission",
           "shell_word"]
