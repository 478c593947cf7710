"""`roceview analyze`: per-queue-pair report; --csv DIR / --json FILE exports; --fail-on for CI."""
from __future__ import annotations

import argparse
import time

from roceview.cli import ExitStatus

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
ENABLES_GC = True  # cli.main leaves the GC off: _after_imports turns it on after the first chunk
MAX_QP_ROWS = 25  # the report's default; render.report.MAX_QP_ROWS (not imported: --help stays fast)


def add_arguments(parser) -> None:
    parser.add_argument("capture", nargs="+", help="pcap/pcapng file(s), gzip ok, '-' for stdin, or a directory")
    parser.add_argument("--csv", metavar="DIR", help="write qps.csv, pfc.csv, findings.csv, events.csv, timeline.csv")
    parser.add_argument("--json", metavar="FILE", help="write all tables and the capture summary as one JSON document")
    parser.add_argument("--link-speed", type=float, default=100.0, metavar="GBPS",
                        help="link speed for PFC pause time (default 100 Gb/s)")
    parser.add_argument("--pmtu", type=int, default=None, metavar="BYTES",
                        help="path MTU (256..4096; default: inferred from the traffic)")
    parser.add_argument("--roce-port", type=int, action="append", default=[], metavar="P",
                        help="also decode UDP destination port P as RoCEv2 (repeatable)")
    parser.add_argument("--bucket", type=float, default=1.0, metavar="MS", help="timeline bucket (default 1 ms)")
    parser.add_argument("--config", metavar="FILE.toml", default=None,
                        help="diagnoser thresholds ([diagnose] table; see docs/findings.md)")
    parser.add_argument("--fail-on", choices=("warning", "critical"), default=None,
                        help="exit 3 when a finding of this severity or worse exists")
    parser.add_argument("--max-qps", type=_count, default=MAX_QP_ROWS, metavar="N",
                        help=f"queue pairs listed in the report, worst first (default {MAX_QP_ROWS}; 0 = all); "
                             "--csv/--json always have all")
    parser.add_argument("--engine", choices=("local", "dask"), default="local",
                        help="local (default), or dask: decode the files on a Dask cluster, same results "
                             "(pip install 'roceview[dask]')")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="with --engine dask: the scheduler, e.g. tcp://10.0.0.5:8786 (default: a local "
                             "cluster sized to this machine)")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0 (got {text!r})")
    return value


def run(args, env) -> ExitStatus:
    from roceview.capture.memory import prefault_heap

    if args.engine == "local":                        # (dask: the workers hold the decoded files)
        prefault_heap(2 * _input_bytes(args.capture))  # on the idle core, while numpy imports
    from roceview.api import analyze

    with _Progress(env) as bar:
        result = analyze(args.capture, pmtu=args.pmtu, link_speed=args.link_speed, bucket_ms=args.bucket,
                         roce_ports=args.roce_port, warn=bar.warn, progress=_after_imports(bar),
                         config=args.config, engine=args.engine, scheduler=args.scheduler)
    if args.csv:
        from roceview.render.export import write_csv_dir

        write_csv_dir(result, args.csv)
    if args.json:
        from roceview.render.export import write_json

        write_json(result, args.json)
    from roceview.render.report import make_console, print_report

    is_tty = hasattr(env.stdout, "isatty") and env.stdout.isatty()
    print_report(result, make_console(env.stdout, is_tty), max_qps=args.max_qps)
    return _exit_status(result, args.fail_on)


def _after_imports(bar):
    """The progress callback: the first chunk arrives once every module is imported; then the
    cyclic GC (off during start-up, cli.entry) is turned on again with the ~100 k objects of the
    imports frozen: collections stop traversing them."""
    import gc

    def first(n: int) -> None:
        nonlocal callback
        gc.freeze()
        gc.enable()
        callback = bar.advance
        callback(n)

    callback = first if not gc.isenabled() else bar.advance
    return lambda n: callback(n)


def _input_bytes(paths) -> int:
    """Bytes of the named files (a directory's files; stdin: 0), without reading them."""
    import os

    total = 0
    for path in paths:
        try:
            if os.path.isdir(path):
                total += sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
            elif path != "-":
                total += os.stat(path).st_size
        except OSError:
            pass                 # reported as bad input when it is read
    return total


def _exit_status(result, fail_on: str | None) -> ExitStatus:
    if fail_on is None:
        return ExitStatus.OK
    threshold = SEVERITY_RANK[fail_on]
    severities = result.findings_table.data.get("severity", [])
    if any(SEVERITY_RANK.get(s, 0) >= threshold for s in severities):
        return ExitStatus.FINDINGS
    return ExitStatus.OK


class _Progress:
    """A packet counter on stderr, only when stderr is a terminal: one line redrawn at most ten
    times a second, erased before a warning and at the end. (Not rich's Progress: importing it
    costs ~30 ms and it redraws from a thread; a capture read in under 0.1 s shows nothing.)"""

    def __init__(self, env):
        self.env = env
        self.active = env.stderr_isatty
        self.packets = 0
        self.start = self.drawn = time.monotonic()

    def __enter__(self):
        return self

    def advance(self, n: int) -> None:
        self.packets += n
        now = time.monotonic()
        if self.active and now - self.drawn >= 0.1:
            self.drawn = now
            self.env.stderr.write(f"\ranalyzing {self.packets:,} packets  {now - self.start:.1f} s")
            self.env.stderr.flush()

    def warn(self, message: str) -> None:
        self._erase()
        self.env.warn(message)

    def _erase(self) -> None:
        if self.active and self.drawn > self.start:
            self.env.stderr.write("\r\x1b[K")
            self.env.stderr.flush()

    def __exit__(self, *exc):
        self._erase()
        return False
