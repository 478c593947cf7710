"""Review of issue 16 item 3: report wording where the counts are small."""
from __future__ import annotations

import io

from analysis_helpers import T0, write_rows_pcap
from roceview.cli import Environment, main


def _report(path) -> str:
    out = io.StringIO()
    assert main(["analyze", str(path)], Environment(stdin=io.StringIO(), stdout=out, stderr=io.StringIO())) == 0
    return out.getvalue()


def test_no_flows_is_not_ranked_worst_first(tmp_path):
    """A PAUSE-only capture said 'Queue pairs (0 flows, worst first)' over 'no RoCE traffic'."""
    rows = [dict(ts=T0 + i * 1000, proto="pause", quanta=q) for i, q in enumerate((0xFFFF, 0))]
    write_rows_pcap(tmp_path / "p.pcap", rows)
    text = _report(tmp_path / "p.pcap")
    assert "Queue pairs\n  no RoCE traffic" in text, text
    assert "0 flows, worst first" not in text


def _v6_capture(path) -> None:
    """Two directions of an RC QP over RoCEv2/IPv6 with global addresses (86-character flow names)."""
    import socket
    import struct

    import numpy as np

    from roceview.capture.writer import write_pcap

    def frame(src, dst, qp, psn, opcode):
        body = struct.pack("!BBHI", opcode, 0, 0xFFFF, qp) + struct.pack("!I", 0x80000000 | psn)
        body += struct.pack("!QII", 0x1000, 0x1234, 256) + bytes(256) if opcode == 0x0A else struct.pack("!I", 1)
        udp = struct.pack("!HHHH", 49152, 4791, 8 + len(body) + 4, 0)
        ip6 = struct.pack("!IHBB16s16s", (6 << 28) | (106 << 20), len(udp) + len(body) + 4, 17, 64,
                          socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst))
        return bytes.fromhex("020000000002020000000001") + b"\x86\xdd" + ip6 + udp + body + bytes(4)

    a, b = "2001:db8:1234:5678:9abc:def0:1234:5678", "2001:db8:1234:5678:9abc:def0:1234:9999"
    frames = [f for i in range(20) for f in (frame(a, b, 0x12, 100 + i, 0x0A), frame(b, a, 0x34, 100 + i, 0x11))]
    ts = np.array([T0 + i * 1000 for i in range(len(frames))], np.int64)
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames], ts)


def _qp_lines(text: str) -> list[str]:
    block = text.split("Queue pairs", 1)[1].split("\n\n", 1)[0]
    return block.splitlines()[1:]


def test_ipv6_flows_at_80_columns_keep_qp_numbers_and_the_counters(tmp_path, monkeypatch):
    """86-character IPv6 flow names at 80 columns: the table was the flow name cut at '...:0…',
    both directions alike, and no number at all."""
    _v6_capture(tmp_path / "v6.pcap")
    monkeypatch.setenv("COLUMNS", "80")
    text = _report(tmp_path / "v6.pcap")
    lines = _qp_lines(text)
    assert max(map(len, text.splitlines())) <= 80
    assert lines[0].rstrip().endswith("CNP"), lines[0]
    rows = lines[2:4]
    assert rows[0].split(" ")[0].endswith(":0x000012") and rows[1].split(" ")[0].endswith(":0x000034"), rows
    assert "addresses shortened" in " ".join(text.split())
    monkeypatch.setenv("COLUMNS", "120")
    assert "Gb/s" in _qp_lines(_report(tmp_path / "v6.pcap"))[0]
    out = io.StringIO()
    main(["analyze", str(tmp_path / "v6.pcap"), "--wide"], Environment(stdin=io.StringIO(), stdout=out,
                                                                        stderr=io.StringIO()))
    assert "2001:db8:1234:5678:9abc:def0:1234:5678>2001:db8:1234:5678:9abc:def0:1234:9999:0x000012" in out.getvalue()


def test_short_flow_names_stay_whole_for_ipv4_and_when_they_would_collide():
    from roceview.render.report import _short_flows

    v4 = ["192.168.242.57>192.168.242.56:0x001315"]
    assert _short_flows(v4, 30, "…") == v4
    alike = ["2001:db8:1111:aaaa:bbbb:cccc:dddd:1>2001:db8::2:0x000001",
             "2001:db8:2222:aaaa:bbbb:cccc:dddd:1>2001:db8::2:0x000001"]
    assert _short_flows(alike, 36, "…") == alike                     # the middles differ: kept whole
