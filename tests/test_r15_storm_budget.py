"""Review of issue 15 item 5: the storm rule reads pause periods from the event log, which keeps
only the first MAX_PER_KIND events of a kind (1 M pauses: 250,000). The finding must not state the
storm's length and frame count of that prefix as if they were the whole capture's."""
from __future__ import annotations

from f15b_helpers import Cap, one
from roceview.analysis.events import EventLog


def test_a_storm_beyond_the_event_budget_says_it_saw_only_the_first_frames(tmp_path, monkeypatch):
    monkeypatch.setattr(EventLog.__init__, "__defaults__", (400,))     # 1,000 XOFFs, 400 kept as events
    c = Cap()
    for _ in range(1000):
        c.pfc(0xFFFF).at(300_000 - 100)                                  # refreshed every 300 us: 300 ms paused
    found = c.findings(tmp_path)
    storm = one(found, "pfc_storm")
    assert "in the first 400 pause/resume frames of this source" in storm["summary"], storm["summary"]
    assert "600 later pause/resume frames of the capture were not kept" in storm["summary"]
    assert "1,000 pause frames" in one(found, "pfc_pause")["summary"]        # the PFC table is exact


def test_a_storm_within_the_budget_says_nothing_of_it(tmp_path):
    c = Cap()
    for _ in range(1000):
        c.pfc(0xFFFF).at(300_000 - 100)
    storm = one(c.findings(tmp_path), "pfc_storm")
    assert "paused continuously for 299.700 ms" in storm["summary"] and "not kept" not in storm["summary"]
