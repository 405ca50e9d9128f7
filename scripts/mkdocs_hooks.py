"""MkDocs hook: the site's home page is the repository's README.md.

README.md links to the pages as `docs/<page>.md` (right on GitHub); on the
site the pages sit at the root, so those links lose their `docs/` prefix.
docs/index.md is a placeholder that says so.
"""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "index.md":
        return markdown
    return re.sub(r"\]\(docs/", "](", README.read_text())
