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


@dataclass
class Environment:
    stdin: IO = field(default_factory=lambda: sys.stdin)
    stdout: IO = field(default_factory=lambda: sys.stdout)
    stderr: IO = field(default_factory=lambda: sys.stderr)

    @property
    def stderr_isatty(self) -> bool:
        return hasattr(self.stderr, "isatty") and self.stderr.isatty()

    def warn(self, message: str) -> None:
        print(f"roceview: warning: {message}", file=self.stderr)


def udp_port(text: str) -> int:
    """argparse type of --roce-port: a UDP port, 1-65535 (one usage line, exit 2, otherwise)."""
    from roceview.api import checked_ports
    from roceview.errors import BadInput

    try:
        return checked_ports((int(text),))[0]
    except (ValueError, BadInput):
        raise argparse.ArgumentTypeError(f"must be a UDP port, 1-65535 (got {text!r})") from None
