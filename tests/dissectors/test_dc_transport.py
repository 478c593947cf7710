"""ConnectX DC transport (opcodes 0x40-0x5F): the header layout of dissectors/opcodes.py.

The two real DC captures are read byte by byte here, independently of the declarations: the
8 vendor bytes after the BTH, then RDETH and DETH, then RETH (RDMA WRITE) or AETH
(ACKNOWLEDGE, which carries a DETH too). What tshark 4.0 cannot confirm (its RD ACKNOWLEDGE
has no RDETH, it hides what follows a RESYNC's BTH; test_decode_equals_tshark exception 9) is
confirmed by the bytes adding up: WRITE ONLY payloads equal their RETH DMA length and ACKs
end exactly at the ICRC.
"""
from __future__ import annotations

import struct

import pytest

import roceview
from conftest import REAL
from roceview.capture.readers import read_records

CAPTURES = ("magnate3_rocev2_dc-transport_a.pcap", "magnate3_rocev2_dc-transport_b.pcap")
BTH_LEN, DC_LEN, RDETH_LEN, DETH_LEN, ICRC_LEN = 12, 8, 4, 8, 4
WRITE_FIRST, WRITE_ONLY, ACKNOWLEDGE, RESYNC = 0x46, 0x4A, 0x51, 0x55


def _frames(path):
    out = []
    for chunk in read_records(str(path), 1 << 12, lambda m: None):
        out += [chunk.frame(i) for i in range(chunk.n)]
    return out


def _bth_at(frame: bytes) -> int:
    assert struct.unpack(">H", frame[12:14])[0] == 0x0800, "these captures are untagged IPv4"
    return 14 + (frame[14] & 0x0F) * 4 + 8


@pytest.fixture(params=CAPTURES)
def dc_capture(request):
    path = REAL / request.param
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared not checked out)")
    return path


def test_dc_captures_are_self_consistent(dc_capture):
    df = roceview.read_packets(dc_capture)
    frames = _frames(dc_capture)
    assert len(frames) == len(df) and (df.opcode.between(0x40, 0x5F)).all()
    checked = {WRITE_ONLY: 0, ACKNOWLEDGE: 0, RESYNC: 0, WRITE_FIRST: 0}
    for row, frame in zip(df.itertuples(), frames):
        at = _bth_at(frame) + BTH_LEN + DC_LEN           # RDETH, after the 8 vendor bytes
        udp_end = _bth_at(frame) - 8 + struct.unpack(">H", frame[_bth_at(frame) - 4:_bth_at(frame) - 2])[0]
        assert row.rdeth_ee_context == int.from_bytes(frame[at + 1:at + 4], "big")
        deth = at + RDETH_LEN
        assert row.deth_qkey == struct.unpack(">I", frame[deth:deth + 4])[0]
        assert row.deth_src_qp == int.from_bytes(frame[deth + 5:deth + 8], "big")
        after = deth + DETH_LEN
        if row.opcode in (WRITE_ONLY, WRITE_FIRST):
            va, rkey, dmalen = struct.unpack(">QII", frame[after:after + 16])
            assert (row.reth_va, row.reth_rkey, row.reth_dmalen) == (va, rkey, dmalen)
            payload = udp_end - ICRC_LEN - (after + 16) - int(row.pad)
            assert row.payload_len == payload
            if row.opcode == WRITE_ONLY:
                assert dmalen == payload, "a WRITE ONLY carries its whole DMA length"
        elif row.opcode == ACKNOWLEDGE:
            assert row.aeth_syndrome == frame[after]
            assert row.aeth_msn == int.from_bytes(frame[after + 1:after + 4], "big")
            if row.aeth_kind == "ACK":
                assert udp_end - ICRC_LEN == after + 4 and row.payload_len == 0, "an ACK ends at its AETH"
            else:
                assert row.aeth_kind == "NAK" and row.aeth_code == 4   # Invalid RD Request (IBTA Table 44)
        if row.opcode in checked:
            checked[row.opcode] += 1
    assert sum(checked.values()) > 0


def test_rd_acknowledge_is_an_ack_in_the_analysis(dc_capture):
    """The DC ACKs' AETH (after RDETH and DETH) classifies: acks / naks_other per flow."""
    res = roceview.analyze(dc_capture)
    flows = res.flows
    acks = flows.acks.sum() + flows.naks_other.sum()
    df = roceview.read_packets(dc_capture)
    assert acks == (df.opcode == ACKNOWLEDGE).sum() > 0


def test_dc_nak_invalid_rd_request_is_an_info_finding_not_remote_error(tmp_path):
    """A DC WRITE answered by NAK Invalid RD Request (code 4): finding invalid_rd_request
    (info) for that flow; remote_error (critical, the IBTA RC error-state rule) is not raised."""
    import dissectors.scapy_layers as S
    from test_scapy_layers import rocev2, write

    dc = S.EXT_CLASSES["DCETH"]
    write_req = rocev2(S.BTH(opcode=WRITE_ONLY, destqp=0x807FF4, psn=100, ackreq=1), dc(word0=0x11009036),
                       S.RDETH(eecnxt=7), S.DETH(qkey=0xC0DE), S.RETH(dmalen=8), S.Raw(b"\0" * 8))
    nak = rocev2(S.BTH(opcode=ACKNOWLEDGE, destqp=0x009035, psn=100), dc(word0=0x10807FF4), S.RDETH(eecnxt=7),
                 S.DETH(qkey=0xC0DE), S.AETH(syndrome=0x64, msn=0), src="10.0.0.2", dst="10.0.0.1")
    res = roceview.analyze(write(tmp_path / "dc.pcap", [write_req, nak]))
    kinds = dict(zip(res.findings.kind, res.findings.severity))
    assert kinds.get("invalid_rd_request") == "info" and "remote_error" not in kinds
    assert res.flows.naks_other.sum() == 1


def test_nak_code_4_on_an_rc_flow_stays_a_remote_error(tmp_path):
    """invalid_rd_request is for RD-range (DC) flows only: on RC, NAK code 4 is a protocol
    violation by the responder and keeps the critical remote_error."""
    import dissectors.scapy_layers as S
    from test_scapy_layers import rocev2, write

    req = rocev2(S.BTH(opcode=0x0A, destqp=0x12, psn=100, ackreq=1), S.RETH(dmalen=8), S.Raw(b"\0" * 8))
    nak = rocev2(S.BTH(opcode=0x11, destqp=0x34, psn=100), S.AETH(syndrome=0x64, msn=0),
                 src="10.0.0.2", dst="10.0.0.1")
    res = roceview.analyze(write(tmp_path / "rc.pcap", [req, nak]))
    kinds = dict(zip(res.findings.kind, res.findings.severity))
    assert kinds.get("remote_error") == "critical" and "invalid_rd_request" not in kinds
