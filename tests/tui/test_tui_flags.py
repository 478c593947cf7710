"""The TUI's analysis flags (issue 18, screen 3): the packet index keeps each packet's flags
(and the values its tags name) as `roceview dissect` computes them, for files, files merged in
time and a live stream's ring; the packet list shows dissect's tags at the front of Info (as
Wireshark its expert info), the tree dissect -V's Analysis subtree, and the display filter
sees them."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from roceview.analysis.annotate import analyzed_pairs
from roceview.packets.read import iter_batches
from roceview.packets.times import TimeColumn, digits_of
from roceview.tui.index import FLAG_DTYPE
from roceview.tui.loader import Loader
from roceview.render.lines import packet_lines
from roceview.tui.packet_list import summary_lines, table, tags_first
from roceview.tui.packets_screen import PacketsScreen
from helpers.tui import SAMPLES, app_for, loaded
from test_tui_merges_files import _split

ANALYSIS = ("flags", "missing_psns", "rel_frame", "rtt_ns")
FLAGGED = ["network-loss-receiver-side.pcap", "network-loss.pcap", "incast.pcap", "pfc-storm.pcap", "rnr.pcap",
           "tail-timeout.pcap", "remote-error.pcap", "cnp-missing.pcap"]


def _dissect_columns(paths) -> dict:
    """The analysis columns `roceview dissect` computes (commands/dissect._packets without -V)."""
    pairs = ((None, b) for b in iter_batches([str(p) for p in paths], prefetch=False))
    batches = [b for _, b in analyzed_pairs(pairs)]
    return _columns([b.cols for b in batches], [b.valid for b in batches])


def _columns(cols: list, valid: list) -> dict:
    out = {name: np.concatenate([c[name] for c in cols]).astype(np.int64) for name in ANALYSIS}
    for name in ANALYSIS[1:]:          # a value counts only where it is valid
        ok = np.concatenate([v[name] for v in valid])
        out[name] = np.where(ok, out[name], -1)
    return out


def _index_columns(index) -> dict:
    batch = index.decode(np.arange(index.visible_rows().first, index.rows))
    return _columns([batch.cols], [batch.valid])


def _same(got: dict, expected: dict) -> None:
    assert len(got["flags"]) == len(expected["flags"])
    for name in ANALYSIS:
        assert got[name].tolist() == expected[name].tolist(), name


@pytest.mark.parametrize("name", FLAGGED)
def test_index_flags_are_dissects(name):
    loader = Loader([str(SAMPLES / name)])
    loader.run()
    assert loader.index.flag.a.dtype == FLAG_DTYPE == np.uint16       # 14 bits
    expected = _dissect_columns([SAMPLES / name])
    assert expected["flags"].any()
    _same(_index_columns(loader.index), expected)


def test_list_lines_hold_dissects_words_with_qp_psn_and_tags_leading_info():
    path = SAMPLES / "network-loss-receiver-side.pcap"
    loader = Loader([str(path)])
    loader.run()
    batch = loader.index.decode(np.arange(loader.index.rows))
    out = subprocess.run([sys.executable, "-m", "roceview", "dissect", str(path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    first_ts = int(batch.cols["ts_ns"][0])
    times = TimeColumn(batch.cols["ts_ns"] - first_ts, digits_of(batch))      # the file's ns, as dissect
    assert packet_lines(table(batch), first_ts, times=times) == out
    listed = summary_lines(batch, first_ts)
    tagged = [i for i, line in enumerate(out) if line.endswith("]")]
    assert len(tagged) > 20
    for i in range(len(out)):              # dissect's words, in the list's columns and order
        assert sorted(listed[i].split()) == sorted(w for w in out[i].split() if w != "→"), i
    assert listed[45] == (" 46 0.000011225 10.0.0.1 10.0.0.2 RoCEv2 1102 QP=0x034405 PSN=3531349 "
                          "[Retransmission of frame 38] RC_RDMA_WRITE_FIRST VLAN=100 PCP=3")


def test_tags_first_moves_dissects_tags_to_the_front_of_info():
    line = "     12     0.000001 10.0.0.1 → 10.0.0.2 RoCEv2 90 RC_ACKNOWLEDGE QP=0x000001 [NAK x] [RTT 1 µs]"
    assert tags_first(line, "[NAK x] [RTT 1 µs]") == \
        "     12     0.000001 10.0.0.1 → 10.0.0.2 RoCEv2 90 [NAK x] [RTT 1 µs] RC_ACKNOWLEDGE QP=0x000001"
    bare = "      3     0.000002 0e:c0:de:00:00:11 → 01:80:c2:00:00:01 PFC 64 [Pause P3 1.000 µs]"
    assert tags_first(bare, "[Pause P3 1.000 µs]") == bare
    assert tags_first(line, "[other]") == line and tags_first(line, "") == line


@pytest.mark.parametrize("name,parts", [("network-loss-receiver-side.pcap", 2), ("incast.pcap", 3),
                                        ("pfc-storm.pcap", 2)])
def test_flags_of_files_merged_in_time_are_dissects(tmp_path, name, parts):
    """(At dissect's chunk size: a CNP's related frame may depend on it, docs/analysis.md.)"""
    files = _split(tmp_path, name, parts)
    loader = Loader(files)
    loader.run()
    assert loader.index.flag.n == loader.index.rows          # mapped files: the flag store, not a ring
    _same(_index_columns(loader.index), _dissect_columns(files))


def _reads_first(tmp_path, copies: int = 20):
    """network-loss-receiver-side.pcap after 20 copies of its first frame, a READ request:
    read in chunks of 16, the Analyzer holds the first chunk back (no path-MTU evidence yet)
    and analyses it with the next."""
    from roceview.capture.writer import write_pcapng

    loader = Loader([str(SAMPLES / "network-loss-receiver-side.pcap")])
    loader.run()
    index = loader.index
    rows = [0] * copies + list(range(index.rows))
    path = tmp_path / "reads-first.pcapng"
    write_pcapng(path, [index.frame_bytes(r)[0] for r in rows], [int(index.ts.a[0]) - 1000 + k for k in range(copies)]
                 + [int(t) for t in index.ts.view()])
    return path


@pytest.mark.parametrize("chunk", [16, 1 << 16])
@pytest.mark.parametrize("held", [False, True])
def test_a_streams_ring_keeps_the_flags_of_its_packets(tmp_path, monkeypatch, chunk, held):
    """A live stream: the flags live with the ring's batches (the analyzed batch is the ring's
    own, or, when the Analyzer held rows back, their columns are copied onto the ring's)."""
    import roceview.tui.index as index_module

    path = _reads_first(tmp_path) if held else SAMPLES / "network-loss-receiver-side.pcap"
    copied = []
    onto_ring = index_module._onto_ring
    monkeypatch.setattr(index_module, "_onto_ring", lambda ring, first, done: copied.append(
        sum(kept is not done and first < start + kept.n and start < first + done.n for start, _, kept in ring))
        or onto_ring(ring, first, done))
    loader = Loader(iter_batches([str(path)], chunk_packets=chunk, prefetch=False))
    loader.run()
    assert loader.index.ring and loader.index.flag.n == 0
    assert (sum(copied) > 0) == (held and chunk == 16)
    _same(_index_columns(loader.index), _dissect_columns([path]))


@pytest.mark.asyncio
async def test_the_packets_screen_shows_a_retransmission_on_its_row_and_in_its_tree():
    app = app_for("network-loss-receiver-side.pcap")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PacketsScreen)
        screen.plist.goto(45)                            # frame 46
        await pilot.pause()
        assert screen.plist.line(45).split()[0] == "46"
        assert " 1102 QP=0x034405 PSN=3531349 [Retransmission of frame 38] RC_RDMA_WRITE_FIRST " in screen.plist.line(45)
        assert " 78 QP=0x034405 PSN=3531345 [Retransmission] RC_RDMA_READ_REQUEST " in screen.plist.line(44)
        assert " 66 QP=0x03d6e5 PSN=3531345 [NAK PSN sequence error, gap at frame 38] RC_ACKNOWLEDGE " in screen.plist.line(43)
        assert "[" not in screen.plist.line(42)          # frame 43: no flags
        from rich.style import Style

        error = screen.plist.get_component_rich_style("packet-list--error", partial=True).color
        coloured = {seg.text: seg.style.color for seg in screen.plist.segments(43, Style())}
        assert error is not None and coloured["[NAK PSN sequence error, gap at frame 38]"] == error
        assert "".join(seg.text for seg in screen.plist.segments(43, Style())) == screen.plist.line(43)
        tree = screen.query_one("#packet-tree")
        assert str(tree.root.label).endswith("[Retransmission of frame 38]")
        analysis = [n for n in tree.root.children if str(n.label).startswith("Analysis")]
        assert [str(n.label) for n in analysis] == ["Analysis (roceview: retransmission)"]
        assert "first carried by frame 38" in str(analysis[0].children[0].label)


@pytest.mark.asyncio
async def test_the_display_filter_selects_by_flag_as_dissect_y():
    path = SAMPLES / "network-loss-receiver-side.pcap"
    text = "roceview.retransmission || roceview.gap > 2"
    out = subprocess.run([sys.executable, "-m", "roceview", "dissect", "-Y", text, str(path)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    expected = [int(line.split()[0]) - 1 for line in out]
    app = app_for(path.name)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3", "slash", *text, "enter")
        screen = app.screen
        for _ in range(200):
            await pilot.pause(0.05)
            if not screen.scanning and screen.filtered is not None:
                break
        assert len(expected) > 5 and screen.plist.rows.tolist() == expected


@pytest.mark.asyncio
async def test_the_cursor_stays_on_screen_above_the_horizontal_scrollbar():
    """The list's lines are wider than 80 columns: its horizontal scrollbar takes a row, and
    paging down left the cursor (and the packet its tree shows) on that hidden row."""
    app = app_for("network-loss-receiver-side.pcap")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3", *["pagedown"] * 5, *["down"] * 5)
        await pilot.pause()
        plist = app.screen.plist
        top, shown = int(plist.scroll_offset.y), plist.scrollable_content_region.height
        assert shown < plist.size.height                       # the scrollbar's row
        assert top <= plist.cursor < top + shown
        assert str(app.screen.query_one("#packet-tree").root.label).startswith(f"Frame {plist.cursor + 1} ")


@pytest.mark.asyncio
async def test_rows_listed_before_they_were_analyzed_show_their_flags_once_they_are(tmp_path):
    """Rows the Analyzer held back (path-MTU evidence) are listed, and drawn, before they have
    flags; once analyzed their lines (and the tree of the row under the cursor) show the tags.
    The list kept its decoded blocks and, the row count unchanged, never drew them again."""
    from roceview.tui import Options, make_app

    path = _reads_first(tmp_path, copies=200)         # more than a block of the list (BLOCK)
    app = make_app([str(path)], options=Options(chunk_packets=16), start=False)
    async with app.run_test(size=(100, 30)) as pilot:
        loader = app.loader
        loader.prepare()
        items = iter(loader._items())
        for _ in range(10):
            loader._feed(next(items))                  # held back: listed, not analyzed
        assert loader._flagged == 0 and loader.index.rows == 160
        loader._snapshot(done=False)
        await pilot.press("3")
        await pilot.pause()
        plist = app.screen.plist
        assert len(plist.rows) == 160 and "[" not in plist.line(1)
        plist.cursor = 1
        await pilot.pause()
        tree = app.screen.query_one("#packet-tree")
        assert not str(tree.root.label).endswith("]")
        for item in items:
            loader._feed(item)
        loader._finish()
        await pilot.pause()
        await pilot.pause()
        expected = summary_lines(loader.index.decode(np.arange(16)), plist.first_ts)
        assert "[Duplicate frame]" in expected[1]
        assert [plist.line(i) for i in range(16)] == expected
        assert str(tree.root.label).endswith("[Duplicate frame]")


def _contrast(a, b) -> float:
    """WCAG 2 contrast ratio of two textual.color.Color."""
    def luminance(c):
        ch = [v / 255 for v in (c.r, c.g, c.b)]
        ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in ch]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.asyncio
@pytest.mark.parametrize("light", [False, True])
async def test_the_tags_colours_are_readable_on_the_lists_background(light):
    """$warning on the light theme's background is 1.5:1 and $secondary on the dark one's
    1.9:1: a [Duplicate frame] or a pause tag was hard to read; Textual's $text-* colours are
    made for text on the background (3.3:1 or more in both themes)."""
    from textual.color import Color

    app = app_for("network-loss-receiver-side.pcap", light=light)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        plist = app.screen.plist
        background = plist.background_colors[1]
        for severity in ("error", "warn", "note"):
            colour = Color.from_rich_color(plist.get_component_rich_style(f"packet-list--{severity}",
                                                                          partial=True).color)
            assert _contrast(colour, background) >= 3.0, (severity, colour.hex, background.hex)


def test_a_ring_batch_being_given_its_flags_decodes_as_not_yet_analyzed():
    """The Analyzer writes the analysis columns onto the ring's own batch one by one
    (FlagSink.attach, on the loader thread) while the UI may decode it: between 'flags' and
    'rtt_ns' a decode raised KeyError (the tree's handler does not catch it: the app died)."""
    loader = Loader(iter_batches([str(SAMPLES / "network-loss-receiver-side.pcap")], chunk_packets=64,
                                 prefetch=False))
    loader.run()
    kept = loader.index.ring[-1][2]
    for name in ("missing_psns", "rel_frame", "rtt_ns"):      # attach wrote 'flags' only, so far
        del kept.cols[name]
    rows = np.arange(loader.index.ring[-1][0], loader.index.rows)
    batch = loader.index.decode(rows)
    assert batch.n == len(rows) and not batch.cols["flags"].any() and (batch.cols["rtt_ns"] == -1).all()


def _held_stream(gate):
    """A filter, the rows `dissect -Y` lists for it, and a stream of the capture in 16-packet
    batches that holds after the second until `gate` is set."""
    from roceview.packets.read import iter_chunks

    path = SAMPLES / "network-loss-receiver-side.pcap"
    text = "roceview.retransmission || roceview.gap > 2"
    out = subprocess.run([sys.executable, "-m", "roceview", "dissect", "-Y", text, str(path)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    batches = [b for _, b in iter_chunks([str(path)], chunk_packets=16)]

    def source():
        for k, b in enumerate(batches):
            if k == 2:
                gate.wait(60)
            yield b

    return text, [int(line.split()[0]) - 1 for line in out], source


@pytest.mark.asyncio
async def test_a_filter_set_while_loading_takes_in_the_rows_analyzed_after():
    """The filter scanned only the rows there when it was set, judging rows not yet analyzed
    as flagless, and never looked again: a stream stopped half-way lists the first half's
    matches only; once the rest arrives, the list equals `dissect -Y` on the whole capture."""
    import threading

    from roceview.tui import make_app

    gate = threading.Event()
    text, expected, source = _held_stream(gate)

    app = make_app(source(), title="half")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        while app.index.flagged < 32:
            await pilot.pause(0.05)
        await pilot.press("slash", *text, "enter")
        screen = app.screen
        for _ in range(100):
            await pilot.pause(0.05)
            if not screen.scanning and screen.filtered is not None:
                break
        assert screen.plist.rows.tolist() == [r for r in expected if r < 32]
        gate.set()
        for _ in range(400):
            await pilot.pause(0.05)
            if app.snapshot is not None and app.snapshot.done and not screen.scanning \
                    and screen.plist.rows.tolist() == expected:
                break
        assert len(expected) > 5 and screen.plist.rows.tolist() == expected


async def _released_while_scanning(pilot, app, in_scan, source_gate) -> None:
    """Once the scan is held: release the stream and wait for the final snapshot."""
    while not in_scan.is_set():
        await pilot.pause(0.05)
    source_gate.set()
    for _ in range(400):
        await pilot.pause(0.05)
        if app.snapshot is not None and app.snapshot.done:
            break


@pytest.mark.asyncio
async def test_the_final_snapshot_arriving_during_a_scan_still_gets_its_rows_scanned():
    """A snapshot arriving while a filter scan runs is skipped (one scan at a time); when it is
    the final one no later snapshot comes, so the scan's end must take in the rows analyzed
    meanwhile, or the list misses the capture's tail for good."""
    import threading

    from roceview.tui import make_app
    from roceview.tui.base import compile_filter

    source_gate, scan_gate, in_scan = threading.Event(), threading.Event(), threading.Event()
    text, expected, source = _held_stream(source_gate)

    class Held:                          # the first scan waits till the final snapshot is in
        def __init__(self, inner):
            self.inner = inner

        def mask(self, batch):
            in_scan.set()
            scan_gate.wait(60)
            return self.inner.mask(batch)

    display_filter, _ = compile_filter(text)
    app = make_app(source(), title="held")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        while app.index.flagged < 32:
            await pilot.pause(0.05)
        screen = app.screen
        app.apply_filter(text, Held(display_filter))
        await _released_while_scanning(pilot, app, in_scan, source_gate)
        assert app.snapshot.done and screen.scanning
        scan_gate.set()
        for _ in range(400):
            await pilot.pause(0.05)
            if not screen.scanning and screen.plist.rows.tolist() == expected:
                break
        assert len(expected) > 5 and screen.plist.rows.tolist() == expected


@pytest.mark.asyncio
async def test_a_filter_scan_survives_the_ring_letting_its_rows_go(monkeypatch):
    """A stream's ring drops its oldest rows while a filter scan decodes them: the decoded
    batch is then shorter than the rows asked for, and the scan judged rows by position
    (IndexError: the filter stopped, its list cut short). The rows still kept are listed."""
    import threading

    import roceview.tui.index as index_mod
    from roceview.tui import make_app

    monkeypatch.setattr(index_mod, "RING_PACKETS", 128)
    source_gate, scan_gate, in_scan = threading.Event(), threading.Event(), threading.Event()
    text, expected, source = _held_stream(source_gate)
    app = make_app(source(), title="ring")
    notes = []
    app.notify = lambda message, **kw: notes.append(message)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        while app.index.flagged < 32:
            await pilot.pause(0.05)
        screen, decode = app.screen, app.index.decode

        def held_decode(rows):         # the scan's first decode waits till the ring has moved on
            if threading.current_thread() is not threading.main_thread() and not in_scan.is_set():
                in_scan.set()
                scan_gate.wait(60)
            return decode(rows)

        app.index.decode = held_decode
        await pilot.press("slash", *text, "enter")
        await _released_while_scanning(pilot, app, in_scan, source_gate)
        scan_gate.set()
        first = app.index.visible_rows().first
        kept = [r for r in expected if r >= first]
        for _ in range(400):
            await pilot.pause(0.05)
            if not screen.scanning and screen.plist.rows.tolist() == kept:
                break
        assert first > 0 and kept and not notes and screen.plist.rows.tolist() == kept
