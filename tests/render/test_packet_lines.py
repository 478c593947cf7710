"""`dissect`'s one-line summaries, built column-wise (render/lines.py, line_parts.py,
line_tags.py), against the same lines formatted packet by packet (tests/helpers/lines.py) on a
crafted capture with every kind of line and on generated fault scenarios with every flag."""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import roceview.packets.read as P
from roceview.analysis.annotate import analyzed
from roceview.analysis.packet_flags import packet_columns
from roceview.generate import generate, write_capture
from roceview.render.cells import cells_text
from roceview.render.line_parts import seconds
from roceview.render.lines import batch_text, packet_lines, packet_rows, packet_text
from roceview.packets.table import to_dataframe

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.analysis import write_rows_pcap  # noqa: E402
from helpers.lines import kitchen_sink, reference_line  # noqa: E402

SCENARIOS = ("network-loss", "tail-timeout", "rnr", "remote-error", "incast", "pfc-storm", "double-mirror",
             "capture-bad-icrc", "mixed-roce-versions", "psn-wrap")
# a piece of each kind of line and of each tag: the inputs must hold them all
KINDS = ("RoCEv1 ", "RoCEv2 ", " AckReq", " SE", " FECN", " BECN", " NAK(", " RNR_NAK(timer=", "enable=0x00  VLAN",
         "quanta=0 (XON)", "DCBX PFC enable=0x", "ethertype=0x", " CE", " PCP=", " mirror=", "[bad ICRC]",
         "[truncated]", "fe80::1 → 2001:db8::2", "[PSN gap: ", "[Timeout retransmission of frame",
         "[Retransmission of frame", "[Duplicate frame]", "[NAK ", "[RNR NAK: retry in", "[ECN CE]",
         "[CNP for CE frame", "[Pause P", "[Pause all", "[Resume P", "[Resume all]", "[RTT ", "[PSN reuse]")


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("lines")
    paths = [kitchen_sink(folder / "kitchen.pcap")]
    for name in SCENARIOS:
        write_capture(generate(name), folder / f"{name}.pcap")
        paths.append(folder / f"{name}.pcap")
    write_rows_pcap(folder / "reuse.pcap", _psn_reuse_rows())
    return paths + [folder / "reuse.pcap"]


def _psn_reuse_rows() -> list[dict]:
    """A SEND reusing the last PSN of its own READ (test_analysis_response_space's case)."""
    from helpers.analysis import A, B, READ_FIRST, READ_LAST, READ_REQUEST, T0, req

    us = 1000
    return [req(T0, 10, opcode=READ_REQUEST, payload=0, dmalen=2048, ackreq=True),
            dict(ts=T0 + us, psn=10, opcode=READ_FIRST, src=B, dst=A, qp=0xC1, payload=1024, syndrome=0x1F),
            dict(ts=T0 + 2 * us, psn=11, opcode=READ_LAST, src=B, dst=A, qp=0xC1, payload=1024, syndrome=0x1F),
            req(T0 + 3 * us, 11, opcode=0x04, ackreq=True)]


def _reference(df, first_ts, gbps=100.0, colour=False, places=6) -> list[str]:
    """The per-packet lines, the time cut (not rounded, as tshark) to `places` decimals: 6 for a
    DataFrame (it does not carry the file's precision), 9 for a Batch of a ns capture."""
    ns = df["ts_ns"].to_numpy(np.int64) - first_ts
    lines = [reference_line(row, quanta, 0.0, gbps, colour) for row, quanta in packet_rows(df)]
    return [line[:8] + _cut(t, places).rjust(12) + line[20:] for line, t in zip(lines, ns.tolist())]


def _cut(ns: int, places: int) -> str:
    whole, frac = divmod(abs(ns), 10 ** 9)
    return f"{'-' if ns < 0 else ''}{whole}.{frac // 10 ** (9 - places):0{places}d}"


def _frames(paths):
    for path in paths:
        for batch in analyzed(P.iter_batches(path, chunk_packets=500)):
            yield to_dataframe(batch, packet_columns())


@pytest.mark.parametrize("gbps, colour", [(100.0, False), (25.0, True)])
def test_lines_equal_the_per_packet_formatting(captures, gbps, colour):
    seen = []
    for df in _frames(captures):
        first = int(df["ts_ns"].iloc[0]) - 1_234_567
        lines = packet_lines(df, first, gbps, colour)
        assert lines == _reference(df, first, gbps, colour)
        seen += lines
    text = re.sub("\x1b\\[[0-9;]*m", "", "\n".join(seen))
    assert [k for k in KINDS if k not in text] == []
    assert not any(line.endswith(" ") for line in seen)


def test_lines_without_the_analysis_columns(captures):
    for path in captures[:3]:
        for batch in P.iter_batches(path, chunk_packets=97):
            df = to_dataframe(batch)
            assert packet_lines(df, None) == _reference(df, int(df["ts_ns"].iloc[0]))


def test_large_blocks_and_text_bytes(captures, monkeypatch):
    """Several blocks of rows per call (BLOCK_ROWS), from a DataFrame and from a Batch (dissect)."""
    import roceview.render.lines as lines

    monkeypatch.setattr(lines, "BLOCK_ROWS", 7)
    for batch in analyzed(P.iter_batches(captures[0])):
        df = to_dataframe(batch, packet_columns())
        expected = "".join(line + "\n" for line in _reference(df, 5, 40.0))
        assert packet_text(df, 5, 40.0).decode("utf-8") == expected
        nine = "".join(line + "\n" for line in _reference(df, 5, 40.0, places=9))
        assert batch_text(batch, 5, 40.0).decode("utf-8") == nine       # the Batch knows the file's ns
    assert packet_text(df.iloc[:0], None) == b"" and batch_text(batch.select(np.arange(0)), None) == b""


def test_relative_times_round_as_python_formats_the_float():
    rng = np.random.default_rng(7)
    ns = np.concatenate([rng.integers(0, 10 ** 13, 20000) // 1000 * 1000 + 500, rng.integers(0, 10 ** 15, 20000),
                         np.array([0, 500, 1500, 7_812_500, 999_999_500, -1, -500, 10 ** 16 + 500, 2 ** 62])])
    assert cells_text(seconds(ns, 12)) == [f"{v / 1e9:12.6f}" for v in ns.tolist()]


def test_dissect_writes_the_same_lines(captures):
    from helpers.cli import run

    status, out, _ = run("dissect", captures[0])
    df = next(_frames(captures[:1]))
    assert status == 0 and out == "".join(line + "\n" for line in _reference(df, int(df["ts_ns"].iloc[0]), places=9))


def test_binary_stdout_gets_utf8_bytes(captures, tmp_path):
    """dissect writes the bytes under a UTF-8 text stream; what was written as text before stays first."""
    from roceview.commands.dissect import _write_bytes

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    out.write("head\n")
    _write_bytes(out, "1 → 2\n".encode())
    out.flush()
    assert raw.getvalue().decode("utf-8") == "head\n1 → 2\n"
    text = io.StringIO()
    _write_bytes(text, "1 → 2\n".encode())
    assert text.getvalue() == "1 → 2\n"
