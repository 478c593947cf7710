"""--duration counts capture time, as tshark's `-a duration:` does: the clock starts when the
capture tool says it is listening (tcpdump's start-up under load took seconds the capture
lost), and a tool that exits before it listens leaves nothing to stop."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from roceview.live.session import LiveSession


class _Tool:
    def __init__(self):
        self.listening = threading.Event()
        self.exited = False
        self.proc = SimpleNamespace(poll=lambda: 0 if self.exited else None)


def _session(tool, duration: float):
    session = object.__new__(LiveSession)       # the clock alone: no tcpdump, no stream
    session.tool, session.args = tool, SimpleNamespace(duration=duration)
    session._done, session.capture_started = threading.Event(), None
    session.stops = []
    session.stop = lambda reason: session.stops.append((reason, time.monotonic()))
    return session


def _run(session) -> threading.Thread:
    clock = threading.Thread(target=session._duration_clock, daemon=True)
    clock.start()
    return clock


def test_the_duration_starts_when_the_tool_listens():
    tool = _Tool()
    session = _session(tool, 0.3)
    clock = _run(session)
    time.sleep(0.6)                              # longer than the duration: not listening yet
    assert session.stops == [] and session.capture_started is None
    listening_at = time.monotonic()
    tool.listening.set()
    clock.join(30)
    assert not clock.is_alive()
    [(reason, at)] = session.stops
    assert reason == "duration" and at - listening_at >= 0.3


def test_a_tool_that_exits_before_it_listens_is_not_stopped_by_the_clock():
    tool = _Tool()
    session = _session(tool, 0.1)
    clock = _run(session)
    tool.exited = True
    clock.join(30)
    assert not clock.is_alive() and session.stops == []


def test_the_end_of_the_capture_stops_the_clock():
    tool = _Tool()
    tool.listening.set()
    session = _session(tool, 600)
    clock = _run(session)
    session._done.set()                          # __exit__: the capture ended first
    clock.join(30)
    assert not clock.is_alive() and session.stops == []


def test_the_record_the_tool_cut_at_its_stop_is_not_a_roceview_drop():
    """tcpdump stopped by SIGINT between a record's header and its data counts the packet as
    captured and writes part of it: not damage, and not a packet roceview dropped."""
    session = object.__new__(LiveSession)
    tool = _Tool()
    tool.exited = True
    tool.stats = {"captured": 101}
    session.tool, session.read_packets, session.cut_record = tool, 100, 0
    session.stop_reason, session.warnings, session._warn = "duration", [], None
    session._on_warning("<stdin>: the capture ends in the middle of a record (12 of 1,042 bytes)")
    assert session.warnings == [] and session._own_drops() == 0
