"""`roceview tui`: the terminal UI over capture files (Overview, Queue pairs, Packets, PFC)."""
from __future__ import annotations

from roceview.cli import ExitStatus


def add_arguments(parser) -> None:
    parser.add_argument("capture", nargs="+", help="pcap/pcapng file(s), gzip ok, '-' for stdin, or a directory")
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
                        help="exit 3 on quit when a finding of this severity or worse exists")
    parser.add_argument("--light", action="store_true", help="light theme (t toggles)")


def run(args, env) -> ExitStatus:
    from roceview.api import _check_options, _config
    from roceview.capture.source import expand_paths
    from roceview.tui import Options, run_app

    _check_options(args.pmtu, args.link_speed, args.bucket)
    expand_paths(args.capture)                     # a missing file: one line, exit 2, before the screen
    options = Options(pmtu=args.pmtu, link_speed=args.link_speed, bucket_ms=args.bucket,
                      roce_ports=tuple(args.roce_port), config=_config(args.config), fail_on=args.fail_on)
    title = "roceview " + " ".join(args.capture)
    return ExitStatus(run_app(list(args.capture), title=title, options=options, light=args.light))
