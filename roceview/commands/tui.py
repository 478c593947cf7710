"""`roceview tui`: the terminal UI over capture files (Overview, Queue pairs, Packets, PFC)."""
from __future__ import annotations

import io

from roceview.commands.base import ExitStatus, add_capture_arguments
from roceview.commands.analyze import add_analysis_options
from roceview.packets.times import FORMATS, SECONDS_FORMATS


def add_arguments(parser) -> None:
    add_capture_arguments(parser)
    add_analysis_options(parser, fail_on_help="exit 3 on quit when a finding of this severity or worse exists")
    parser.add_argument("--light", action="store_true", help="light theme (t toggles)")
    parser.add_argument("-t", dest="time_format", choices=FORMATS, default="r", metavar="FORMAT",
                        help="packet list's time column as tshark -t: r a ad adoy d dd e u ud (default r; T cycles)")
    parser.add_argument("-u", dest="seconds_format", choices=SECONDS_FORMATS, default="s", metavar="s|hms",
                        help="relative times in seconds or hours, minutes, seconds (U toggles)")


def run(args, env) -> ExitStatus:
    from roceview.api import check_options, load_settings
    from roceview.tui import Options, run_app

    check_options(args.pmtu, args.link_speed, args.bucket)
    _check_captures(args.capture)
    if "-" in args.capture:
        _capture_from_stdin_keys_from_tty()
    options = Options(pmtu=args.pmtu, link_speed=args.link_speed, bucket_ms=args.bucket,
                      roce_ports=tuple(args.roce_port), config=load_settings(args.config, args.pfc_priorities), fail_on=args.fail_on,
                      time_format=args.time_format, hms=args.seconds_format == "hms")
    title = "roceview " + " ".join(args.capture)
    return ExitStatus(run_app(list(args.capture), title=title, options=options, light=args.light))


def _check_captures(paths) -> None:
    """A missing, unreadable or non-capture file: one line and exit 2 before the screen opens
    (BadInput from the readers' own checks)."""
    from roceview.capture.source import capture_kind, expand_paths, open_capture

    for path in expand_paths(paths):
        if path == "-":
            continue
        stream, name, head = open_capture(path)
        stream.close()
        capture_kind(head, name)


def _capture_from_stdin_keys_from_tty() -> None:
    """`tcpdump -w - | roceview tui -`: the capture keeps the pipe (moved to another fd, as
    sys.stdin), the terminal becomes fd 0 for Textual's keyboard (it reads sys.__stdin__).
    The pipe's first bytes are checked before the terminal is taken: a stream that is not a
    capture is one line and exit 2, as `live -r -` (the screen opened, said 'stopped' and
    exited 0 on q)."""
    import os
    import sys

    from roceview.capture.source import GZIP_MAGIC, capture_kind
    from roceview.errors import BadInput

    if sys.stdin.isatty():
        raise BadInput("'-' reads the capture from stdin: pipe one in (e.g. tcpdump -w - | roceview tui -)")
    fd = os.dup(0)
    head = _first_bytes(fd, 4)
    if head[:2] != GZIP_MAGIC:            # gzip: its content is checked by the reader
        capture_kind(head, "<stdin>")
    os.close(keys_from_tty())             # fd 0 is the terminal now; `fd` holds the capture
    sys.stdin = io.TextIOWrapper(io.BufferedReader(_Prefixed(head, fd), 1 << 20))


def _first_bytes(fd: int, n: int) -> bytes:
    """The stream's first `n` bytes (fewer at its end): a pipe may hand them over in pieces."""
    import os

    head = b""
    while len(head) < n:
        got = os.read(fd, n - len(head))
        if not got:
            break
        head += got
    return head


class _Prefixed(io.RawIOBase):
    """The bytes already read from a pipe, then the rest of the pipe: the reader sees it whole."""

    def __init__(self, head: bytes, fd: int):
        super().__init__()
        self.head, self.file = head, io.FileIO(fd, "rb")

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.file.fileno()

    def readinto(self, buffer) -> int:
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        return self.file.readinto(buffer)

    def close(self) -> None:
        self.file.close()
        super().close()


def keys_from_tty() -> int:
    """Make the terminal fd 0, where Textual reads keys, and return a new fd of what fd 0 was
    (the capture's pipe). Also `roceview live -r -`, whose stream already holds its own copy."""
    import os

    from roceview.errors import BadInput

    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        raise BadInput("a capture on stdin needs a terminal for the keys (/dev/tty cannot be opened)") from None
    capture = os.dup(0)
    os.dup2(tty, 0)
    os.close(tty)
    return capture
