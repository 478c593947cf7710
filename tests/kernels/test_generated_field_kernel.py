"""The decode kernel is generated from the header declarations: it must be current, and it must
agree with the plain numpy decoder that reads the same declarations (dissectors.fields)."""
from pathlib import Path

import numpy as np
import pytest

from dissectors.fields import decode_columns
from roceview.kernels import consts, fieldgen, layers
from roceview.capture.readers import read_records
from roceview.packets.decode import EXT_OFFSETS, O, decode_chunk, port_table

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT.parent / "shared" / "captures" / "real"
SAMPLES = sorted((ROOT / "captures").glob("*.pcap"))[:6] + sorted(REAL.glob("*.pcap*"))


def test_generated_kernel_is_current():
    text = fieldgen.generate()
    assert fieldgen.TARGET.read_text() == text, "run `python -m roceview.kernels.fieldgen` after changing a declaration"
    assert fieldgen.C_TARGET.read_text() == fieldgen.generate_c(), "the C kernel's header is stale: run fieldgen"
    assert fieldgen.fused_stamp() == fieldgen.dependency_digest(), \
        "fused.py must carry the digest of what it calls (numba's cache is keyed by fused.py alone)"


def _reference(chunk):
    """Every placed header's columns decoded by numpy gathers from the same offsets."""
    n = chunk.n
    o = np.empty((n, len(consts.OUT_FIELDS)), np.int64)
    meta = np.empty((n, 10), np.int64)
    layers.parse_layers(chunk.buf, chunk.off, chunk.cap, chunk.linktype, port_table(), o, meta)
    cap_end = chunk.off + chunk.cap
    cols, valid = {}, {}
    for header, where in fieldgen.PLACEMENTS:
        offsets = _offsets(header, where, o, meta, chunk)
        part_c, part_v = {}, {}
        decode_columns(header, chunk.buf, offsets, cap_end, part_c, part_v, n)
        for name, values in part_c.items():
            ok = part_v[name]
            cols[name] = np.where(ok, values, cols[name]) if name in cols else values
            valid[name] = (valid[name] | ok) if name in valid else ok
    return cols, valid


def _offsets(header, where, o, meta, chunk):
    from roceview.packets.batch import PROTO_CODE

    opc = np.where(o[:, O["bth"]] >= 0, chunk.buf[np.maximum(o[:, O["bth"]], 0)], -1)
    env = {"o": o, "meta": meta, "ext": EXT_OFFSETS, "PROTO_PFC": PROTO_CODE["pfc"],
           "PROTO_PAUSE": PROTO_CODE["pause"]}
    out = np.empty(len(o), np.int64)
    for i in range(len(o)):                      # small captures: clarity over speed
        env["i"], env["opc"] = i, int(opc[i])
        out[i] = eval(where.numba(), env)        # the placement expressions of the kernel
    return out


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_kernel_agrees_with_the_numpy_decoder(path):
    ports = port_table()
    for chunk in read_records(str(path), 1 << 18, print):
        batch = decode_chunk(chunk, ports, 1)
        cols, valid = _reference(chunk)
        for name in cols:
            got = name if name in batch.cols else f"_{name}"
            ok = valid[name]
            assert np.array_equal(batch.mask(got), ok), name
            assert np.array_equal(batch.cols[got][ok].astype(np.uint64), cols[name][ok].astype(np.uint64)), name
