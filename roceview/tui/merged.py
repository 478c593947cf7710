"""Several capture files for the TUI, merged in time exactly as `analyze` merges them
(roceview.packets.merge.merge_in_time, the reading of packets.read.merged), with each row's record place
carried along so the packet index still points at its bytes.

Files that overlap in time (two mirror ports, requests in one file and responses in the other)
read one after the other gave the TUI other numbers than `analyze`: PSNs seemingly going
backwards, retransmissions and gaps that are not there, a 'timestamps_backwards' finding.
Here every merged batch carries, per row, its file (`_file`), record offset, lengths and link
type (`_rec_*`) and whether that file is memory-mapped (`_mapped`: a gzip file is a stream).
"""
from __future__ import annotations


import numpy as np

from roceview.packets.batch import Batch

REC_COLUMNS = ("off", "cap", "wire", "linktype")


def tag_places(chunk, batch: Batch) -> None:
    """Note on a merged file's batch where its rows' records are (packets.read.decoded's tag):
    the rows of a merged batch come from several files' chunks, so the packet index finds each
    row's bytes through these columns (record_places)."""
    for name in REC_COLUMNS:
        batch.cols["_rec_" + name] = np.array(getattr(chunk, name), copy=True)
    batch.cols["_mapped"] = np.full(batch.n, is_mapped(chunk), bool)


def is_mapped(chunk) -> bool:
    """The chunk's offsets are offsets in its file (read through a memory map, not a stream)."""
    import mmap

    base = getattr(getattr(chunk, "buf", None), "base", None)
    return isinstance(getattr(base, "obj", base), mmap.mmap)


def record_places(batch: Batch) -> dict | None:
    """Per row: file, record offset, lengths, time, link type; None when a row's file is a
    stream (its bytes cannot be read again) or the batch is not a merged one."""
    cols = batch.cols
    if "_rec_off" not in cols or not bool(np.all(cols["_mapped"])):
        return None
    out = {name: cols["_rec_" + name] for name in REC_COLUMNS}
    out["file"], out["ts"] = cols["_file"], cols["ts_ns"]
    if "_ts_digits" in cols:                   # each file's time precision (packets/times.py)
        out["digits"] = cols["_ts_digits"]
    return out
