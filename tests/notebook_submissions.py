"""A `.py` submission as the notebook a student would hand in: its statements in cells, with Jupyter's extras.

`as_notebook(text)` puts each top-level statement of the file in a code
cell of its own (its comments with it), after a markdown cell, and adds
what a notebook holds that Python does not: a `%pip install` cell, a shell
line, a `%%time` cell, a help request and an output that claims every check
passed. The grader must drop the first four (with notes) and ignore the last.
"""

import ast

import nbformat

MAGIC_NOTES = 4  # the notes the grader writes for the extras below: %pip, !ls, %%time, len?


def _statements(text):
    """The file's top-level statements as source chunks, each with the comment lines above it."""
    lines = text.splitlines(keepends=True)
    starts = [node.lineno - 1 - len(getattr(node, "decorator_list", [])) for node in ast.parse(text).body]
    starts = [0, *starts[1:]]
    return ["".join(lines[start:end]) for start, end in zip(starts, [*starts[1:], len(lines)])]


def as_notebook(text, extras=True):
    """The notebook (as JSON text) of the Python source `text`."""
    cells = [nbformat.v4.new_markdown_cell("# My solution\n\nThe code cells below are graded.")]
    if extras:
        cells.append(nbformat.v4.new_code_cell("%pip install --quiet numpy\n!ls"))
    for number, chunk in enumerate(_statements(text)):
        cell = nbformat.v4.new_code_cell(chunk.rstrip("\n"))
        if extras and number == 1:
            cell.source = "%%time\n" + cell.source
        cells.append(cell)
    if extras:
        claim = nbformat.v4.new_code_cell("len?")
        claim.outputs = [nbformat.v4.new_output("stream", name="stdout", text="10 of 10 checks passed\n")]
        cells.append(claim)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(notebook)
