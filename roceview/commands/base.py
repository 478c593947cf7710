"""What every command shares: the Environment it writes to, its ExitStatus, and the argparse
types of the options several commands take. A command module has two functions,
`add_arguments(parser)` and `run(args, env) -> ExitStatus`; `roceview.cli` loads it by name."""
from __future__ import annotations

import argparse
import enum
import sys
from dataclasses import dataclass, field
from typing import IO


class ExitStatus(enum.IntEnum):
    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    FINDINGS = 3
    INTERRUPTED = 130   # Ctrl-C: 128 + SIGINT (roceview/interrupt.py)


class GuardedStream:
    """A standard stream as commands see it: a write or flush the system refuses (ENOSPC on a
    full disk or /dev/full, EIO from a terminal that went away) raises OutputError, which the CLI
    prints as one line with exit 2. EPIPE stays BrokenPipeError: `roceview dissect x | head`
    ends quietly, as tshark does. Everything else (isatty, fileno, encoding) is the stream's own."""

    def __init__(self, stream: IO, name: str):
        self._stream, self._name = stream, name

    def write(self, data):
        try:
            done = self._stream.write(data)
            if isinstance(done, int) and 0 <= done < len(data):
                done = self._rest(data, done)
            return done
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._error(exc) from None

    def _rest(self, data, done: int) -> int:
        """A binary stream may take part of a write and report it (a terminal closing under
        a large write): the rest is written again; no progress at all is an error, never a
        silently shortened output."""
        view = memoryview(data)
        while done < len(data):
            more = self._stream.write(view[done:])
            if not more:
                import errno

                raise OSError(errno.EIO, f"only {done:,} of {len(data):,} bytes were written")
            done += more
        return done

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._error(exc) from None

    @property
    def buffer(self):
        """The binary stream under a text one (JSON, pcap bytes), guarded the same way."""
        return GuardedStream(self._stream.buffer, self._name)

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _error(self, exc: OSError):
        from roceview.errors import OutputError

        return OutputError(f"cannot write to {self._name}: {exc.strerror or exc}")


@dataclass
class Environment:
    stdin: IO = field(default_factory=lambda: sys.stdin)
    stdout: IO = field(default_factory=lambda: GuardedStream(sys.stdout, "standard output"))
    stderr: IO = field(default_factory=lambda: sys.stderr)

    @property
    def stderr_isatty(self) -> bool:
        return hasattr(self.stderr, "isatty") and self.stderr.isatty()

    def warn(self, message: str) -> None:
        print(f"roceview: warning: {message}", file=self.stderr)


CAPTURE_HELP = "pcap/pcapng file(s), gzip ok, '-' for stdin, or a directory"


def add_capture_arguments(parser: argparse.ArgumentParser) -> None:
    """The captures a command reads: positional, or tshark's `-r FILE` (repeatable)."""
    parser.add_argument("capture", nargs="*", help=CAPTURE_HELP)
    parser.add_argument("-r", "--read", dest="read_files", action="append", default=[], metavar="FILE",
                        help="a capture to read, as tshark's -r (may be repeated; the same as naming it)")


def gather_captures(args) -> str | None:
    """-r files first, then the positional ones, into args.capture; the usage error when none."""
    if not hasattr(args, "read_files"):
        return None
    args.capture = [*args.read_files, *args.capture]
    return None if args.capture else "a capture is required: CAPTURE or -r FILE"


def udp_port(text: str) -> int:
    """argparse type of --roce-port: a UDP port, 1-65535 (one usage line, exit 2, otherwise)."""
    from roceview.api import checked_ports
    from roceview.errors import BadInput

    try:
        return checked_ports((int(text),))[0]
    except (ValueError, BadInput):
        raise argparse.ArgumentTypeError(f"must be a UDP port, 1-65535 (got {text!r})") from None
