"""`roceview analyze`: per-queue-pair report; --csv DIR / --json FILE exports; --fail-on for CI."""
from __future__ import annotations

import argparse

from roceview.commands.base import ExitStatus, add_capture_arguments, udp_port

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
ENABLES_GC = True  # cli.main leaves the GC off: _after_imports turns it on after the first chunk
MAX_QP_ROWS = 25  # the report's default; render.report.MAX_QP_ROWS (not imported: --help stays fast)


def add_arguments(parser) -> None:
    add_capture_arguments(parser)
    parser.add_argument("--csv", metavar="DIR", help="write qps.csv, pfc.csv, findings.csv, events.csv, timeline.csv, ops.csv, connections.csv, priorities.csv, cc.csv, paused_flows.csv")
    parser.add_argument("--json", metavar="FILE", help="write all tables and the capture summary as one JSON document; "
                             "'-': to stdout, the report then goes to stderr")
    add_analysis_options(parser)
    parser.add_argument("--filter", metavar="FILTER", default=None,
                        help="analyse only the packets matching this Wireshark display filter, like tshark -R "
                             "(filtering out a QP's ACKs or one direction changes its findings)")
    parser.add_argument("--max-qps", type=_count, default=MAX_QP_ROWS, metavar="N",
                        help=f"queue pairs listed in the report, worst first (default {MAX_QP_ROWS}; 0 = all); "
                             "--csv/--json always have all")
    parser.add_argument("--wide", action="store_true",
                        help="every queue-pair column, lines as wide as they get (default: what fits the terminal)")
    parser.add_argument("--each", action="store_true",
                        help="analyze each capture file on its own (one report each; --csv DIR: a sub-folder "
                             "per file) instead of merging them in time")
    parser.add_argument("--engine", choices=("local", "dask"), default="local",
                        help="local (default), or dask: decode the files on a Dask cluster, same results "
                             "(pip install 'roceview[dask]')")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="with --engine dask: the scheduler, e.g. tcp://10.0.0.5:8786 (default: a local "
                             "cluster sized to this machine)")
    parser.add_argument("--scheduler-timeout", type=_seconds, default=None, metavar="SECONDS",
                        help="with --scheduler: seconds to wait for the scheduler to answer, and then for its "
                             "first worker (default 10; at most 3600)")


def add_analysis_options(parser, fail_on_help: str = "exit 3 when a finding of this severity or worse exists") -> None:
    """The analysis options `analyze`, `tui` and `live` share: --link-speed, --pmtu, --roce-port,
    --bucket, --config, --fail-on (one declaration, so a check added here reaches all three)."""
    parser.add_argument("--link-speed", type=float, default=100.0, metavar="GBPS",
                        help="link speed for PFC pause time (default 100 Gb/s)")
    parser.add_argument("--pmtu", type=int, default=None, metavar="BYTES",
                        help="path MTU (256..4096; default: inferred from the traffic)")
    parser.add_argument("--roce-port", type=udp_port, action="append", default=[], metavar="P",
                        help="also decode UDP destination port P as RoCEv2 (repeatable)")
    parser.add_argument("--bucket", type=float, default=1.0, metavar="MS", help="timeline bucket (default 1 ms)")
    parser.add_argument("--config", metavar="FILE.toml", default=None,
                        help="diagnoser thresholds ([diagnose] table; see docs/findings.md)")
    parser.add_argument("--pfc-priorities", type=priority_list, default=None, metavar="P[,P...]",
                        help="priorities PFC is enabled on, e.g. 3 or 3,4, instead of what LLDP DCBX frames in "
                             "the capture say (PFC pause frames only show which priorities were paused)")
    parser.add_argument("--fail-on", choices=("warning", "critical"), default=None, help=fail_on_help)


def priority_list(text: str) -> tuple[int, ...]:
    """--pfc-priorities: comma-separated priorities 0-7."""
    try:
        prios = tuple(sorted({int(p) for p in text.split(",")}))
    except ValueError:
        prios = (-1,)
    if not all(0 <= p <= 7 for p in prios):
        raise argparse.ArgumentTypeError(f"must be priorities 0-7 separated by commas, e.g. 3 or 3,4 (got {text!r})")
    return prios


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0 (got {text!r})")
    return value


def run(args, env) -> ExitStatus:
    if args.engine == "dask" and args.scheduler is None:
        _quiet_tracker()
    if args.each:
        return _run_each(args, env)
    return _run_one(args, env)


TRACKER_RULE = "ignore::UserWarning:multiprocessing.resource_tracker"


def _quiet_tracker() -> None:
    """The LocalCluster's worker processes make multiprocessing start its resource tracker, a
    process that outlives an interrupted run (Ctrl-C, SIGTERM: exit 130/143 at once) to free
    their semaphores, and says so on our stderr ("There appear to be 12 leaked semaphore
    objects": 2 lines after the one the interrupt is). It inherits this process's environment:
    told to ignore that warning, it still frees them. The CLI's process only (it owns it)."""
    import os

    current = os.environ.get("PYTHONWARNINGS", "")
    if TRACKER_RULE not in current.split(","):
        os.environ["PYTHONWARNINGS"] = f"{current},{TRACKER_RULE}" if current else TRACKER_RULE


def _run_each(args, env) -> ExitStatus:
    """--each: one analysis, report and --csv sub-folder per file; the worst exit status. A file
    that cannot be read is its one error line and the others are still analyzed (exit 2 at the
    end: a report is missing); an error that is not about the file (a bad --filter) stops."""
    from roceview.capture.source import expand_paths
    from roceview.errors import BadInput

    if args.json:
        raise BadInput("--each writes one report per file: use --csv DIR (a sub-folder per file), not --json")
    files = expand_paths(args.capture)
    folders = _folders(files)
    cluster = None
    if args.engine == "dask" and args.scheduler is None and len(files) > 1:
        from roceview.engines.dask.client import local_cluster

        cluster = local_cluster()        # one for every file: starting one takes seconds
        args = argparse.Namespace(**{**vars(args), "scheduler": cluster.scheduler_address})
    try:
        return _each(args, env, files, folders)
    finally:
        if cluster is not None:
            from roceview.engines.dask.client import close_quietly

            close_quietly(cluster)


def _each(args, env, files: list[str], folders: list[str]) -> ExitStatus:
    from roceview.errors import BadInput

    status, unread = ExitStatus.OK, False
    for i, path in enumerate(files):
        if i:
            env.stdout.write("\n")
        one = argparse.Namespace(**{**vars(args), "capture": [path], "each": False,
                                    "csv": args.csv and _join(args.csv, folders[i])})
        try:
            status = max(status, _run_one(one, env))
        except BadInput as exc:
            if path not in str(exc):
                raise
            env.stdout.flush()
            print(f"roceview: error: {exc}", file=env.stderr)
            unread = True
    return ExitStatus.BAD_INPUT if unread else status


def _folders(files: list[str]) -> list[str]:
    """A sub-folder name per file: its name without the capture suffix, numbered when taken
    (ring/a.pcap and mirror/a.pcap: a, a-2; a third file a-2.pcap then gets a-2-2, never a
    folder another file writes); a name that would be '.' or '..' ('..pcap') keeps its suffix,
    so no file's CSVs land in DIR itself or above it."""
    import os

    names: list[str] = []
    for path in files:
        base = name = "stdin" if path == "-" else os.path.basename(path)
        for suffix in (".gz", ".pcapng", ".pcap", ".cap"):
            name = name[:-len(suffix)] if name.lower().endswith(suffix) and len(name) > len(suffix) else name
        name = base if name in ("", ".", "..") else name
        unique, k = name, 1
        while unique in names:
            k += 1
            unique = f"{name}-{k}"
        names.append(unique)
    return names


def _join(folder: str, name: str) -> str:
    import os

    return os.path.join(folder, name)


def _run_one(args, env) -> ExitStatus:
    from roceview.capture.memory import prefault_heap

    if args.engine == "local":                        # (dask: the workers hold the decoded files)
        prefault_heap(2 * _input_bytes(args.capture))  # on the idle core, while numpy imports
    from roceview.api import analyze, load_settings
    from roceview.commands.progress import Progress, input_bytes

    total = input_bytes(args.capture) if env.stderr_isatty else None
    with Progress(env.stderr, "analyzing", total) as bar:
        result = analyze(args.capture, pmtu=args.pmtu, link_speed=args.link_speed, bucket_ms=args.bucket,
                         roce_ports=args.roce_port, warn=bar.warn, on_batch=_after_imports(bar),
                         config=load_settings(args.config, args.pfc_priorities),
                         display_filter=args.filter, engine=args.engine,
                         scheduler=args.scheduler, scheduler_timeout=args.scheduler_timeout)
    return write_and_report(result, args, env)


def write_and_report(result, args, env) -> ExitStatus:
    """--csv DIR, --json FILE (or -), the report (on stderr when stdout holds the JSON) and the
    --fail-on exit status: shared with `roceview live` (args needs csv, json, fail_on and,
    optionally, max_qps and wide)."""
    if args.json and args.json != "-" and _is_stdout(args.json, env.stdout):
        args.json = "-"        # --json /dev/stdout (or /proc/self/fd/1): as '-', the report to stderr
    _write_outputs(result, args, env)
    from roceview.render.report import make_console, print_report

    out = env.stderr if args.json == "-" else env.stdout       # stdout holds the JSON then
    is_tty = hasattr(out, "isatty") and out.isatty()
    print_report(result, make_console(out, is_tty, wide=getattr(args, "wide", False)),
                 max_qps=getattr(args, "max_qps", MAX_QP_ROWS))
    return _exit_status(result, args.fail_on)


def _seconds(text: str) -> float:
    """--scheduler-timeout: a finite number of seconds above 0 and at most 3600."""
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 3600):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0 and at most 3600 (got {text!r})")
    return value


def _write_outputs(result, args, env) -> None:
    """--csv DIR (one line on stderr names the files written) and --json FILE or '-'."""
    from roceview.render.export import json_maker, write_csv_dir, write_json

    json_file = args.json and args.json != "-"
    if args.csv:        # with a --json file, one transaction: if one cannot be written, none is replaced
        written = write_csv_dir(result, args.csv, [(args.json, json_maker(result))] if json_file else [])
        print(f"roceview: wrote {', '.join(p.name for p in written)} in {args.csv}", file=env.stderr)
    if args.json and not (json_file and args.csv):
        write_json(result, args.json, env.stdout)


def _is_stdout(path: str, stdout) -> bool:
    """Whether `path` names the file our stdout is (a terminal, a pipe or a redirected file).
    Replaced like any regular output, a redirected stdout would lose the report, and on a pipe
    or terminal the report would run into the JSON."""
    import os

    try:
        a, b = os.stat(path), os.fstat(stdout.fileno())
    except (OSError, AttributeError, ValueError):      # a new path; a stdout with no descriptor
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _after_imports(bar):
    """The per-chunk callback: the first chunk arrives once every module is imported; then the
    cyclic GC (off during start-up, cli.entry) is turned on again with the ~100 k objects of the
    imports frozen: collections stop traversing them. Each chunk advances the progress bar
    (its bytes are summed only when there is a bar to show them)."""
    import gc

    from roceview.commands.progress import record_bytes

    def advance(batch) -> None:
        bar.advance(batch.n, record_bytes(batch.cols["cap_len"]) if bar.active else 0)

    def first(batch) -> None:
        nonlocal callback
        gc.freeze()
        gc.enable()
        callback = advance
        callback(batch)

    callback = first if not gc.isenabled() else advance
    return lambda batch: callback(batch)


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
