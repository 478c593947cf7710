"""`roceview live`: analyze a capture while it is made (`-i IFACE` through tcpdump, or `-r -`,
a pcap/pcapng stream on stdin), then write the same report, --csv and --json as `analyze`.

Ctrl-C, --duration and --count stop it cleanly: tcpdump is asked to stop (SIGINT: it flushes
and exits) and its pipe read to the end, or stdin is left after the last whole record; then
the -w file is closed (whole records only: roceview/live/save.py), the outputs written. `-w -`
writes the capture to stdout; the summary line and the report then go to stderr, as they do
with `--json -`, so stdout carries the capture or the JSON alone. Memory stays flat: the
analysis keeps per-flow aggregates and bounded events/timeline, and batches are not kept (the
TUI keeps a bounded ring of them). With the TUI, its loader feeds the session's analysis (each
packet analyzed once); the result it shows at the end is the one written.
"""
from __future__ import annotations

import argparse

import threading
import time

from roceview.commands.base import ExitStatus
from roceview.commands.analyze import MAX_QP_ROWS, _count, add_analysis_options

MAX_DURATION_S = 366 * 86400     # a year: longer waits overflow the timer (threading.TIMEOUT_MAX)
MAX_COUNT = (1 << 31) - 1        # tcpdump's and dumpcap's -c is an int
MAX_SNAPLEN = 262144             # tcpdump's and dumpcap's largest snapshot length


def add_arguments(parser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-i", dest="interface", metavar="IFACE",
                        help="capture on this interface (through tcpdump, else dumpcap)")
    source.add_argument("-r", dest="read", metavar="FILE", action=_Once,
                        help="read a pcap/pcapng stream: '-' for stdin (ssh host tcpdump -w - | roceview live -r -)")
    parser.add_argument("-w", dest="write", metavar="FILE",
                        help="also save everything captured to FILE ('-': stdout; the report then goes to stderr)")
    parser.add_argument("--snaplen", type=_count, default=None, metavar="N", help="bytes kept of each frame (-i)")
    parser.add_argument("-f", dest="filter", metavar="BPF", help="capture filter (tcpdump syntax; -i)")
    parser.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    parser.add_argument("--count", type=_count, default=None, metavar="N", help="stop after N packets")
    parser.add_argument("--csv", metavar="DIR", help="write qps.csv, pfc.csv, findings.csv, events.csv, timeline.csv, ops.csv, connections.csv, priorities.csv, cc.csv, paused_flows.csv")
    parser.add_argument("--json", metavar="FILE", help="write all tables and the capture summary as one JSON document")
    add_analysis_options(parser)
    parser.add_argument("--max-qps", type=_count, default=MAX_QP_ROWS, metavar="N",
                        help=f"queue pairs listed in the report (default {MAX_QP_ROWS}; 0 = all)")
    parser.add_argument("--no-tui", action="store_true",
                        help="no terminal UI: a status line a second on stderr, then the analyze report")


def run(args, env) -> ExitStatus:
    from roceview.errors import BadInput

    _check(args, env)
    tui = None
    if not args.no_tui and hasattr(env.stdout, "isatty") and env.stdout.isatty():
        try:
            import roceview.tui as tui
        except ImportError:
            raise BadInput("the TUI is not available in this build; use --no-tui") from None
    from roceview.live import LiveSession

    session = LiveSession(args, env.warn, packet_flags=tui is not None)     # the TUI's packet list shows them
    with session:
        if tui is not None:
            if args.read == "-":             # the stream holds its own fd of the pipe
                import os

                from roceview.commands.tui import keys_from_tty

                os.close(keys_from_tty())
            tui.run_app(session.stoppable_batches(), title=session.title, options=_tui_options(tui, args),
                        live_stats=lambda: _tui_stats(session.stats()))
            if session.failed is not None:   # shown on the screen; exit 2 as --no-tui does
                raise session.failed
        else:
            with _StatusLine(session, env.stderr):
                for _ in session.batches():
                    pass
    result = session.result()
    from roceview.commands.analyze import write_and_report

    print(session.summary_line(), file=env.stderr if args.write == "-" or _json_to_stdout(args, env) else env.stdout)
    if args.write == "-":                  # stdout holds the capture: the report goes to stderr
        import dataclasses

        env = dataclasses.replace(env, stdout=env.stderr)
    return write_and_report(result, args, env)


def _json_to_stdout(args, env) -> bool:
    from roceview.commands.analyze import _is_stdout

    return args.json == "-" or bool(args.json) and _is_stdout(args.json, env.stdout)


def _tui_stats(stats: dict) -> dict:
    """The overview's live line: drops (unknown from a stream: its writer counts them) and state."""
    kernel = stats["kernel_drops"]
    state = "starting" if stats["starting"] else f"stopped ({stats['stopped']})" if stats["stopped"] else \
        "ended (end of stream)" if stats.get("ended") else "capturing"
    return {"kernel drops": "unknown" if kernel is None else int(kernel),
            "roceview drops": int(stats["roceview_drops"]), "capture": state}


def _tui_options(tui, args):
    from roceview.api import load_settings

    return tui.Options(pmtu=args.pmtu, link_speed=args.link_speed, bucket_ms=args.bucket,
                       roce_ports=tuple(args.roce_port or ()), config=load_settings(args.config, args.pfc_priorities),
                       fail_on=args.fail_on)


class _Once(argparse.Action):
    """live reads one stream: a second -r is refused, not silently taken instead of the first."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} reads one stream; it was given twice")
        setattr(namespace, self.dest, values)


def _check_bounds(args) -> None:
    """Durations and counts in the range their users take, refused before anything starts
    (--duration 1e300 overflowed the stop timer in its thread: a traceback, then exit 0)."""
    from roceview.errors import BadInput

    if args.duration is not None and not 0 < args.duration <= MAX_DURATION_S:      # NaN and inf too
        raise BadInput(f"--duration must be a finite number > 0 seconds, at most {MAX_DURATION_S:,} "
                       f"(a year; got {args.duration})")
    for flag, value, low, high in (("--count", args.count, 1, MAX_COUNT), ("--snaplen", args.snaplen, 0, MAX_SNAPLEN)):
        if value is not None and not low <= value <= high:
            shown = str(value) if value < 10**40 else f"{str(value)[:20]}... ({len(str(value))} digits)"
            raise BadInput(f"{flag} must be {low} to {high:,} (got {shown})")


def _check(args, env) -> None:
    """Options that cannot go together, refused before anything starts. -w naming our stdout
    (`/dev/stdout`, the file stdout is redirected to) is `-w -`: written there, not replaced."""
    from roceview.commands.analyze import _is_stdout
    from roceview.errors import BadInput

    if args.read is not None and (args.filter or args.snaplen is not None):
        raise BadInput("-f and --snaplen apply to -i (filter the stream where it is captured)")
    _check_bounds(args)
    if args.write and args.write != "-" and (args.write in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")
                                             or _is_stdout(args.write, env.stdout)):
        args.write = "-"
    if args.write != "-":
        return
    if _json_to_stdout(args, env):
        raise BadInput("-w - and --json - both want standard output; name a file for one of them")
    if hasattr(env.stdout, "isatty") and env.stdout.isatty():
        raise BadInput("-w -: standard output is a terminal; pipe it on (roceview live ... -w - | tshark -r -) "
                       "or name a file")


class _StatusLine:
    """One line a second on stderr: packets, rate, drops, and the events the analysis found
    in that second (the raw material of findings: the diagnoser runs once, at the end)."""

    def __init__(self, session, out):
        self.session, self.out = session, out
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="roceview-status", daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def _loop(self) -> None:
        last_packets, last_events, last = 0, {}, time.monotonic()
        while not self.done.wait(1.0):
            s = self.session.stats()
            now = time.monotonic()
            rate = (s["packets"] - last_packets) / max(now - last, 1e-9)
            new = {k: n - last_events.get(k, 0) for k, n in s["events"].items() if n > last_events.get(k, 0)}
            last_packets, last_events, last = s["packets"], s["events"], now
            drops = "n/a" if s["kernel_drops"] is None else f"{s['kernel_drops']:,}"
            if s["starting"]:
                drops += " (the capture tool is starting)"
            found = ", ".join(f"{n:,} {k}" for k, n in new.items()) or "none"
            print(f"live {s['elapsed_s']:6.1f} s: {s['packets']:,} packets ({rate:,.0f}/s), kernel drops {drops}, "
                  f"roceview drops {s['roceview_drops']:,}; new: {found}", file=self.out, flush=True)

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        return False
