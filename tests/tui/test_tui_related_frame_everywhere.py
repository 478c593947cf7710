"""`r`'s related frame on every packet of samples with each kind of relation: it is the one
the analysis columns name (rel_frame, either way) or, from a NAK, a later retransmission of the
PSN it asks for sent the other way; every packet with a relation has one, and its words name
the flag. Then `r`, `b` and moves pressed in a seeded random order: the cursor is always where
a stack of the jumps says (ROCEVIEW_FUZZ_EXAMPLES presses more keys)."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

from helpers.tui import SAMPLES, app_for, loaded
from roceview.packets.flags import Flag
from roceview.tui.loader import Loader
from roceview.tui.packets_screen import NAMES, related_frame

# NAKs and retransmissions, RNR NAKs, duplicates (two mirror points), CNPs, timeouts, RTT samples
RELATED = ["network-loss.pcap", "rnr.pcap", "two-point-mirror.pcap", "incast.pcap", "tail-timeout.pcap"]
KEYS = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "20"))
NAK = int(Flag.NAK | Flag.RNR_NAK)


def _ends(cols, valid, i):
    if valid["_src_addr"][i] and valid["_dst_addr"][i]:
        return bytes(cols["_src_addr"][i]), bytes(cols["_dst_addr"][i])
    return int(cols["_src_mac"][i]), int(cols["_dst_mac"][i])


@pytest.mark.parametrize("name", RELATED)
def test_each_related_frame_is_one_the_analysis_names(name):
    loader = Loader([str(SAMPLES / name)])
    loader.run()
    index = loader.index
    batch = index.decode(np.arange(index.rows))
    cols, valid = batch.cols, batch.valid
    rel = np.where(valid["rel_frame"], cols["rel_frame"] - 1, -1)
    named = set(rel[rel >= 0].tolist())
    words = {w for _, mine, theirs in NAMES for w in (mine, theirs)} | {"the retransmission this NAK caused"}
    kinds = set()
    for row in range(index.rows):
        got = related_frame(index, row)
        if got is None:
            assert rel[row] < 0 and row not in named, row + 1
            continue
        target, what = got
        assert what in words, what
        kinds.add(what)
        if what == "the retransmission this NAK caused":
            assert cols["flags"][row] & NAK and cols["flags"][target] & Flag.RETRANSMISSION and target > row
            assert cols["psn"][target] == cols["psn"][row]
            assert _ends(cols, valid, target) == _ends(cols, valid, row)[::-1]
        else:
            assert rel[row] == target or rel[target] == row, (row + 1, target + 1)
    assert len(kinds) >= 3, kinds


@pytest.mark.asyncio
async def test_random_jumps_and_moves_go_back_exactly_as_a_stack():
    rng = random.Random(31)
    app = app_for("network-loss.pcap")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        plist, index = app.screen.plist, app.index
        app.notify = lambda *args, **kwargs: None
        here, trail = 0, []
        for _ in range(KEYS):
            key = rng.choice(["r", "r", "r", "b", "b", "up", "down", "jump"])
            if key == "jump":
                here = rng.randrange(index.rows)
                plist.goto(here)
            else:
                await pilot.press(key)
                if key == "r" and (got := related_frame(index, here)) is not None:
                    trail.append(here)
                    here = got[0]
                elif key == "b" and trail:
                    here = trail.pop()
                elif key in ("up", "down"):
                    here = min(max(here + (1 if key == "down" else -1), 0), index.rows - 1)
            await pilot.pause()
            assert plist.current_row() == here, key
        assert app.errors == []
