"""In Packets, `r` goes to the related frame (Wireshark's "Go to linked packet"): a NAK -> the
retransmission it caused (else the frame that opened the gap it reports), a retransmission ->
the frame that first carried its PSN, a response closing an RTT sample -> its request, a CNP
-> the CE-marked frame it answers, and a frame another one names (a request, a first send) ->
that frame (its response, its retransmission). `b` (or Backspace) goes back, through every
jump, to the exact frame each one left. A related frame the list does not show (a filter, a
QP's packets) is named in one notification and the cursor stays: `c` lists all packets."""
from __future__ import annotations

import pytest

from helpers.tui import SAMPLES, app_for, loaded, scanned
from roceview.tui.base import compile_filter

pytestmark = pytest.mark.asyncio
SAMPLE = "network-loss.pcap"
# (frame, its related frame) in network-loss.pcap, as `dissect` tells them
PAIRS = [(46, 47),     # NAK PSN sequence error -> the retransmission of PSN 3531345 it caused
         (49, 40),     # [Retransmission of frame 40] -> frame 40
         (40, 49),     # a first send -> its retransmission
         (15, 12),     # ACK [RTT ... to frame 12] -> the request
         (12, 15),     # the AckReq request -> the ACK closing its RTT sample
         (1, 13)]      # a READ request -> its first response


def frame(app) -> int:
    return app.screen.plist.current_row() + 1


async def at_frame(pilot, number: int) -> None:
    pilot.app.screen.plist.goto(number - 1)
    await pilot.pause()


async def packets(pilot, notes: list) -> None:
    """Screen 3 of the loaded sample, its notifications recorded in `notes`."""
    await loaded(pilot)
    await pilot.press("3")
    await pilot.pause()
    pilot.app.notify = lambda message, **kwargs: notes.append(message)


async def test_r_goes_to_the_related_frame_and_b_comes_back():
    app, notes = app_for(SAMPLE), []
    async with app.run_test(size=(100, 30)) as pilot:
        await packets(pilot, notes)
        for start, related in PAIRS:
            await at_frame(pilot, start)
            await pilot.press("r")
            await pilot.pause()
            assert frame(app) == related, (start, notes[-1:])
            tree = app.screen.query_one("#packet-tree")
            assert str(tree.root.label).startswith(f"Frame {related} ")
            await pilot.press("b")
            await pilot.pause()
            assert frame(app) == start


async def test_back_retraces_several_jumps_to_the_exact_frames_left_and_a_dead_end_is_said_once():
    app, notes = app_for(SAMPLE), []
    async with app.run_test(size=(100, 30)) as pilot:
        await packets(pilot, notes)
        await at_frame(pilot, 46)
        seen = [46]
        for expected in (47, 38):            # NAK -> its retransmission -> the first send
            await pilot.press("r")
            await pilot.pause()
            assert frame(app) == expected
            seen.append(expected)
        await pilot.press("down")            # moved by hand to frame 39: back comes here
        await pilot.press("r")
        await pilot.pause()
        assert frame(app) == 48              # frame 39's retransmission
        seen[-1] = 39
        for expected in reversed(seen):
            await pilot.press("backspace" if expected % 2 else "b")
            await pilot.pause()
            assert frame(app) == expected
        notes.clear()
        await pilot.press("b")               # nothing left: said once, the cursor stays
        await pilot.pause()
        assert frame(app) == 46 and len(notes) == 1
        notes.clear()
        await at_frame(pilot, 2)             # a WRITE FIRST without AckReq, no flag: no relation
        await pilot.press("r")
        await pilot.pause()
        assert frame(app) == 2 and len(notes) == 1 and "frame 2" in notes[0]


async def test_a_related_frame_the_filter_hides_is_named_and_the_cursor_stays():
    app, notes = app_for(SAMPLE), []
    async with app.run_test(size=(100, 30)) as pilot:
        await packets(pilot, notes)
        text = "roceview.nak"
        app.apply_filter(text, compile_filter(text)[0])
        await scanned(pilot, app.screen)
        listed = [int(r) + 1 for r in app.screen.plist.rows]
        assert 46 in listed and 47 not in listed
        await at_frame(pilot, 46)
        await pilot.press("r")
        await pilot.pause()
        assert frame(app) == 46
        assert len(notes) == 1 and "47" in notes[0] and "filter" in notes[0], notes
        await pilot.press("c")               # all packets again, the cursor still on 46
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert frame(app) == 47


async def test_r_works_on_a_streams_ring():
    from roceview.packets.read import iter_batches
    from roceview.tui import make_app

    app, notes = make_app(iter_batches([str(SAMPLES / SAMPLE)], chunk_packets=64, prefetch=False)), []
    async with app.run_test(size=(100, 30)) as pilot:
        await packets(pilot, notes)
        assert app.index.ring
        for start, related in PAIRS:
            await at_frame(pilot, start)
            await pilot.press("r")
            await pilot.pause()
            assert frame(app) == related, (start, notes[-1:])


def _keys(bindings) -> list[str]:
    from textual.binding import Binding

    out = []
    for b in bindings:
        keys = b.key if isinstance(b, Binding) else b[0]
        out += [k.strip() for k in keys.split(",")]
    return out


async def test_the_jump_keys_clash_with_no_other_key_and_help_lists_them():
    from roceview.tui.app import RoceviewApp
    from roceview.tui.base import RoceScreen
    from roceview.tui.help import KEYS
    from roceview.tui.packet_list import PacketList
    from roceview.tui.packets_screen import PacketsScreen

    chain = [RoceviewApp, RoceScreen, PacketsScreen, PacketList]
    keys = [k for cls in chain for c in cls.__mro__ for k in _keys(c.__dict__.get("BINDINGS", ()))]
    for key in ("r", "b", "backspace"):
        assert keys.count(key) == 1, key
    helped = " ".join(k for k, _ in KEYS).split()
    assert "r" in helped and "b" in helped
