"""Several files given to `roceview tui` are merged in time as `analyze` merges them
(files overlapping in time read one after the other gave false gaps and retransmissions)."""
from __future__ import annotations

import numpy as np
import pytest

from roceview.api import analyze
from roceview.packets.read import iter_batches
from roceview.tui.loader import Loader, Options
from helpers.tui import SAMPLES


def _split(tmp_path, name: str, parts: int) -> list[str]:
    """The sample's frames dealt round-robin into `parts` pcaps: every file spans the capture."""
    from roceview.capture.writer import write_pcapng

    path = str(SAMPLES / name)
    loader = Loader([path])
    loader.run()
    rows = loader.index.rows
    out = []
    for k in range(parts):
        mine = range(k, rows, parts)
        frames = [loader.index.frame_bytes(r)[0] for r in mine]
        ts = [int(loader.index.ts.a[r]) for r in mine]
        out.append(str(tmp_path / f"part{k}.pcapng"))
        write_pcapng(out[-1], frames, ts)
    return out


def _tables(result):
    return {name: getattr(result, f"{name}_table").records() for name in ("flows", "pfc", "events", "timeline")}


@pytest.mark.parametrize("chunk", [16, 1 << 16])
@pytest.mark.parametrize("name,parts", [("network-loss.pcap", 2), ("incast.pcap", 3), ("pfc-storm.pcap", 2)])
def test_overlapping_files_give_the_numbers_of_analyze(tmp_path, name, parts, chunk):
    files = _split(tmp_path, name, parts)
    loader = Loader(files, Options(chunk_packets=chunk))
    loader.run()
    final = loader.latest
    # the same chunking: a CNP's related frame needs its QP pair, which tiny chunks may not know yet
    expected = analyze(files, chunk_packets=chunk)
    assert final.done and final.error is None and final.fraction == 1.0
    assert _tables(final.result) == _tables(expected)
    assert final.result.findings_table.records() == expected.findings_table.records()
    assert final.packets == expected.summary["packets"]


def test_the_packet_list_of_merged_files_is_in_analyze_frame_order(tmp_path):
    files = _split(tmp_path, "network-loss.pcap", 2)
    loader = Loader(files, Options(chunk_packets=16))
    loader.run()
    full = next(iter_batches(files, prefetch=False))
    rows = np.array([0, 1, 2, 3, 100, 7, 234])
    got = loader.index.decode(rows)
    for column in ("frame", "psn", "ts_ns", "opcode", "src_qp", "dest_qp"):
        col = column if column in full.cols else None
        if col:
            assert got.cols[col].tolist() == full.cols[col][rows].tolist(), col
    assert loader.index.file.view()[:4].tolist() == [0, 1, 0, 1]
    frame, _ = loader.index.frame_bytes(1)
    assert len(frame) == int(full.cols["cap_len"][1])


def test_scapy_dissects_ip_udp_of_lan_frames_not_raw():
    """A LAN frame (IPv4/UDP) in the packet tree: scapy's IP and UDP layers, not one 'Raw'."""
    from roceview.tui.detail_tree import scapy_nodes

    frame = bytes.fromhex("74d83ee794ab60f262ebb78e0800450000289" "6a300000111ceeac0a8b27ee00000fc"
                          "d40514eb0014c9f9" "000000000000000000000000")
    titles = [title for title, _ in scapy_nodes(frame, 1)]
    assert titles[:3] == ["Ethernet (scapy)", "IP (scapy)", "UDP (scapy)"], titles
