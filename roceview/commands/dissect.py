"""`roceview dissect`: one line per packet like tshark, -V detail tree, --jsonl rows."""
from __future__ import annotations

import json

import numpy as np

from roceview.cli import ExitStatus, udp_port


def add_arguments(parser) -> None:
    parser.add_argument("capture", nargs="+", help="pcap/pcapng file(s), gzip ok, '-' for stdin, or a directory")
    parser.add_argument("-c", "--count", type=int, default=None, metavar="N", help="stop after N packets")
    parser.add_argument("-V", "--verbose", action="store_true", help="print a detail tree per packet")
    parser.add_argument("--jsonl", action="store_true", help="one JSON object per packet (column names; nulls omitted)")
    parser.add_argument("--roce-port", type=udp_port, action="append", default=[], metavar="P",
                        help="also decode UDP destination port P as RoCEv2 (repeatable)")


def _packets(args, env):
    """(chunk, batch) pairs: -V needs each packet's bytes, so it lists several files one after
    the other (iter_chunks); the lines and JSON come from the packets table, several files
    interleaved in time as analyze sees them (the same frame numbers)."""
    from roceview.packets import iter_batches, iter_chunks

    if args.verbose:
        yield from iter_chunks(args.capture, roce_ports=args.roce_port, warn=env.warn)
        return
    for batch in iter_batches(args.capture, roce_ports=args.roce_port, warn=env.warn, prefetch=False):
        yield None, batch


def run(args, env) -> ExitStatus:
    from roceview.render.lines import packet_lines
    from roceview.table import to_dataframe

    if args.count is not None and args.count < 0:
        print("roceview dissect: error: -c must be >= 0", file=env.stderr)
        return ExitStatus.BAD_INPUT
    left = args.count
    first_ts = None
    out = env.stdout
    for chunk, batch in _packets(args, env):
        if left is not None:
            if left <= 0:
                break
            if batch.n > left:
                batch = batch.select(np.arange(left))
            left -= batch.n
        df = to_dataframe(batch)
        if first_ts is None and len(df):
            first_ts = int(df["ts_ns"].iloc[0])
        if args.jsonl:
            _write_jsonl(df, out)
        elif args.verbose:
            _print_details(chunk, df, first_ts, out, batch.n)
        else:
            out.write("".join(line + "\n" for line in packet_lines(df, first_ts)))
        if left is not None and left <= 0:
            break
    out.flush()
    return ExitStatus.OK


def _print_details(chunk, df, first_ts, out, n) -> None:
    """render.detail's tree; rich meets a closed pipe (`dissect -V | head`) with SystemExit(1)
    (Console.on_broken_pipe): the CLI ends that quietly with 0, like the other modes."""
    from roceview.render.detail import print_details

    try:
        print_details(chunk, df, first_ts, out, n)
    except SystemExit as exc:
        if exc.code != 1:
            raise
        raise BrokenPipeError from None


def _write_jsonl(df, out) -> None:
    names = list(df.columns)
    columns = []
    for name in names:
        s = df[name]
        null = s.isna().to_numpy()
        values = s.astype(object).to_numpy().tolist() if str(s.dtype) == "category" else s.to_numpy(dtype=object).tolist()
        columns.append([None if isnull else _plain(v) for v, isnull in zip(values, null)])
    for row in zip(*columns):
        out.write(json.dumps({k: v for k, v in zip(names, row) if v is not None}) + "\n")


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v

