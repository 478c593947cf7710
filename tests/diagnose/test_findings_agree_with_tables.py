"""Every number a loss finding states about a QP is the number its table row shows, whatever
the capture, the --filter or the chunking: the finding and the QP table beside it are computed
from the same rows. Checked over every sample, every scenario freshly generated, each sample cut
down to one QP by a display filter, and every real capture (../shared, skipped when absent)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from roceview.api import analyze
from roceview.generate import SCENARIOS, generate, write_capture

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "captures").glob("*.pcap"))
REAL = REPO.parent / "shared" / "captures" / "real"
REAL_FILES = sorted(p for p in REAL.glob("*") if p.suffix in (".pcap", ".pcapng")) if REAL.is_dir() else []


def _rows(result) -> dict[str, dict]:
    d = result.flows_table.data
    return {name: {k: d[k][i] for k in d} for i, name in enumerate(d["flow"])}


def _check(result) -> int:
    """Asserts each network_loss finding against the table; the number of findings checked."""
    rows, checked = _rows(result), 0
    for f in result.findings.to_dict("records"):
        for flow in filter(None, f["flows"].split(";")):
            assert flow in rows, (f["kind"], flow)
        if f["kind"] != "network_loss":
            continue
        flow = re.match(r"Flow (\S+) lost", f["summary"]).group(1)
        resent = re.search(r"([\d,]+) packets? resent", f["summary"])
        if resent:      # the table's count, less what a reordering finding of the flow explains
            less = re.search(r"retx, ([\d,]+), less ([\d,]+) that reordering explains", f["evidence"])
            table = rows[flow]["retransmitted_packets"]
            if less:
                assert int(less.group(1).replace(",", "")) == table, f["evidence"]
                table -= int(less.group(2).replace(",", ""))
            assert int(resent.group(1).replace(",", "")) == table, f["summary"]
        else:
            assert "not recovered" not in f["summary"] and f["severity"] == "warning", f["summary"]
        naks = re.search(r"([\d,]+) NAKs?,", f["summary"])
        if naks:     # the NAKs the QP pair's rows count (the flow's and its peer's)
            me = rows[flow]
            table = sum(int(r["naks_seq"]) for r in rows.values()
                        if r is me or (r["src_ip"] == me["dst_ip"] and r["dst_ip"] == me["src_ip"]
                                       and r["dest_qp"] == me["peer_qp"]))
            assert int(naks.group(1).replace(",", "")) == table, (f["summary"], table)
        checked += 1
    return checked


@pytest.mark.parametrize("path", SAMPLES + REAL_FILES, ids=lambda p: p.name)
def test_loss_findings_quote_the_qp_table_whole_and_in_small_chunks(path):
    for chunk in (1 << 18, 97):
        _check(analyze([str(path)], chunk_packets=chunk, warn=lambda m: None))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_loss_findings_quote_the_qp_table_on_a_fresh_capture(scenario, tmp_path):
    path = tmp_path / f"{scenario}.pcap"
    write_capture(generate(scenario, seed=11), path)
    _check(analyze([str(path)], warn=lambda m: None))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_loss_findings_quote_the_qp_table_of_one_qp_filtered(path):
    whole = analyze([str(path)], warn=lambda m: None)
    d = whole.flows_table.data
    for qp, transport in zip(d["dest_qp"], d["transport"]):
        if transport == "RC":
            _check(analyze([str(path)], display_filter=f"infiniband.bth.destqp == {int(qp):#x}", warn=lambda m: None))


def test_the_filtered_network_loss_sample_is_checked_without_its_naks():
    """The case the property above stands for: a filter that keeps the data QP and drops its NAKs."""
    result = analyze([str(REPO / "captures" / "network-loss-receiver-side.pcap")],
                     display_filter="infiniband.bth.destqp == 0x034405", warn=lambda m: None)
    assert _check(result) == 1
    assert "6 gaps of 9 PSNs, no NAK captured, 32 packets resent" in result.findings.to_dict("records")[0]["summary"]
    only_naks = analyze([str(REPO / "captures" / "network-loss.pcap")],
                        display_filter="infiniband.bth.destqp == 0x03d6e5", warn=lambda m: None)
    assert _check(only_naks) == 1
    (loss,) = only_naks.findings.to_dict("records")
    assert "6 NAKs, the requester's direction not captured" in loss["summary"], loss["summary"]
