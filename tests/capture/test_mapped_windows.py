"""Plain files are memory-mapped and walked in windows; gzip and stdin go through a read
buffer. Both paths must give the same packets table, across window and chunk boundaries."""
import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roceview.capture import readers
from roceview.capture.writer import pcapng_bytes, write_pcap
from roceview.packets.read import iter_batches

N = 9000
SIZES = 1000 + (np.arange(N) * 37) % 200          # frames straddle every window boundary


def _frames():
    rng = np.random.default_rng(7)
    return [bytes(rng.integers(0, 256, int(s), dtype=np.uint8)) for s in SIZES]


def _table(path, **kw):
    cols = {}
    for b in iter_batches(str(path), chunk_packets=1000, prefetch=False, **kw):
        for name in ("frame", "ts_ns", "wire_len", "cap_len", "ethertype"):
            cols.setdefault(name, []).append(b.cols[name])
    return {k: np.concatenate(v) for k, v in cols.items()}


@pytest.fixture(autouse=True)
def small_map_window(monkeypatch):
    """The 10 MB test files must span several memory-map windows too."""
    monkeypatch.setattr(readers, "MAP_WINDOW", 1 << 20)


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("windows")
    frames = _frames()
    ts = [1_700_000_000_000_000_000 + 1000 * i for i in range(N)]
    write_pcap(d / "big.pcap", np.frombuffer(b"".join(frames), np.uint8), SIZES, ts)
    (d / "big.pcapng").write_bytes(pcapng_bytes(frames, ts))
    for name in ("big.pcap", "big.pcapng"):
        (d / (name + ".gz")).write_bytes(gzip.compress((d / name).read_bytes(), 1))
    return d


def test_files_larger_than_a_window_are_read_whole(captures):
    assert (captures / "big.pcap").stat().st_size > max(readers.BUFFER_BYTES, 4 * readers.MAP_WINDOW)
    for name in ("big.pcap", "big.pcapng"):
        t = _table(captures / name)
        assert len(t["frame"]) == N
        assert t["wire_len"].tolist() == SIZES.tolist()


@pytest.mark.parametrize("name", ["big.pcap", "big.pcapng"])
def test_mapped_and_buffered_reads_agree(captures, name):
    mapped, buffered = _table(captures / name), _table(captures / (name + ".gz"))
    for col in mapped:
        assert np.array_equal(mapped[col], buffered[col]), col


def test_stdin_reads_the_same_packets(captures):
    code = ("import sys; from roceview.packets.read import iter_batches; "
            "print(sum(b.n for b in iter_batches('-', prefetch=False)))")
    with open(captures / "big.pcap", "rb") as fh:
        out = subprocess.run([sys.executable, "-c", code], stdin=fh, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(N)


def test_a_mapped_file_cut_in_a_record_keeps_the_records_before(captures, tmp_path):
    data = (captures / "big.pcap").read_bytes()
    (tmp_path / "cut.pcap").write_bytes(data[:-500])
    warnings = []
    n = sum(b.n for b in iter_batches(str(tmp_path / "cut.pcap"), prefetch=False, warn=warnings.append))
    assert n == N - 1
    assert len(warnings) == 1 and "middle of a record" in warnings[0]


def test_a_packet_of_an_undescribed_interface_stops_reading_with_a_warning(tmp_path):
    import struct

    data = bytearray(pcapng_bytes([bytes(60)] * 5, [1, 2, 3, 4, 5]))
    pos = k = 0
    while pos < len(data):                       # point the 4th EPB at interface 1 (never described)
        btype, blen = struct.unpack("<II", data[pos:pos + 8])
        if btype == 6:
            if k == 3:
                data[pos + 8:pos + 12] = struct.pack("<I", 1)
            k += 1
        pos += blen
    (tmp_path / "badif.pcapng").write_bytes(bytes(data))
    warnings = []
    n = sum(b.n for b in iter_batches(str(tmp_path / "badif.pcapng"), prefetch=False, warn=warnings.append))
    assert n == 3 and len(warnings) == 1 and "never described" in warnings[0]


@pytest.mark.parametrize("name", ["big.pcap", "big.pcapng", "big.pcap.gz", "big.pcapng.gz"])
def test_walking_ahead_on_another_thread_reads_the_same_table(captures, name, monkeypatch):
    """With prefetch, the next chunk is walked (a gzip stream read and inflated) on another
    thread while this one is decoded, and mapped pages are released a few windows behind:
    the table must not change."""
    monkeypatch.setattr(readers, "RELEASE_LAG", 2 * readers.MAP_WINDOW)
    monkeypatch.setattr(readers, "BUFFER_BYTES", 1 << 20)
    ahead = {}
    for b in iter_batches(str(captures / name), chunk_packets=1000):
        for col in ("frame", "ts_ns", "wire_len", "cap_len", "ethertype"):
            ahead.setdefault(col, []).append(b.cols[col])
    plain = _table(captures / name.removesuffix(".gz"))
    for col in plain:
        assert np.array_equal(np.concatenate(ahead[col]), plain[col]), col


@pytest.mark.parametrize("name", ["big.pcap", "big.pcapng"])
def test_a_buffered_chunk_keeps_its_bytes_after_the_next_is_read(captures, name, monkeypatch):
    """A refill reads into a fresh buffer: chunks read earlier (all of them, here, before any
    is looked at) still hold their own frames, as a memory map's do."""
    monkeypatch.setattr(readers, "BUFFER_BYTES", 1 << 20)
    frames = _frames()
    for path in (captures / name, captures / (name + ".gz")):
        chunks = list(readers.read_records(str(path), 500, lambda m: None))
        assert len(chunks) >= N // 500
        got = [c.frame(i) for c in chunks for i in range(c.n)]
        assert got == frames, path.name


def test_the_decode_worker_keeps_no_chunk_alive():
    """decode_chunk hands half of a big chunk to its worker thread; once it returns, nothing of
    the chunk may stay referenced there (a held view of a memory map cannot be closed)."""
    import gc
    import weakref

    from roceview.capture.readers import read_records
    from roceview.packets.decode import SPLIT_MIN, decode_chunk, port_table

    path = Path(__file__).resolve().parents[2] / "captures" / "capture-drop.pcap"
    chunk = next(read_records(str(path), 1 << 16, lambda m: None))
    chunk = type(chunk)(**{**chunk.__dict__, **{k: getattr(chunk, k).repeat(SPLIT_MIN // chunk.n + 1)
                                                 for k in ("off", "cap", "wire", "ts", "iface", "linktype")}})
    assert chunk.n >= SPLIT_MIN            # the worker thread decodes the second half
    buf, batch = weakref.ref(chunk.buf), decode_chunk(chunk, port_table(), 1)
    assert batch.n == chunk.n
    del chunk, batch
    gc.collect()
    assert buf() is None, "the decode worker still holds the chunk's buffer"


def test_reading_starts_at_once_and_stops_when_the_iterator_is_dropped(captures):
    """iter_batches(prefetch=True) starts reading on its worker thread before the first
    next() (analyze imports its analysis modules meanwhile); a consumer that drops the
    iterator early must not leave that thread behind, blocked on a full queue."""
    import gc
    import threading
    import time

    def readers_alive():
        return [t for t in threading.enumerate() if t.name == "roceview-read"]

    assert not readers_alive()
    batches = iter_batches(str(captures / "big.pcap"), chunk_packets=1000)
    deadline = time.monotonic() + 5
    while batches._queue.qsize() < 2 and time.monotonic() < deadline:    # no next() called yet
        time.sleep(0.01)
    assert batches._queue.qsize() == 2, "the worker did not read ahead before the first next()"
    assert next(batches).n > 0
    del batches
    gc.collect()
    deadline = time.monotonic() + 5
    while readers_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not readers_alive(), "the read-ahead thread outlived its iterator"


_IMPORT_ORDER_PROBE = r"""
import sys
import roceview.packets.read as packets
seen = []
start = packets.Prefetched.__init__
def recording(self, *a, **k):
    if not seen:
        seen.append(sorted(m for m in ("roceview.analysis", "roceview.diagnose") if m in sys.modules))
    start(self, *a, **k)
packets.Prefetched.__init__ = recording
import roceview
result = roceview.analyze(sys.argv[1])
print(len(result.flows), seen[0])
"""


def test_analyze_starts_reading_before_the_analysis_modules_import():
    """api.analyze starts the reader first and imports the analysis and diagnoser modules
    (~15-20 ms) while the first chunk is read, as docs/DESIGN.md says."""
    sample = Path(__file__).resolve().parents[2] / "captures" / "clean.pcap"
    proc = subprocess.run([sys.executable, "-c", _IMPORT_ORDER_PROBE, str(sample)], capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    flows, imported = proc.stdout.split(maxsplit=1)
    assert int(flows) > 0 and imported.strip() == "[]", proc.stdout
