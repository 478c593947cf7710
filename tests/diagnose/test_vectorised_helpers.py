"""The diagnoser's numpy helpers against the straightforward code they stand for: the incast
windows' grouping by value (dense table or sort), the per-flow facts folded with numpy (against
a FlowFacts summed class by class), the flow groups by host, the CNPs back per flow and the
priorities of every flow at once (against flow_priorities, flow by flow).

Edge cases of the vectorised diagnoser (ea4246f..df2484b): inputs where its findings differed from
the loops it replaced (flows spelt alike)."""
from __future__ import annotations

import dataclasses
from collections import defaultdict
import numpy as np
import pytest
import roceview
from roceview.diagnose import DEFAULTS
from roceview.diagnose.context import Context, address_text
from roceview.diagnose.flow_arrays import distinct_codes, groups, sums
from roceview.diagnose.flow_facts import FlowFacts, add_class
from roceview.diagnose.priority import flow_priorities, flows_on, priority_rows
from roceview.diagnose.windows import first_rows, senders_per_key
from conftest import REAL, SAMPLES, capture_files
import ipaddress
import struct
import zlib


@pytest.mark.parametrize("values", [[], [5], [3, 3, 3], [-7, 2, -7, 40, 2], list(range(10, 0, -1))])
@pytest.mark.parametrize("limit", [0, 1, 1 << 16])          # 0 / 1: the sort, else the dense table
def test_distinct_codes_are_np_unique(values, limit):
    values = np.array(values, np.int64)
    distinct, inverse = distinct_codes(values, limit)
    want, want_inverse = np.unique(values, return_inverse=True)
    assert distinct.tolist() == want.tolist() and inverse.tolist() == want_inverse.reshape(-1).tolist()


@pytest.mark.parametrize("seed", range(4))
def test_first_rows_and_distinct_senders_per_key(seed):
    rng = np.random.default_rng(seed)
    n_keys, n_senders = int(rng.integers(1, 30)), int(rng.integers(1, 6))
    key = rng.integers(0, n_keys, int(rng.integers(0, 400)))
    sender = rng.integers(0, n_senders, len(key))
    first = [next((i for i, k in enumerate(key.tolist()) if k == j), len(key)) for j in range(n_keys)]
    assert first_rows(key, n_keys).tolist() == first
    want = [len({s for k, s in zip(key.tolist(), sender.tolist()) if k == j}) for j in range(n_keys)]
    for limit in (0, 1 << 16):
        assert senders_per_key(key, sender, n_keys, n_senders, limit).tolist() == want


@pytest.mark.parametrize("codes", [[], [0], [2, 0, 2, 1, 0], [4, 4, 4]])
def test_groups_and_sums_by_code(codes):
    codes = np.array(codes, np.int64)
    want: dict = defaultdict(list)
    for row, c in enumerate(codes.tolist()):
        want[c].append(row)
    got = groups(codes, np.arange(len(codes)))
    assert list(got) == sorted(want) and {k: v.tolist() for k, v in got.items()} == dict(want)
    values = np.arange(len(codes), dtype=np.int64) * 10
    assert sums(codes, values, 5).tolist() == [sum(values[codes == c].tolist()) for c in range(5)]


@pytest.mark.parametrize("path", capture_files(SAMPLES) + capture_files(REAL), ids=lambda p: p.name)
def test_folded_facts_and_flow_arrays_as_the_loops_over_classes_and_flows(path):
    result = roceview.analyze(str(path), warn=lambda m: None)
    ctx = Context(result, DEFAULTS, result.facts)
    table = ctx.flow_facts
    want: dict[str, FlowFacts] = defaultdict(FlowFacts)      # the fold it replaced, class by class
    for c in result.facts.classes:
        add_class(want[f"{address_text(c.src)}>{address_text(c.dst)}:0x{c.qp:06x}"], c)
    assert list(table) == list(want)
    for name, ff in want.items():
        assert repr(table[name]) == repr(ff)
        i = table.index[name]
        assert (table.data[i], table.data_ce[i], table.data_ect[i], table.data_v1[i], table.bad_icrc[i]) == (
            ff.data, ff.data_ce, ff.data_ect, ff.data_v1, ff.bad_icrc)
        assert bool(table.ecn_capable[i]) == bool(ff.protos - {"ib", "roce_v1"})
        assert (bool(table.v1[i]), bool(table.v2[i])) == ("roce_v1" in ff.protos, "roce_v2" in ff.protos)
    a = ctx.arrays
    for i, (name, f) in enumerate(ctx.flow.items()):
        assert bool(a.data_flow[i]) == bool(f["data_packets"] and f["transport"] not in ("CNP", "UD"))
        ff = want.get(name)
        assert (a.data[i], a.ce[i]) == ((ff.data, ff.data_ce) if ff else (f["data_packets"], f["ecn_ce"]))
        assert a.cnps_back[i] == ctx.cnps_from(f["dst_ip"], f["src_ip"])



@pytest.mark.parametrize("trust", ["auto", "dscp", "pcp"])
@pytest.mark.parametrize("path", capture_files(SAMPLES) + capture_files(REAL), ids=lambda p: p.name)
def test_priorities_of_every_flow_at_once_as_flow_priorities(path, trust):
    result = roceview.analyze(str(path), warn=lambda m: None)
    ctx = Context(result, dataclasses.replace(DEFAULTS, trust=trust, dscp_to_priority={"26": 5}), result.facts)
    for cnp in (False, True):
        got: dict = defaultdict(lambda: defaultdict(int))
        for row, p, n in zip(*(v.tolist() for v in priority_rows(ctx, cnp))):
            got[ctx.flow_names[row]][p] += n
        for name in ctx.flow:
            assert dict(got.get(name, {})) == dict(flow_priorities(ctx, name, cnp))
    rows = np.arange(len(ctx.flow_names))
    for prio in range(8):
        want = [not (ps := flow_priorities(ctx, n)) or prio in ps for n in ctx.flow_names]
        assert flows_on(ctx, rows, prio).tolist() == want


T0 = 1_700_000_000_000_000_000


def v6_frame(src: str, dst: str, qp: int, psn: int, ecn: int = 2, payload: int = 256) -> bytes:
    """Ethernet/IPv6/UDP 4791/BTH/RETH/payload/ICRC of a RoCEv2 WRITE ONLY (DSCP 26)."""
    body = bytes([0x0A, 0, 0xFF, 0xFF, 0]) + struct.pack("!I", qp)[1:] + b"\0" + struct.pack("!I", psn)[1:]
    body += struct.pack("!QII", 0x1000, 0x1234, payload) + bytes(payload)
    udp_len = 8 + len(body) + 4
    ip = (struct.pack("!IHBB", (6 << 28) | (((26 << 2) | ecn) << 20), udp_len, 17, 64)
          + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed)
    udp = struct.pack("!HHHH", 49152, 4791, udp_len, 0)
    masked = b"\xff" * 8 + b"\x6f\xff\xff\xff" + ip[4:7] + b"\xff" + ip[8:] + udp[:6] + b"\xff\xff"
    icrc = zlib.crc32(masked + body[:4] + b"\xff" + body[5:]) & 0xFFFFFFFF
    eth = bytes.fromhex("020000000002020000000001") + b"\x86\xdd"
    return eth + ip + udp + body + struct.pack("<I", icrc)


def write_pcap(path, frames: list[bytes], ts: list[int]) -> None:
    from roceview.capture.writer import write_pcap as write

    write(path, np.frombuffer(b"".join(frames), dtype=np.uint8), [len(f) for f in frames], ts)


def test_flows_spelt_alike_are_counted_once(tmp_path):
    """::fefe:1:5 and ::fefe:2:5 are both written lid:0x0005: two flows-table rows of one name,
    whose packet facts fold into one flow. The rules over every flow read the facts once per
    name, as the name lookups do (the vectorised rules read them once per row: 40 CE of 160)."""
    frames, ts = [], []
    for i in range(40):
        for k, src in enumerate(("::fefe:1:5", "::fefe:2:5")):
            frames.append(v6_frame(src, "::fefe:0:9", 0x11, 100 * k + i, ecn=3 if i % 4 == 0 else 0))
            ts.append(T0 + i * 1000 + k)
    path = tmp_path / "alike.pcap"
    write_pcap(path, frames, ts)
    result = roceview.analyze(str(path), warn=lambda m: None)
    assert result.flows_table.data["flow"] == ["lid:0x0005>lid:0x0009:0x000011"] * 2
    evidence = {f["kind"]: f["evidence"] for f in result.findings.to_dict("records")}
    assert evidence["ecn_congestion"].startswith("20 CE of 80 data packets into lid:0x0009;")
    assert evidence["ecn_not_enabled"].startswith("60 of 80 data packets (RoCEv2) from lid:0x0005 have ECN 00 in 1 flow")
