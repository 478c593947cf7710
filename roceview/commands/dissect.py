"""`roceview dissect`: one line per packet like tshark, -V detail tree, --jsonl rows; -Y display
filter, -T fields -e FIELD, -T json (render/tshark_json), -x hex dump (tshark's options,
roceview/filter and render/field_text)."""
from __future__ import annotations

import codecs
import json

import numpy as np

from roceview.commands.base import ExitStatus, add_capture_arguments, udp_port
from roceview.packets.times import FORMATS, SECONDS_FORMATS, Clock, TimeColumn, filter_mask


def add_arguments(parser) -> None:
    add_capture_arguments(parser)
    parser.add_argument("-c", "--count", type=int, default=None, metavar="N", help="stop after N packets")
    parser.add_argument("-V", "--verbose", action="store_true", help="print a detail tree per packet")
    parser.add_argument("--jsonl", action="store_true", help="one JSON object per packet (column names; nulls omitted)")
    parser.add_argument("--roce-port", type=udp_port, action="append", default=[], metavar="P",
                        help="also decode UDP destination port P as RoCEv2 (repeatable)")
    parser.add_argument("-Y", "--display-filter", metavar="FILTER", default=None,
                        help="print only packets matching this Wireshark display filter (frame numbers unchanged)")
    parser.add_argument("-T", dest="output_format", choices=("text", "fields", "json"), default="text",
                        help="fields: the -e fields of each packet, like tshark -T fields; json: a JSON array "
                             "of the packets' fields as tshark -T json writes it (with -e: only those fields)")
    parser.add_argument("-e", dest="fields", action="append", default=[], metavar="FIELD",
                        help="with -T fields or -T json: a field to print (filter field names; repeatable)")
    parser.add_argument("-E", dest="field_options", action="append", default=[], metavar="OPT=VALUE",
                        help="with -T fields: header=y|n, separator=/t|/s|C, quote=d|s|n, occurrence=f|l|a, "
                             "aggregator=,|/s|C")
    parser.add_argument("--link-speed", type=float, default=100.0, metavar="GBPS",
                        help="link speed for the pause time of PFC/PAUSE flags (default 100 Gb/s)")
    parser.add_argument("-t", dest="time_format", choices=FORMATS, default="r", metavar="FORMAT",
                        help="time column as tshark -t: r relative to the first packet (default), a/ad/adoy "
                             "absolute local time (with date, with day of year), u/ud UTC (with date), "
                             "e epoch, d delta from the previous packet, dd from the previous one shown")
    parser.add_argument("-u", dest="seconds_format", choices=SECONDS_FORMATS, default="s", metavar="s|hms",
                        help="relative and delta times as seconds (s, default) or hours, minutes, seconds (hms)")
    parser.add_argument("-x", dest="hex", action="store_true",
                        help="hex and ASCII dump of each packet after its line (or -V tree), like tshark -x")


def _packets(args, env):
    """(chunk, batch) pairs with the analysis columns (flags, related frames: the streaming
    analysis of `analyze`, run alongside). -V needs each packet's bytes, so it lists several
    files one after the other (iter_chunks); the lines and JSON come from the packets table,
    several files interleaved in time as analyze sees them (the same frame numbers)."""
    from roceview.analysis.annotate import analyzed_pairs
    from roceview.packets.read import iter_batches, iter_chunks

    if args.verbose or args.hex and args.output_format == "text" and not args.jsonl:
        pairs = iter_chunks(args.capture, roce_ports=args.roce_port, warn=env.warn)
    else:
        pairs = ((None, b) for b in iter_batches(args.capture, roce_ports=args.roce_port, warn=env.warn,
                                                 prefetch=False))
    yield from analyzed_pairs(pairs)


def run(args, env) -> ExitStatus:
    if args.count is not None and args.count < 0:
        print("roceview dissect: error: -c must be >= 0", file=env.stderr)
        return ExitStatus.BAD_INPUT
    from roceview.api import check_link_speed

    check_link_speed(args.link_speed)           # finite, > 0: a bad one is one line, exit 2
    display, writer = _setup(args)              # bad filter or field: one line, before reading
    out = env.stdout
    as_json = args.output_format == "json"
    if writer is not None and not as_json and writer.options.header:
        out.write(writer.header() + "\n")
    clock = Clock()                             # times relative to the first packet read, deltas
    kinds = _finding_kinds(args, env, display, writer)
    if kinds is not None:
        from roceview.diagnose.evidence_frames import add_finding_kinds
    operations = _operations(args, display, writer)
    for chunk, batch in _limited(_packets(args, env), args.count):
        if kinds is not None:
            add_finding_kinds(batch, *kinds)
        if operations is not None:
            operations.annotate(batch)
        clock.stamp(batch)
        rows = np.flatnonzero(filter_mask(display, batch, clock)) if display is not None else None
        shown = batch if rows is None else batch.select(rows)
        clock.display(shown)
        if as_json:                             # the array streamed, a slice of rows at a time
            for piece in writer.pieces(shown):
                out.write(piece)
        elif writer is not None:
            out.write("".join(line + "\n" for line in writer.lines(shown)))
        else:
            times = TimeColumn.of(shown, clock, args.time_format, args.seconds_format == "hms")
            _write_text(args, chunk, shown, rows, times, out)
    if as_json:
        out.write(writer.close())
    out.flush()
    return ExitStatus.OK


def _setup(args):
    display = writer = None
    if args.display_filter is not None:
        from roceview.filter import compile_filter

        display = compile_filter(args.display_filter)
    if args.output_format == "json":
        return display, _json_writer(args)
    if (args.fields or args.field_options) and args.output_format != "fields":
        from roceview.errors import BadInput

        raise BadInput("-e and -E need -T fields")
    if args.output_format == "fields":
        from roceview.render.field_text import FieldWriter

        writer = FieldWriter(args.fields, args.field_options)
    return display, writer


def _json_writer(args):
    """-T json's writer; the options that write something else (another format, the tree, the
    bytes) or shape -T fields' text are refused in one line rather than ignored."""
    from roceview.errors import BadInput
    from roceview.render.tshark_json import TsharkJsonWriter

    other = [name for name, given in (("--jsonl", args.jsonl), ("-V", args.verbose), ("-x", args.hex),
                                      ("-E", args.field_options)) if given]
    if other:
        raise BadInput(f"-T json cannot be combined with {', '.join(other)}")
    return TsharkJsonWriter(args.fields)


def _named(display, writer, columns) -> bool:
    """Whether -Y or -e reads one of `columns`."""
    return bool(display is not None and display.fields & columns or writer is not None and writer.columns & columns)


def _two_passes(args, field: str, first: str) -> None:
    if "-" in args.capture:
        from roceview.errors import BadInput

        raise BadInput(f"{field} reads the capture twice ({first}, then packets): not from stdin")


def _finding_kinds(args, env, display, writer):
    """`roceview.finding` needs the findings of the whole capture: a first pass analyzes it
    (as `analyze` would), the second dissects it. None when neither -Y nor -e names the field."""
    from roceview.packets.flags import FINDING_COLUMN

    if not _named(display, writer, {FINDING_COLUMN}):
        return None
    _two_passes(args, "roceview.finding", "findings")
    from roceview.api import analyze
    from roceview.diagnose.evidence_frames import kinds_by_frame

    result = analyze(args.capture, roce_ports=args.roce_port, link_speed=args.link_speed, warn=lambda m: None)
    return kinds_by_frame(result)


def _operations(args, display, writer):
    """`roceview.op.*` needs every operation's completion: a first pass runs the analysis and
    keeps each operation's row (analysis/op_marks.py), the second writes them on the packets
    that carry them. None when neither -Y nor -e names such a field."""
    from roceview.filter.field_names import OP_COLUMNS

    if not _named(display, writer, OP_COLUMNS):
        return None
    _two_passes(args, "roceview.op", "operations")
    from roceview.analysis import op_marks

    return op_marks.operation_index(args.capture, roce_ports=args.roce_port, warn=lambda m: None)


def _limited(packets, count):
    """-c N: the first N packets read (as tshark, before the display filter)."""
    left = count
    for chunk, batch in packets:
        if left is not None:
            if left <= 0:
                break
            if batch.n > left:
                batch = batch.select(np.arange(left))
            left -= batch.n
        yield chunk, batch
        if left is not None and left <= 0:
            break


def _write_text(args, chunk, batch, rows, times, out) -> None:
    from roceview.analysis.packet_flags import packet_columns
    from roceview.render.lines import packet_lines
    from roceview.packets.table import to_dataframe

    colour = _is_terminal(out)
    if not (args.jsonl or args.verbose or args.hex):
        from roceview.render.lines import batch_text    # the default: lines from the numpy columns

        _write_bytes(out, batch_text(batch, None, args.link_speed, colour, times))
        return
    df = to_dataframe(batch, packet_columns() if "flags" in batch.cols else None)
    if args.jsonl:
        _write_jsonl(df, out, times)
    elif args.verbose:
        _print_details(chunk, df, batch, times, out, rows, hexdump=args.hex, gbps=args.link_speed)
    elif args.hex:
        from roceview.render.detail import hex_dump

        picked = range(batch.n) if rows is None else rows
        for line, k in zip(packet_lines(df, None, args.link_speed, colour, times), picked):
            out.write(line + "\n\n" + hex_dump(chunk.frame(k)) + "\n")


def _write_bytes(out, data: bytes) -> None:
    """UTF-8 lines straight into the byte buffer under a UTF-8 text stream (no decode and
    re-encode of ~100 MB per M packets); other streams (StringIO, another encoding) take text."""
    buffer = getattr(out, "buffer", None)
    if buffer is None or codecs.lookup(getattr(out, "encoding", None) or "ascii").name != "utf-8":
        out.write(data.decode("utf-8"))
        return
    out.flush()                                 # what was written as text goes first
    buffer.write(data)


def _is_terminal(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def _print_details(chunk, df, batch, times, out, rows, hexdump, gbps) -> None:
    """render.detail's tree; rich meets a closed pipe (`dissect -V | head`) with SystemExit(1)
    (Console.on_broken_pipe): the CLI ends that quietly with 0, like the other modes."""
    from roceview.render.detail import print_details

    try:
        print_details(chunk, df, None, out, batch.n, rows, hexdump=hexdump, gbps=gbps, times=times, batch=batch)
    except SystemExit as exc:
        if exc.code != 1:
            raise
        raise BrokenPipeError from None


def _write_jsonl(df, out, times) -> None:
    """Column names, nulls omitted; "flags" as the list of flag names (roceview.<name>); "time"
    as the line's time column shows it (-t, -u, the file's precision; ts_ns stays exact)."""
    from roceview.render.flag_text import flag_names
    from roceview.render.lines import time_texts

    names = list(df.columns)
    columns = []
    for name in names:
        s = df[name]
        null = s.isna().to_numpy()
        values = s.astype(object).to_numpy().tolist() if str(s.dtype) == "category" else s.to_numpy(dtype=object).tolist()
        columns.append([None if isnull else _plain(v) for v, isnull in zip(values, null)])
    if "flags" in names:
        at = names.index("flags")
        columns[at] = [flag_names(v) for v in columns[at]]
    names.append("time")
    columns.append(time_texts(times))
    for row in zip(*columns):
        out.write(json.dumps({k: v for k, v in zip(names, row) if v is not None}) + "\n")


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v

