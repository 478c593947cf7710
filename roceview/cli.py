"""`roceview` command line: argparse, an Environment, an ExitStatus (httpie's shape).

Each sub-command lives in `roceview/commands/<name>.py` with two functions:
`add_arguments(parser)` and `run(args, env) -> ExitStatus`. Modules are imported only
when their command runs, so `roceview --help` stays fast.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from roceview.commands.base import Environment, ExitStatus, gather_captures, udp_port  # noqa: F401  (roceview.cli's own names)

COMMANDS = {
    "analyze": "per-queue-pair analysis report (PSN gaps, retransmits, NAKs, PFC, ECN/CNP)",
    "dissect": "one line per packet like tshark; -V for a detail tree, --jsonl for JSON",
    "generate": "write a synthetic capture of a fault scenario",
    "convert": "write the packets table as Parquet",
    "live": "analyze a live capture (-i IFACE through tcpdump, or -r - for a pcap stream on stdin)",
    "tui": "terminal UI: findings, queue pairs, packets, PFC (Textual)",
}


class _UsageError(Exception):
    """A usage error, printed by main() on the Environment's stderr as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2: usage errors are bad input
        raise _UsageError(f"{self.prog}: error: {' '.join(str(message).split())}")

    def _print_message(self, message, file=None):
        """--help and --version: argparse drops a write error silently (exit 0 with nothing
        written to a full disk); here it is one line and exit 2, a closed pipe stays quiet."""
        if not message:
            return
        try:
            (file or sys.stderr).write(message)
        except BrokenPipeError:
            raise
        except OSError as exc:
            from roceview.errors import OutputError

            raise OutputError(f"cannot write to standard output: {exc.strerror or exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="roceview", description="RoCE traffic analyzer and congestion diagnoser")
    parser.add_argument("--version", action="version", version="roceview 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _command_parser(name: str):
    module = importlib.import_module(f"roceview.commands.{name}")
    parser = _Parser(prog=f"roceview {name}", description=COMMANDS[name])
    module.add_arguments(parser)
    return module, parser


def main(argv: list[str] | None = None, env: Environment | None = None) -> int:
    from roceview.errors import RoceviewError

    env = env or Environment()
    argv = list(sys.argv[1:] if argv is None else argv)
    top = build_parser()
    try:
        if not argv or argv[0] not in COMMANDS:
            top.parse_args(argv)  # prints help/version or a usage error
            top.print_help(env.stdout)
            return ExitStatus.OK
        module, parser = _command_parser(argv[0])
        args = parser.parse_args(argv[1:])
        missing = gather_captures(args)
        if missing:
            parser.error(missing)
        _check_outputs(args)
        if not getattr(module, "ENABLES_GC", False):
            gc.enable()
        code = int(module.run(args, env))
        env.stdout.flush()      # a full disk shows here for the last lines, not at exit
        return code
    except SystemExit as exc:
        return int(exc.code or 0)
    except _UsageError as exc:
        _say(env, str(exc))
        return ExitStatus.BAD_INPUT
    except RoceviewError as exc:
        _say(env, f"roceview: error: {exc}")
        return ExitStatus.BAD_INPUT
    except KeyboardInterrupt:   # in process only: entry() installs roceview.interrupt's handler
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:
        # `roceview dissect big.pcap | head`: stop quietly like tshark does
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return ExitStatus.OK


def _say(env: Environment, line: str) -> None:
    """One line on stderr; when stderr itself refuses it (EIO, ENOSPC) the exit code still tells."""
    try:
        print(line, file=env.stderr, flush=True)
    except (OSError, ValueError):
        pass


OUTPUTS = (("json", "--json"), ("output", "-o"), ("truth", "--truth"), ("write", "-w"))


def _check_outputs(args) -> None:
    """An output that is one of the inputs (`analyze x.pcap --json x.pcap`) would replace the
    capture; two outputs naming one file (`generate -o x --truth x`) would keep only the last.
    Both are refused before anything is read. Devices and FIFOs may be named more than once."""
    from roceview.errors import BadInput

    inputs = [p for p in [*(getattr(args, "capture", None) or []), getattr(args, "read", None)]
              if p and p != "-" and os.path.isfile(p)]
    seen: dict[str, str] = {}
    for attr, flag in (*OUTPUTS, ("csv", "--csv")):
        if getattr(args, attr, None) == "":       # ignored (--json '') or the working folder (-o '')
            raise BadInput(f"{flag} needs a file name, not an empty one")
    if getattr(args, "csv", None):               # the files --csv DIR writes are outputs too
        from roceview.render.export import CSV_FILES

        for name, _ in CSV_FILES:
            seen[os.path.realpath(os.path.join(args.csv, name))] = f"--csv {args.csv} ({name})"
    for attr, flag in OUTPUTS:
        path = getattr(args, attr, None)
        if not path or path == "-" or (os.path.exists(path) and not os.path.isfile(path)):
            continue
        for source in inputs:
            if os.path.exists(path) and os.path.samefile(path, source):
                raise BadInput(f"{flag} {path} is also an input: writing it would replace the capture")
        real = os.path.realpath(path)
        if real in seen:
            raise BadInput(f"{flag} {path} and {seen[real]} name the same file")
        seen[real] = f"{flag} {path}"


def _refused_at_exit(exc: OSError) -> int:
    try:
        print(f"roceview: error: cannot write to standard output: {exc.strerror or exc}", file=sys.stderr)
    except (OSError, ValueError):
        pass
    return ExitStatus.BAD_INPUT


def entry() -> None:
    from roceview import interrupt

    interrupt.install()           # again, for callers of entry() other than roceview/__main__.py
    # roceview does no linear algebra, but numpy's OpenBLAS starts a thread per core that
    # spins for a while: measured 8 % of the samples of a run, stolen from the decode threads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # No cyclic GC while modules import: its full collections traverse every object the
    # imports create (numpy's ~100 k). main() turns it on again once the command is parsed;
    # analyze only after its first chunk, with the imports frozen (commands/analyze.py).
    gc.disable()
    from roceview.capture.memory import keep_freed_memory

    keep_freed_memory()
    code = main()
    try:
        sys.stdout.flush()          # argparse's --help and --version print here, not to env.stdout
    except BrokenPipeError:
        pass
    except OSError as exc:          # what main() did not report yet (main() flushes its own output)
        if code == 0:
            code = _refused_at_exit(exc)
    except ValueError:
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    # Skip interpreter teardown (0.1-0.15 s with numba loaded, docs/DESIGN.md): every
    # output was written and renamed into place before main() returned.
    os._exit(code)
