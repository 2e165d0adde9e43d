"""The one exception type for bad user input.

Every reader, writer and command raises :class:`InputError` for a problem the user can fix
(a missing file, a malformed line, an unknown name). The CLI turns it into a one-line message
and exit code 2, never a traceback. Programming errors stay ordinary exceptions.
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """A user-fixable problem, located by file and (1-based) line where known."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path + (f":{line}" if line is not None else "") + ": "
        super().__init__(where + message)


def unknown_name(kind: str, name: str, valid) -> InputError:
    """Error for an unknown registry name, listing the valid ones (never a silent fall-back)."""
    return InputError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(valid))}")
