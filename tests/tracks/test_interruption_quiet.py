"""After an interruption was taken, an object the signal cut short may raise in its __del__ as the process ends:
nothing is printed for it (the user has read the one line that says what happened); without one, nothing changes."""

import sys

import pytest

from tracks.common import command

pytestmark = pytest.mark.no_keras_reset  # no model here


class HalfBuilt:
    """Like pyparsing's Forward when a signal lands in its __init__: its __del__ reads what was never set."""

    def __del__(self):
        self.expr  # noqa: B018  (AttributeError, as pyparsing's at shutdown)


def test_an_unraisable_after_a_taken_interruption_prints_nothing(capsys):
    before = sys.unraisablehook  # pytest's; or already the quiet one, where a test before took an interruption
    seen = []

    def recording(unraisable):
        seen.append(unraisable.exc_type)

    sys.unraisablehook = recording
    try:
        with command.signals_as_interruptions():
            command.take_interruption()
        assert sys.unraisablehook is not recording  # the quiet one, until the process ends
        half = HalfBuilt()
        del half  # its __del__ raises: the hook in place takes it
        assert capsys.readouterr().err == "" and seen == []
        sys.unraisablehook = recording
        with command.signals_as_interruptions():
            pass  # no interruption taken: the hook before comes back
        assert sys.unraisablehook is recording
        half = HalfBuilt()
        del half
        assert seen == [AttributeError]
    finally:
        sys.unraisablehook = before
