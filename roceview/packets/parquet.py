"""The packets table as a Parquet dataset partitioned by flow (`convert --partition-by flow`),
and read back as Batches in capture order (`analyze --engine dask DATASET.parquet/`).

Layout: Hive partitions `flow_part=K/` (K = CRC-32 of the unordered address pair mod BUCKETS), so
both directions of a queue pair (requests and their ACKs / READ responses) and the reverse flow
CM pairing looks for land in one partition; rows without IP addresses (PFC, PAUSE, LLDP) go by
the unordered MAC pair. The `frame` column keeps the merged capture order: reading back sorts
on it, so the analysis sees the packets in the order the local engine did. Any Parquet reader
(pandas, polars, DuckDB, Spark) reads the dataset as one table.
"""
from __future__ import annotations

import ipaddress
import os
import zlib
from pathlib import Path

import numpy as np

from roceview.packets.batch import PROTO_NAMES, Batch
from roceview.packets.names import mac_int
from roceview.errors import BadInput, WriteError

PARTITION = "flow_part"
BUCKETS = 64
_STRINGS = ("src_mac", "dst_mac", "proto", "src_ip", "dst_ip", "opcode_name", "transport", "aeth_kind")
_DERIVED = ("opcode_name", "transport", "aeth_kind", "cm_message", PARTITION)   # recomputed, not read back


def flow_buckets(df) -> np.ndarray:
    """Per row, the partition of its unordered address pair (MAC pair where no IP)."""
    import pandas as pd

    src = df["src_ip"].astype("string").fillna("mac " + df["src_mac"].astype("string").fillna(""))
    dst = df["dst_ip"].astype("string").fillna("mac " + df["dst_mac"].astype("string").fillna(""))
    swap = (src > dst).to_numpy(bool)
    lo, hi = src.where(~swap, dst), dst.where(~swap, src)
    codes, pairs = pd.factorize(lo + ">" + hi)
    buckets = np.array([zlib.crc32(p.encode()) % BUCKETS for p in pairs], np.int32)
    return buckets[codes]


def write_partitioned(frames, output: str) -> int:
    """Write the DataFrames `frames` (the packets table in chunks) under `output`, atomically
    (a hidden directory beside it, renamed at the end). Returns the rows written."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from roceview import interrupt

    out = Path(output)
    if out.exists():
        raise WriteError(f"cannot write {output}: it exists (a dataset is written as a new directory)")
    tmp = out.parent / f".{out.name}.partial"
    rows, schema = 0, None

    def tables():
        nonlocal rows, schema
        for df in frames:
            for name in df.select_dtypes("category").columns:      # categories differ per chunk
                df[name] = df[name].astype("string")
            df[PARTITION] = flow_buckets(df)
            table = pa.Table.from_pandas(df, preserve_index=False)
            schema = schema or table.schema
            rows += len(df)
            yield from table.cast(schema).to_batches()

    try:
        first = _peek(tables())
        if first is None:
            raise BadInput("no packets to write")
        batches, head = first
        interrupt.remove_on_interrupt(tmp, "tree")      # Ctrl-C: no hidden folder left behind
        ds.write_dataset(_chain(head, batches), tmp, schema=head.schema, format="parquet",
                         partitioning=ds.partitioning(pa.schema([(PARTITION, pa.int32())]), flavor="hive"),
                         existing_data_behavior="delete_matching", max_rows_per_group=1 << 16)
        with interrupt.deferred():
            os.replace(tmp, out)
            interrupt.forget(tmp)
    except OSError as exc:
        _remove(tmp)
        raise WriteError(f"cannot write {output}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(tmp)
        raise
    finally:
        interrupt.forget(tmp)
    return rows


def _peek(it):
    for head in it:
        return it, head
    return None


def _chain(head, rest):
    yield head
    yield from rest


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def is_dataset(path: str) -> bool:
    """A directory holding Parquet files (directly or in partitions), no capture files."""
    p = Path(path)
    return p.is_dir() and any(p.rglob("*.parquet"))


def frame_range(path: str) -> tuple[int, int]:
    """The first and last frame number of the dataset (from the Parquet statistics)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    frames = ds.dataset(path, format="parquet", partitioning="hive").to_table(columns=["frame"])["frame"]
    if not len(frames):
        raise BadInput(f"{path}: the Parquet dataset has no packets")
    bounds = pc.min_max(frames)
    return int(bounds["min"].as_py()), int(bounds["max"].as_py())


def read_frames(path: str, lo: int, hi: int, projection: str | None = "analysis") -> dict:
    """On a worker: rows with lo <= frame < hi, in frame order, as the decoder's columns (the
    public columns with their validity, the raw `_` columns rebuilt from the strings; with a
    projection, not the header fields it leaves out), packed for the trip (wire.py)."""
    import pyarrow.dataset as ds

    from roceview.packets.wire import pack
    from roceview.packets.decode import LAYOUTS

    data = ds.dataset(path, format="parquet", partitioning="hive")
    skipped = set(LAYOUTS[None].columns) - set(LAYOUTS[projection].columns) - set(_STRINGS)
    columns = [c for c in data.schema.names if c not in skipped and c not in _DERIVED]
    table = data.to_table(columns=columns, filter=(ds.field("frame") >= lo) & (ds.field("frame") < hi))
    return pack([_to_batch(table.sort_by("frame"))], unsent=())


def _to_batch(table) -> Batch:
    n = table.num_rows
    b = Batch(n)
    for name in table.column_names:
        if name in _DERIVED or name in _STRINGS:
            continue
        col = table[name]
        values = col.to_numpy(zero_copy_only=False) if col.null_count == 0 else None
        if values is None:
            valid = ~col.is_null().to_numpy(zero_copy_only=False)
            values = col.fill_null(False if col.type.equals(_bool()) else 0).to_numpy(zero_copy_only=False)
            b.valid[name] = valid
        elif name not in _NEVER_NULL:
            b.valid[name] = np.ones(n, bool)
        b.cols[name] = values
    codes, names = _codes(table["proto"])
    b.cols["_proto"] = np.array([PROTO_NAMES.index(p) for p in names] + [0], np.uint8)[codes]
    for side in ("src", "dst"):
        b.cols[f"_{side}_mac"], b.valid[f"_{side}_mac"] = _mapped(table[f"{side}_mac"], mac_int, np.uint64)
        b.cols[f"_{side}_addr"], b.valid[f"_{side}_addr"] = _mapped(table[f"{side}_ip"], _addr_bytes, None)
    return b


def _codes(col) -> tuple[np.ndarray, list]:
    """A string column as (codes, -1 where null; its distinct values): formatted once each."""
    encoded = col.combine_chunks().dictionary_encode()
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, encoded.dictionary.to_pylist()


def _mapped(col, convert, dtype) -> tuple[np.ndarray, np.ndarray]:
    codes, names = _codes(col)
    if dtype is None:                                    # 16-byte addresses
        raw = np.frombuffer(b"".join(map(convert, names)) + bytes(16), np.uint8).reshape(-1, 16)
        return raw[codes].copy(), codes >= 0
    return np.array([convert(v) for v in names] + [0], dtype)[codes], codes >= 0


_NEVER_NULL = ("frame", "ts_ns", "wire_len", "cap_len", "interface", "truncated")


def _bool():
    import pyarrow as pa

    return pa.bool_()


def _addr_bytes(text: str) -> bytes:
    """names.address_text inverted: lid:0x.... (IB LIDs), IPv4 (as ::ffff:a.b.c.d), IPv6/GIDs."""
    if text.startswith("lid:"):
        return b"\0" * 10 + b"\xfe\xfe" + b"\0\0" + int(text[4:], 16).to_bytes(2, "big")
    addr = ipaddress.ip_address(text)
    if addr.version == 4:
        return b"\0" * 10 + b"\xff\xff" + addr.packed
    return addr.packed
