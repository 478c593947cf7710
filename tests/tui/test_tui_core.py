"""The TUI's core without Textual: Analyzer.snapshot(), the loader, the packet index, the
ladder and the text helpers."""
from __future__ import annotations

import numpy as np
import pytest

from roceview.analysis import Analyzer
from roceview.api import analyze
from roceview.packets.read import iter_batches
from roceview.tui import ladder
from roceview.tui.loader import Loader, Options, exit_code
from roceview.tui.text import bars, hexdump
from helpers.tui import SAMPLES


def _tables(result):
    return {name: getattr(result, f"{name}_table").records() for name in ("flows", "pfc", "events", "timeline")}


@pytest.mark.parametrize("name", ["network-loss.pcap", "pfc-storm.pcap", "incast.pcap"])
def test_snapshots_while_feeding_leave_the_result_unchanged(name):
    path = str(SAMPLES / name)
    an, plain = Analyzer(), Analyzer()
    snaps = []
    for batch in iter_batches([path], chunk_packets=64, prefetch=False, projection="analysis"):
        an.feed(batch)
        plain.feed(batch)
        snaps.append(an.snapshot())
    result = an.finish(files=[path])
    expected = analyze(path, diagnose=False)
    # the same chunks without snapshots: a CNP's related frame needs its QP pair, which small
    # chunks may not know yet (docs/analysis.md), so the reference is fed the same chunks
    assert _tables(result) == _tables(plain.finish(files=[path]))
    assert snaps[-1].summary["packets"] == expected.summary["packets"]
    assert [s.summary["packets"] for s in snaps] == sorted(s.summary["packets"] for s in snaps)


def test_loader_posts_growing_snapshots_and_the_findings_of_analyze():
    path = str(SAMPLES / "incast.pcap")
    posted = []
    loader = Loader([path], Options(chunk_packets=256), on_snapshot=posted.append)
    loader.run()
    final = posted[-1]
    assert final.done and final.error is None and final.fraction == 1.0
    assert not any(s.done for s in posted[:-1])
    expected = analyze(path)
    assert final.result.findings_table.records() == expected.findings_table.records()
    assert _tables(final.result) == _tables(expected)
    assert exit_code(final, "warning") == (3 if expected.worst_severity() in ("warning", "critical") else 0)
    assert exit_code(final, None) == 0


def test_index_decodes_rows_like_the_packets_table():
    path = str(SAMPLES / "network-loss.pcap")
    loader = Loader([path], Options(chunk_packets=100))
    loader.run()
    full = next(iter_batches([path], prefetch=False))
    rows = np.array([200, 3, 150, 0])
    got = loader.index.decode(rows)
    for column in ("frame", "psn", "dest_qp", "ts_ns", "opcode", "wire_len"):
        assert got.cols[column].tolist() == full.cols[column][rows].tolist(), column
    frame, linktype = loader.index.frame_bytes(3)
    assert len(frame) == full.cols["cap_len"][3] and linktype == 1


@pytest.mark.parametrize("chunk", [7, 64])
@pytest.mark.parametrize("name", ["network-loss.pcap", "clean.pcap", "remote-error.pcap", "incast.pcap"])
def test_index_flow_ids_match_the_flows_table(name, chunk):
    """Every RoCE row gets its flow, held-back chunks (path-MTU evidence) included."""
    path = str(SAMPLES / name)
    loader = Loader([path], Options(chunk_packets=chunk))
    loader.run()
    flows = loader.latest.result.flows_table
    for fid in range(len(flows)):
        assert len(loader.index.flow_rows([fid])) == flows.data["packets"][fid]


def test_ladder_draws_marks_on_time_and_psn_axes():
    t = np.arange(10) * 1000
    lines = ladder.draw({"·": (t, np.arange(100, 110)), "N": (t[5:6], np.array([105]))}, width=30, height=5)
    assert len(lines) == 5 and lines[0].startswith("109│") and lines[-1].startswith("100│")
    assert lines[-1][4] == "·" and lines[0][-1] == "·"
    assert sum(line.count("N") for line in lines) == 1
    assert ladder.draw({}, 30, 5) == ["(no packets of this queue pair)"]


def test_psns_are_unwrapped_across_the_24_bit_boundary():
    assert ladder.unwrap_psn(np.array([0xFFFFFE, 0xFFFFFF, 0, 1])).tolist() == [0xFFFFFE, 0xFFFFFF, 1 << 24,
                                                                                    (1 << 24) + 1]


def test_hexdump_and_bars():
    assert hexdump(bytes(range(65, 75))).splitlines() == ["0000  41 42 43 44 45 46 47 48  ABCDEFGH",
                                                          "0008  49 4a                    IJ"]
    assert bars([0, 1, 2, 4], 4) == " ▂▄█"


def test_scapy_dissects_what_roceview_does_not():
    from scapy.layers.l2 import ARP, Ether

    from roceview.tui.detail_tree import scapy_nodes

    frame = bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.0.9"))
    nodes = scapy_nodes(frame, 1)
    assert [title for title, _ in nodes][:2] == ["Ethernet (scapy)", "ARP (scapy)"]
    assert any("pdst = '10.0.0.9'" in field for field, _ in nodes[1][1])


def test_rows_held_back_until_the_end_still_get_their_flow(tmp_path):
    """A READ request with no later path-MTU evidence is held by the Analyzer until finish():
    its rows are analyzed there, and the index must learn their flow then."""
    from roceview.capture.writer import write_pcapng

    loader = Loader([str(SAMPLES / "network-loss.pcap")])
    loader.run()
    opcodes = loader.index.decode(np.arange(20)).cols["opcode"]
    reads = [r for r in range(20) if opcodes[r] == 0x0C][:1]          # RC RDMA READ request
    assert reads
    frames = [loader.index.frame_bytes(r)[0] for r in reads]
    path = tmp_path / "read.pcapng"
    write_pcapng(path, frames, [1_700_000_000_000_000_000 + k for k in range(len(frames))])
    held = Loader([str(path)])
    held.run()
    assert held.latest.result.flows_table.data["packets"].tolist() == [1]
    assert held.index.flow_rows([0]).tolist() == [0]
