"""`python -m tracks --help` gives the command list as the docstring writes it: one command a line."""

import pytest

import tracks.__main__ as tracks_main


def test_the_help_keeps_the_command_list_as_lines(capsys):
    with pytest.raises(SystemExit) as exit_:
        tracks_main.main(["--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out.splitlines()
    commands = [line.strip() for line in tracks_main.__doc__.splitlines() if line.strip().startswith("python -m")]
    assert len(commands) >= 5
    for command in commands:  # each command with its comment, alone on its line, as written
        assert command in [line.strip() for line in shown], command
