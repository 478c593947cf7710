"""`roceview convert CAPTURE -o FILE.parquet`: the packets table as Parquet."""
from __future__ import annotations

from roceview.commands.base import ExitStatus, add_capture_arguments, udp_port
from roceview.errors import BadInput, WriteError


def add_arguments(parser) -> None:
    add_capture_arguments(parser)
    parser.add_argument("-o", "--output", required=True, metavar="FILE.parquet", help="Parquet file to write")
    parser.add_argument("--roce-port", type=udp_port, action="append", default=[], metavar="P",
                        help="also decode UDP destination port P as RoCEv2 (repeatable)")
    parser.add_argument("--partition-by", choices=("flow",), default=None,
                        help="write a Parquet dataset directory partitioned by flow (flow_part=K/), the input of "
                             "a later `analyze --engine dask DIR`")


PARQUET_SUFFIXES = (".parquet", ".pq")


def run(args, env) -> ExitStatus:
    _check_suffix(args.output)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise BadInput("convert needs pyarrow: pip install 'roceview[parquet]'") from None
    from roceview.api import iter_packets
    from roceview.commands.progress import Progress, input_bytes, record_bytes

    if args.partition_by and args.output == "-":
        raise BadInput("--partition-by writes a folder of files: name it, not -")
    if args.partition_by:
        from roceview.packets.parquet import write_partitioned

        rows = write_partitioned(iter_packets(args.capture, roce_ports=args.roce_port, warn=env.warn), args.output)
        print(f"wrote {rows} packets to {args.output}", file=env.stderr)
        return ExitStatus.OK
    writer = None
    rows = 0
    total = input_bytes(args.capture) if env.stderr_isatty else None
    try:
        with Progress(env.stderr, "converting", total) as bar, _target(args.output, env) as fh:
            for df in iter_packets(args.capture, roce_ports=args.roce_port, warn=bar.warn):
                for name in df.select_dtypes("category").columns:   # categories differ per chunk
                    df[name] = df[name].astype("string")
                table = pa.Table.from_pandas(df, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(fh, table.schema)
                writer.write_table(table.cast(writer.schema))
                rows += len(df)
                bar.advance(len(df), record_bytes(df["cap_len"].to_numpy()) if bar.active else 0)
            if writer is not None:
                writer.close()
    except BrokenPipeError:     # `-o - | head`: quiet, as the other commands end on a closed pipe
        raise
    except OSError as exc:
        raise WriteError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {rows} packets to {args.output}", file=env.stderr)
    return ExitStatus.OK


def _target(output: str, env):
    """Where the Parquet bytes go: `-o -` is standard output (as tcpdump's `-w -`), anything
    else a temporary file renamed into place when whole."""
    from contextlib import nullcontext

    from roceview.capture.writer import atomic_output

    return nullcontext(env.stdout.buffer) if output == "-" else atomic_output(output)


def _check_suffix(output: str) -> None:
    """Parquet is all convert writes: `-o x.csv` is refused, not silently Parquet. A name with
    no suffix (`/dev/stdout`, a FIFO) is written as given."""
    import os

    suffix = os.path.splitext(output)[1].lower()
    if suffix and suffix not in PARQUET_SUFFIXES:
        raise BadInput(f"convert writes Parquet only: name the output *.parquet or *.pq (got {output!r})")
