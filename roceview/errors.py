"""The project's own error types: the CLI turns each into one line on stderr."""


class RoceviewError(Exception):
    """Base class; `str(err)` is the one line a user sees."""


class BadInput(RoceviewError):
    """The input cannot be read at all (missing, empty, not a capture, unknown link type)."""


class WriteError(RoceviewError):
    """An output the user asked for cannot be written."""


class OutputError(WriteError):
    """Standard output refused a write (a full disk, /dev/full, a terminal gone: not EPIPE)."""
