"""The C decode kernels (_ckernel.c) and the numba fallback give identical results.

Both backends decode every sample, every real capture, the tshark zoo and damaged copies
(byte flips, cut records) through the same Python (readers, decode_chunk); every column,
validity mask and record array must be equal. ROCEVIEW_REQUIRE_CKERNEL=1 (as .ci/run sets)
makes a missing C build a failure instead of a skip.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from roceview.kernels import backend as kernels
from roceview.capture.readers import read_records
from roceview.packets.decode import decode_chunk, port_table

from conftest import REAL, SAMPLES, capture_files


def _backend(name: str):
    if name == "numba":
        return kernels._Numba()
    try:
        return kernels._C()
    except (ImportError, OSError, AttributeError) as exc:
        if os.environ.get("ROCEVIEW_REQUIRE_CKERNEL") == "1":
            pytest.fail(f"the C kernel is not built ({exc}) but ROCEVIEW_REQUIRE_CKERNEL=1", pytrace=False)
        pytest.skip(f"the C kernel is not built: {exc}")


@pytest.fixture(scope="module")
def backends():
    return _backend("c"), _backend("numba")


def _decode_all(path: Path, backend, monkeypatch, chunk=4096, projection=None):
    """Every chunk's records and decoded batch with `backend`'s walks and decode kernel."""
    import roceview.packets.decode as decode

    for name in ("walk_pcap", "walk_pcapng", "decode_records", "parse_layers"):
        monkeypatch.setattr(kernels, name, getattr(backend, name))
    monkeypatch.setattr(decode, "decode_records", backend.decode_records)
    out, warnings = [], []
    for chunk in read_records(str(path), chunk, warnings.append):
        records = {k: getattr(chunk, k).copy() for k in ("off", "cap", "wire", "ts", "iface", "linktype")}
        out.append((records, decode_chunk(chunk, port_table(), 1, projection)))
    return out, warnings


def _assert_same(path: Path, backends, monkeypatch, projection=None):
    c_side, c_warn = _decode_all(path, backends[0], monkeypatch, projection=projection)
    nb_side, nb_warn = _decode_all(path, backends[1], monkeypatch, projection=projection)
    assert c_warn == nb_warn
    assert len(c_side) == len(nb_side)
    for (rc, bc), (rn, bn) in zip(c_side, nb_side):
        for k in rc:
            assert np.array_equal(rc[k], rn[k]), f"{path.name}: records.{k}"
        assert bc.cols.keys() == bn.cols.keys() and bc.valid.keys() == bn.valid.keys()
        for k in bc.cols:
            assert np.array_equal(bc.cols[k], bn.cols[k]), f"{path.name}: column {k}"
        for k in bc.valid:
            assert np.array_equal(bc.valid[k], bn.valid[k]), f"{path.name}: valid {k}"
    return sum(b.n for _, b in c_side)


CORPUS = capture_files(SAMPLES) + capture_files(REAL)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_c_and_numba_agree(path, backends, monkeypatch):
    assert _assert_same(path, backends, monkeypatch) > 0


@pytest.mark.parametrize("path", CORPUS[::3], ids=lambda p: p.name)
def test_c_and_numba_agree_on_the_analysis_projection(path, backends, monkeypatch):
    assert _assert_same(path, backends, monkeypatch, "analysis") > 0


def test_c_and_numba_agree_on_the_zoo(backends, monkeypatch, tmp_path):
    from helpers.zoo import build_zoo, zoo_ts
    from roceview.capture.writer import pcapng_bytes

    frames, ifaces, _ = build_zoo()
    path = tmp_path / "zoo.pcapng"
    path.write_bytes(pcapng_bytes(frames, [zoo_ts(i) for i in range(len(frames))],
                                  interfaces=[(1, 9), (197, 9), (113, 6), (276, 9)], if_ids=ifaces))
    assert _assert_same(path, backends, monkeypatch) == len(frames)


@pytest.mark.parametrize("seed", range(12))
def test_c_and_numba_agree_on_damaged_files(seed, backends, monkeypatch, tmp_path):
    """Byte flips anywhere (record headers included) and a cut: both stop at the same
    place, with the same warnings and the same columns for what they read."""
    plain = [p for p in CORPUS if p.suffix in (".pcap", ".pcapng")]
    rng = random.Random(seed)
    src = plain[seed % len(plain)]
    data = bytearray(src.read_bytes())
    for _ in range(1 + len(data) // 2000):
        at = rng.randrange(24, len(data))
        data[at] = rng.randrange(256)
    del data[rng.randrange(len(data) // 2, len(data)):]
    path = tmp_path / src.name
    path.write_bytes(bytes(data))
    try:
        _assert_same(path, backends, monkeypatch)
    except Exception as exc:          # a damaged header may be bad input: then for both alike
        from roceview.errors import BadInput

        if not isinstance(exc, BadInput):
            raise


def test_default_backend_is_c_when_built():
    if os.environ.get("ROCEVIEW_KERNEL") == "numba":
        pytest.skip("numba forced")
    _backend("c")
    assert kernels.BACKEND == "c"


def test_analyze_with_the_c_kernel_never_imports_numba(tmp_path):
    """numba's import and JIT-cache load cost 0.5-0.8 s per run: with the C kernel built,
    `roceview analyze` must not pay them."""
    import subprocess
    import sys

    _backend("c")
    sample = capture_files(SAMPLES)[0]
    code = ("import sys, io, contextlib\nfrom roceview.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['analyze', {str(sample)!r}, '--csv', {str(tmp_path / 'out')!r}])\n"
            "print(rc, 'numba' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "ROCEVIEW_KERNEL"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() in (["0", "False"], ["3", "False"]), out.stdout + out.stderr


def test_an_inner_frame_said_to_start_past_the_record_has_no_bytes(backends, monkeypatch, tmp_path):
    """GRE flags announcing checksum, key and sequence words the record does not hold put the
    decapsulated frame past the record's end: cap_len 0 (not a negative length wrapped to
    4 G), truncated, nothing decoded from it, and both backends agree."""
    import struct

    from roceview.capture.writer import write_pcap

    gre = struct.pack(">HH", 0xB000, 0x6558)                       # C, K, S bits; TEB
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(gre), 0, 0, 64, 47, 0, bytes(4), bytes(4))
    frame = bytes(6) + bytes(6) + b"\x08\x00" + ip + gre
    path = tmp_path / "gre-past-end.pcap"
    write_pcap(path, np.frombuffer(frame, np.uint8), np.array([len(frame)]), np.array([1_700_000_000_000_000_000]))
    assert _assert_same(path, backends, monkeypatch) == 1
    (_, batch), = _decode_all(path, backends[0], monkeypatch)[0]
    assert int(batch.cols["cap_len"][0]) == 0 and bool(batch.cols["truncated"][0])
    assert not batch.mask("_src_mac")[0]


def test_the_slice_by_8_crc_tables_give_zlibs_crc32():
    """The fallback ICRC loop's tables (crc.CRC_TABLES), used as slice-by-8 is defined."""
    import zlib

    from roceview.kernels.crc import CRC_TABLES

    t = CRC_TABLES.astype(np.int64).tolist()
    data = bytes(range(256)) * 3 + b"roceview icrc"
    crc, i = 0xFFFFFFFF, 0
    while len(data) - i >= 8:
        lo = crc ^ int.from_bytes(data[i:i + 4], "little")
        hi = int.from_bytes(data[i + 4:i + 8], "little")
        crc = (t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24]
               ^ t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24])
        i += 8
    for b in data[i:]:
        crc = t[0][(crc ^ b) & 0xFF] ^ (crc >> 8)
    assert crc ^ 0xFFFFFFFF == zlib.crc32(data)
