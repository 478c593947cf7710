"""The gzip reader (capture.source._GzipStream) inflates step by step with zlib-ng, or zlib
where zlib-ng is missing: the bytes it hands out are the decompressed capture, members
concatenated and zero padding skipped as the standard library's gzip does, and on cut or
corrupt data everything inflatable before the damage comes out before CorruptStream."""
from __future__ import annotations

import gzip
import io
import os
import threading
import zlib

import pytest

from roceview.capture import source
from roceview.capture.source import CorruptStream, _GzipStream

DATA = bytes(range(256)) * 300 + os.urandom(40_000) + b"roce" * 20_000


@pytest.fixture(params=["zlib-ng", "zlib"])
def inflater(request, monkeypatch):
    if request.param == "zlib":
        monkeypatch.setattr(source, "_inflate_module", lambda: (zlib, (zlib.error,)))
    else:
        pytest.importorskip("zlib_ng")
    return request.param


def _drain(stream, sizes=(1, 7, 4096, 1 << 20)) -> bytes:
    out, k = bytearray(), 0
    while True:
        buf = bytearray(sizes[k % len(sizes)])
        got = stream.readinto(buf)
        if not got:
            return bytes(out)
        out += buf[:got]
        k += 1


def _read(data: bytes) -> bytes:
    return _drain(_GzipStream(io.BytesIO(data), "t.gz"))


def test_one_member_comes_out_whole_whatever_the_read_sizes(inflater):
    assert _read(gzip.compress(DATA, 6)) == DATA


def test_members_are_concatenated_and_zero_padding_between_and_after_is_skipped(inflater):
    a, b, c = DATA[:1000], DATA[1000:70_000], DATA[70_000:]
    data = gzip.compress(a) + gzip.compress(b) + b"\0" * 5000 + gzip.compress(c) + b"\0" * 300
    assert _read(data) == DATA
    assert gzip.GzipFile(fileobj=io.BytesIO(data)).read() == DATA   # what the standard library makes of it


def test_an_empty_member_reads_as_nothing(inflater):
    assert _read(gzip.compress(b"")) == b""


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.97])
def test_a_cut_stream_hands_out_everything_before_the_cut_then_raises(inflater, fraction):
    whole = gzip.compress(DATA, 1)
    cut = whole[:int(len(whole) * fraction)]
    recoverable = zlib.decompressobj(31).decompress(cut)
    assert 0 < len(recoverable) < len(DATA)
    stream, out = _GzipStream(io.BytesIO(cut), "cut.gz"), bytearray()
    with pytest.raises(CorruptStream, match="cut.gz: corrupt gzip data"):
        while True:
            buf = bytearray(65536)
            got = stream.readinto(buf)
            assert got, "the cut stream ended without an error"
            out += buf[:got]
    assert bytes(out) == recoverable


def test_a_bad_trailer_crc_and_garbage_after_a_member_raise(inflater):
    member = bytearray(gzip.compress(DATA[:5000]))
    member[-8] ^= 0xFF                                      # CRC-32 of the trailer
    with pytest.raises(CorruptStream):
        _read(bytes(member))
    with pytest.raises(CorruptStream):
        _read(gzip.compress(DATA[:5000]) + b"not gzip")


def test_a_pipe_gives_a_complete_member_before_the_writer_closes(inflater):
    """stdin: what has arrived is inflated without waiting for a full input block."""
    r, w = os.pipe()
    os.write(w, gzip.compress(DATA[:3000]))
    result = {}

    def read():
        with open(r, "rb") as fh:
            buf = bytearray(1 << 16)
            stream = _GzipStream(fh, "<stdin>")
            result["head"] = stream.head
            result["got"] = stream.readinto(buf)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    alive = reader.is_alive()
    os.close(w)
    reader.join(10)
    assert not alive, "the reader waited for the writer to close"
    assert result["head"] == DATA[:4] and result["got"] >= 4


def test_a_bad_trailer_crc_hands_out_every_data_byte_first(inflater):
    """zlib gives nothing from a step that raises: the step is inflated again in pieces, so all
    the data before the damage comes out (here: all of it, the CRC is what is wrong)."""
    member = bytearray(gzip.compress(DATA, 6))
    member[-8] ^= 0xFF
    stream, out = _GzipStream(io.BytesIO(bytes(member)), "crc.gz"), bytearray()
    with pytest.raises(CorruptStream, match="crc.gz: corrupt gzip data"):
        while True:
            buf = bytearray(1 << 20)
            got = stream.readinto(buf)
            assert got, "the damaged stream ended without an error"
            out += buf[:got]
    assert bytes(out) == DATA


def test_damage_inside_the_deflate_data_keeps_what_inflates_before_it(inflater):
    whole = bytearray(gzip.compress(DATA, 6))
    whole[len(whole) // 2] ^= 0xFF
    d = zlib.decompressobj(31)
    expected = bytearray()
    for k in range(len(whole)):                     # byte by byte: all zlib yields before raising
        try:
            expected += d.decompress(bytes(whole[k:k + 1]))
        except zlib.error:
            break
    stream, out = _GzipStream(io.BytesIO(bytes(whole)), "mid.gz"), bytearray()
    with pytest.raises(CorruptStream):
        while True:
            buf = bytearray(1 << 20)
            got = stream.readinto(buf)
            assert got
            out += buf[:got]
    assert len(expected) > 0 and bytes(out) == bytes(expected)


def test_the_head_is_four_bytes_when_the_first_member_is_smaller(inflater):
    data = gzip.compress(DATA[:3]) + gzip.compress(DATA[3:])
    stream = _GzipStream(io.BytesIO(data), "split.gz")
    assert stream.head == DATA[:4]
    assert _drain(stream) == DATA


def test_read_of_zero_bytes_reads_nothing(inflater):
    stream = _GzipStream(io.BytesIO(gzip.compress(DATA)), "t.gz")
    assert stream.read(0) == b"" and stream.read(4) == DATA[:4]       # the head, then the inflater
    assert stream.read(0) == b"" and stream.read(6) == DATA[4:10]
    assert DATA[:10] + _drain(stream) == DATA


def test_closing_closes_the_file_it_owns_but_not_stdin(inflater):
    for owns in (True, False):
        raw = io.BytesIO(gzip.compress(DATA))
        stream = _GzipStream(raw, "t.gz", owns_raw=owns)
        stream.close()
        assert raw.closed is owns


def test_reading_gzip_from_stdin_leaves_stdin_open():
    import subprocess
    import sys

    from conftest import REPO, SAMPLES

    code = ("import sys, roceview; n = len(roceview.read_packets('-')); import gc; gc.collect(); "
            "print(n, sys.stdin.buffer.closed)")
    data = gzip.compress((SAMPLES / "clean.pcap").read_bytes())
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, cwd=REPO, check=True)
    n, closed = out.stdout.split()
    assert int(n) > 0 and closed == b"False"


def test_no_fcntl_module_is_no_error(monkeypatch):
    import builtins
    import sys

    real_import = builtins.__import__

    def no_fcntl(name, *args, **kwargs):
        if name == "fcntl":
            raise ImportError("no fcntl here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fcntl)
    source._widen_pipe(sys.stdin)                   # best effort: nothing raised
