"""The PFC/ECN rules do work that scales with flows, not events: hol_victim reads the incast
receivers from the incast rule's own findings (its windows computed once per Context), and
pfc_before_ecn names only the few flows its evidence shows, not every CE mark and CNP."""
from __future__ import annotations

import re

import pytest

from helpers.diagnose import findings_of, kinds, show
from helpers.findings import Cap, one, qp
from roceview.analysis import Analyzer
from roceview.diagnose import DEFAULTS, FactCollector, ecn, find
from roceview.diagnose.context import Context
from roceview.diagnose.pfc_order import pfc_order_findings
from roceview.generate import generate, write_capture
from roceview.packets.read import iter_batches

EPISODES, MARKS = 12, 40          # CE-marked writes per episode: 480 marks, 120 CNPs, 8 flows


def test_the_incast_windows_are_computed_once_when_hol_victim_asks_for_the_incast_receivers(tmp_path,
                                                                                             monkeypatch):
    path = tmp_path / "hol-victim.pcap"
    write_capture(generate("hol-victim", seed=0), path)
    calls = []
    windows = ecn._busiest_windows
    monkeypatch.setattr(ecn, "_busiest_windows", lambda *a: calls.append(1) or windows(*a))
    found = findings_of(path)
    assert "hol_victim" in kinds(found), show(found)
    assert len(calls) == 1


def _episodes(extra_cnp: bool) -> Cap:
    """EPISODES congestion episodes 300 us apart: a switch XOFF and XON on priority 3, 20 us
    later CE-marked writes from 10.0.0.2-5 into 10.0.0.1, each ACKed, a CNP back per 4 marks.
    With extra_cnp the first episode's first CE evidence is a CNP from 10.0.0.1 to 10.0.0.6
    that answers no data flow (10.0.0.6 sends it nothing): it is named by its own flow."""
    c, psn = Cap(), {s: 0 for s in range(1, 5)}
    for e in range(EPISODES):
        c.pfc(0x100).at(2_000).pfc(0).at(20_000)
        if extra_cnp and e == 0:
            c.cnp(0, 5).at(1_000)
        for k in range(MARKS):
            s = 1 + k % 4
            c.req(s, 0, psn[s], payload=64, ecn=3).ack(0, s, psn[s])
            psn[s] += 1
            if k % 4 == 3:
                c.cnp(0, s)
        c.at(300_000)
    return c


def _context(cap: Cap, tmp_path) -> tuple[Context, object]:
    from roceview.capture.writer import write_pcapng

    path = tmp_path / "episodes.pcapng"
    write_pcapng(path, cap.frames, cap.ts)
    analyzer, facts = Analyzer(), FactCollector()
    for batch in iter_batches([str(path)], warn=lambda m: None):
        analyzer.feed(batch)
        facts.feed(batch)
    result = analyzer.finish(files=[str(path)])
    return Context(result, DEFAULTS, facts.finish()), result


class CountedNames(list):
    """ctx.flow_names that counts the names read from it (by index)."""

    read = 0

    def __getitem__(self, i):
        CountedNames.read += 1 if isinstance(i, int) else len(range(*i.indices(len(self))))
        return super().__getitem__(i)


@pytest.mark.parametrize("extra_cnp", [False, True])
def test_the_ce_evidence_names_only_the_flows_its_finding_shows(tmp_path, monkeypatch, extra_cnp):
    ctx, result = _context(_episodes(extra_cnp), tmp_path)
    expected = [f for f in find(result, DEFAULTS, ctx.facts) if f["kind"] == "pfc_before_ecn"]
    monkeypatch.setattr(CountedNames, "read", 0)
    _ = ctx.arrays                               # the flow arrays are built before counting: not this rule's
    ctx.flow_names = CountedNames(ctx.flow_names)
    f = one(pfc_order_findings(ctx), "pfc_before_ecn")
    assert f["evidence"] == one(expected, "pfc_before_ecn")["evidence"]
    first = "10.0.0.1>10.0.0.6:0x" if extra_cnp else f"10.0.0.2>10.0.0.1:{qp(1, 0):#08x}"
    assert re.search(r"first (CNP|CE-marked packet) \(" + re.escape(first), f["evidence"]), f["evidence"]
    assert f"in {EPISODES} congestion episodes" in f["summary"]
    # a few names per episode (its first mark's flow and frame) and per flow, not one per mark or CNP
    assert CountedNames.read <= 3 * EPISODES + len(ctx.flow_names) < EPISODES * MARKS, CountedNames.read
