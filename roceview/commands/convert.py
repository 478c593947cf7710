"""`roceview convert CAPTURE -o FILE.parquet`: the packets table as Parquet."""
from __future__ import annotations

from roceview.cli import ExitStatus
from roceview.errors import BadInput, WriteError


def add_arguments(parser) -> None:
    parser.add_argument("capture", nargs="+", help="pcap/pcapng file(s), gzip ok, '-' for stdin, or a directory")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.parquet", help="Parquet file to write")
    parser.add_argument("--roce-port", type=int, action="append", default=[], metavar="P",
                        help="also decode UDP destination port P as RoCEv2 (repeatable)")
    parser.add_argument("--partition-by", choices=("flow",), default=None,
                        help="write a Parquet dataset directory partitioned by flow (flow_part=K/), the input of "
                             "a later `analyze --engine dask DIR`")


def run(args, env) -> ExitStatus:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise BadInput("convert needs pyarrow: pip install 'roceview[parquet]'") from None
    from roceview.capture.writer import atomic_output
    from roceview.packets import iter_packets

    if args.partition_by:
        from roceview.parquet_dataset import write_partitioned

        rows = write_partitioned(iter_packets(args.capture, roce_ports=args.roce_port, warn=env.warn), args.output)
        print(f"wrote {rows} packets to {args.output}", file=env.stderr)
        return ExitStatus.OK
    writer = None
    rows = 0
    try:
        with atomic_output(args.output) as fh:
            for df in iter_packets(args.capture, roce_ports=args.roce_port, warn=env.warn):
                for name in df.select_dtypes("category").columns:   # categories differ per chunk
                    df[name] = df[name].astype("string")
                table = pa.Table.from_pandas(df, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(fh, table.schema)
                writer.write_table(table.cast(writer.schema))
                rows += len(df)
            if writer is not None:
                writer.close()
    except OSError as exc:
        raise WriteError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {rows} packets to {args.output}", file=env.stderr)
    return ExitStatus.OK
