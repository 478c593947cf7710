"""MADs of random bytes (any class, any attribute, CM messages of random content), cut at random
lengths, over RoCEv2, RoCEv1 and native IB: the packets table reads every declared field from
the bytes where they were captured and nothing where they were not, and dissect (lines, -V,
--jsonl, -T fields of every CM field) and the connections collector take them without an error.

Seeded and bounded: ROCEVIEW_FUZZ_EXAMPLES sets the tries (CI: 40), ROCEVIEW_FUZZ_SEED the seed."""
from __future__ import annotations

import io
import os
import random

import numpy as np
import pandas as pd
from helpers import cm_frames

import roceview
from dissectors import cm
from dissectors.fields import field_value
from roceview.analysis.connections import ConnectionLog
from roceview.capture.writer import write_pcap
from roceview.filter import field_names as F
from roceview.packets.read import iter_batches

TRIES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "40"))
SEED = int(os.environ.get("ROCEVIEW_FUZZ_SEED", "3212"))
ATTRS = list(cm.MESSAGES) + [0x0001, 0x0035, 0xFFFF]


def _fuzzed(rng: random.Random) -> tuple[list[bytes], list[int], list[tuple]]:
    """(captured bytes, wire lengths, (MAD offset, MAD bytes written) per frame)."""
    frames = [f for f in cm_frames.build() if not f.transport.startswith("ib")]     # Ethernet: one link type
    out, wires, truth = [], [], []
    for _ in range(TRIES):
        base = rng.choice(frames)
        at = base.data.index(base.mad)
        mad = bytearray(rng.randbytes(cm.MAD_LEN))
        mad[1] = cm.MGMT_CLASS_CM if rng.random() < 0.8 else rng.randrange(256)
        mad[16:18] = rng.choice(ATTRS).to_bytes(2, "big")
        data = base.data[:at] + bytes(mad) + base.data[at + cm.MAD_LEN:]
        cut = len(data) if rng.random() < 0.5 else rng.randrange(at, len(data))
        out.append(data[:cut])
        wires.append(len(data))
        truth.append((at, bytes(mad[:max(0, cut - at)])))
    return out, wires, truth


def _write(path, frames, wires) -> str:
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames],
               [1_700_000_000_000_000_000 + 1000 * i for i in range(len(frames))], wire_lengths=wires)
    return str(path)


def _dissect(*argv) -> str:
    from roceview.cli import Environment, main

    out, err = io.StringIO(), io.StringIO()
    assert main(["dissect", *map(str, argv)], Environment(stdout=out, stderr=err)) == 0, err.getvalue()
    return out.getvalue()


def test_random_mads_read_what_their_bytes_say_and_break_nothing(tmp_path):
    rng = random.Random(SEED)
    frames, wires, truth = _fuzzed(rng)
    path = _write(tmp_path / "fuzz.pcap", frames, wires)
    df = roceview.read_packets(path)
    assert len(df) == TRIES
    for i, (_, mad) in enumerate(truth):
        _check_row(df.iloc[i], mad)
    names = [d.name for d in F.CM_FIELDS if d.kind != F.NONE]
    lines = _dissect(path, "-T", "fields", *[a for n in names for a in ("-e", n)]).splitlines()
    assert len(lines) == TRIES
    assert len(_dissect(path).splitlines()) == TRIES and _dissect(path, "-V").count("\nFrame ") == TRIES - 1
    assert len(_dissect(path, "--jsonl").splitlines()) == TRIES
    log = ConnectionLog()
    for batch in iter_batches([path], chunk_packets=7, prefetch=False):
        log.feed(batch)
    assert len(log.table()) <= TRIES


def _check_row(row, mad: bytes) -> None:
    """Each column of the MAD header and of the message its attribute names: the bytes' value
    where the field was captured, null where it was not; another message's columns null."""
    if len(mad) < cm.MAD_HEADER_LEN and pd.isna(row["mad_class"]):
        return
    message = cm.MESSAGES.get(int.from_bytes(mad[16:18], "big")) if len(mad) >= 18 and \
        mad[1] == cm.MGMT_CLASS_CM else None
    mine = {f.column: f for f in (message.header.columns if message else ())}
    for f in cm.MAD.columns:
        _check(row, f.column, mad, 0, f)
    for column in {f.column for h in cm.HEADERS for f in h.columns} - {f.column for f in cm.MAD.columns}:
        if column in mine and len(mad) >= cm.MAD_HEADER_LEN:
            _check(row, column, mad, cm.MAD_HEADER_LEN, mine[column])
        else:
            assert pd.isna(row[column]), column


def _check(row, column: str, mad: bytes, base: int, f) -> None:
    if base + f.end <= len(mad):
        assert row[column] == field_value(mad, base, f), column
    else:
        assert pd.isna(row[column]), column
