"""`roceview analyze`: per-queue-pair report; --csv DIR / --json FILE exports; --fail-on for CI."""
from __future__ import annotations

from roceview.cli import ExitStatus

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


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


def run(args, env) -> ExitStatus:
    from roceview.api import analyze

    with _progress(env) as progress:
        result = analyze(args.capture, pmtu=args.pmtu, link_speed=args.link_speed, bucket_ms=args.bucket,
                         roce_ports=args.roce_port, warn=env.warn, progress=progress, config=args.config)
    if args.csv:
        from roceview.render.export import write_csv_dir

        write_csv_dir(result, args.csv)
    if args.json:
        from roceview.render.export import write_json

        write_json(result, args.json)
    from roceview.render.report import make_console, print_report

    is_tty = hasattr(env.stdout, "isatty") and env.stdout.isatty()
    print_report(result, make_console(env.stdout, is_tty))
    return _exit_status(result, args.fail_on)


def _exit_status(result, fail_on: str | None) -> ExitStatus:
    if fail_on is None:
        return ExitStatus.OK
    threshold = SEVERITY_RANK[fail_on]
    severities = result.findings_table.data.get("severity", [])
    if any(SEVERITY_RANK.get(s, 0) >= threshold for s in severities):
        return ExitStatus.FINDINGS
    return ExitStatus.OK


class _progress:
    """A packet counter on stderr, only when stderr is a terminal."""

    def __init__(self, env):
        self.env = env
        self.bar = None

    def __enter__(self):
        if not self.env.stderr_isatty:
            return None
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.bar = Progress(SpinnerColumn(), TextColumn("analyzing {task.completed:,} packets"),
                            TimeElapsedColumn(), console=Console(file=self.env.stderr), transient=True)
        self.bar.start()
        task = self.bar.add_task("analyze", total=None)
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
