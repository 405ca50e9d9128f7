"""The documentation site renders offline (issue 42): Material's default fetches Google Fonts."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_site_uses_system_fonts():
    config = (ROOT / "mkdocs.yml").read_text()
    theme = re.search(r"^theme:\n((?:[ #].*\n)+)", config, re.M)
    assert theme, "mkdocs.yml has no theme block"
    assert re.search(r"^  font: false\s*$", theme.group(1), re.M), theme.group(1)
    assert "fonts.googleapis" not in config
