"""pfc.pause_frames reads the events' pfc_priority / pfc_quanta columns into numpy rows; they
must equal what each event's detail text says (the per-event parse they replaced: time order,
then quanta), for several MACs, priorities, 802.3x PAUSE and XONs."""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from f15b_helpers import MACS, SWITCH_MAC, Cap
from roceview.analysis import Analyzer
from roceview.diagnose.config import Config
from roceview.diagnose.context import Context
from roceview.diagnose.pfc import pause_frames
from roceview.packets.read import iter_batches
from test_diagnose_boundaries import write_pcapng

PAUSE_DETAIL = re.compile(r"priority (\w+) quanta (\d+)")   # the detail text's words


def _per_event(ctx) -> dict:
    rows = defaultdict(list)
    for kind in ("pfc_pause", "pfc_resume"):
        for mac in ctx.flows_with(kind):
            ev = ctx.ev(kind, mac)
            for ts, d in zip(ev.ts.tolist(), ev.detail):
                m = PAUSE_DETAIL.search(d or "")
                if m:
                    rows[(mac, m.group(1))].append((ts, int(m.group(2))))
    return {k: sorted(v) for k, v in rows.items()}


def test_pause_frames_equal_the_per_event_parse(tmp_path):
    c = Cap()
    rng = np.random.default_rng(7)
    for i in range(600):
        mac = (SWITCH_MAC, MACS[1], MACS[2])[i % 3]
        if i % 7 == 0:
            c.pause(int(rng.choice([0, 0x8000, 0xFFFF])), mac=mac)
        else:
            c.pfc(int(rng.choice([0, 0x100, 0xFFFF])), mac=mac)
        c.at(int(rng.integers(0, 3000)))
    path = tmp_path / "p.pcapng"
    write_pcapng(path, c.frames, c.ts)
    an = Analyzer()
    for batch in iter_batches([str(path)], warn=lambda m: None):
        an.feed(batch)
    ctx = Context(an.finish(files=[str(path)]), Config())
    got = pause_frames(ctx)
    want = _per_event(ctx)
    assert sorted(got) == sorted(want) and len(want) == 6
    for key, rows in want.items():
        assert got[key].tolist() == [list(r) for r in rows], key
    assert pause_frames(ctx) is got                                   # built once per Context
