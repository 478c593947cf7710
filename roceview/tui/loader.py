"""The TUI's scanning core: reads a capture (or a live batch stream) on a worker thread, feeds
the Analyzer, keeps the packet index, and hands out immutable snapshots a few times a second.

No Textual here: the app polls `Loader.latest` (or is told through `on_snapshot`) and renders.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from roceview.tui.index import PacketIndex
from roceview.tui.merged import is_mapped, record_places

SNAPSHOT_EVERY = 0.3            # seconds between snapshots at least...
SNAPSHOT_COST_FACTOR = 5        # ...and at least 5x what building the last one took
FINDINGS_EVERY = 2.0            # the diagnoser runs on snapshots less often
YIELD_S = 0.002                 # per chunk of 64 k packets: ~0.3 s over 10 M packets
UI_FIRST_S = 0.15               # after a key or a click the loader waits this long (see defer())


@dataclass(frozen=True)
class Snapshot:
    """What the screens render; never changed after it is posted."""
    result: object                      # roceview.analysis.AnalysisResult so far
    packets: int                        # rows read
    elapsed: float                      # seconds since loading started
    fraction: float | None              # of the input read; None for a stream
    done: bool
    live_stats: dict = field(default_factory=dict)   # e.g. {"kernel drops": 0, "our drops": 0}
    error: str | None = None
    warnings: tuple = ()


@dataclass
class Options:
    """What `roceview tui` passes on (the defaults of `roceview analyze`)."""
    pmtu: int | None = None
    link_speed: float = 100.0
    bucket_ms: float = 1.0
    roce_ports: tuple = ()
    config: object = None               # a diagnose Config or a TOML path
    fail_on: str | None = None
    chunk_packets: int = 1 << 16
    time_format: str = "r"              # the packet list's time column, tshark's -t (T cycles)
    hms: bool = False                   # -u hms (U toggles)


class Loader:
    """Runs the analysis; `run()` is the worker thread's body. `source`: capture paths, or an
    iterable of Batch (or (RecordChunk, Batch)) items of a live stream; such a source may carry
    its own `analysis` (roceview.api.Analysis's interface: analyzer, facts, feed(batch),
    finish(files, warnings)) which the loader feeds instead of making one. Its own, made like
    `analyze`'s, keeps each packet's flags for the packet list; a live source's brings its
    live bounds, and each packet is analyzed once."""

    def __init__(self, source, options: Options | None = None,
                 live_stats: Callable[[], dict] | None = None,
                 on_snapshot: Callable[[Snapshot], None] | None = None):
        self.options = options or Options()
        self.source, self.live_stats, self.on_snapshot = source, live_stats, on_snapshot
        self.index = PacketIndex()
        self.analysis = getattr(source, "analysis", None)
        # made on the worker thread: its imports would delay the first paint
        self.analyzer = getattr(self.analysis, "analyzer", None)
        self._flagged = 0                   # rows whose analysis columns the index has
        self.warnings: list[str] = []
        self.latest: Snapshot | None = None
        self.stop = threading.Event()
        self._settings = None
        self._start = time.monotonic()
        self._total_bytes = 0
        self._starts: list = []
        self._findings_rows = 0             # rows analyzed when the findings were last made
        self._read: dict[int, int] = {}     # file number -> offset of the last record read
        self._findings_at = 0.0
        self._findings: list[dict] = []
        self._prepared: bool | BaseException = False
        self._defer_until = 0.0

    def prepare(self) -> None:
        """The analysis' imports (pandas among them) and the listing of the files. The app runs
        it before its first frame: imports hold the GIL, and on the loader thread they froze a
        key pressed in the first half second for 0.1-0.2 s (10 M packets, quiet machine). An
        error is kept for run() to show."""
        if self._prepared is False:
            try:
                self._prepare()
                self._prepared = True
            except Exception as exc:   # noqa: BLE001  run() reports it on the screen
                self._prepared = exc

    def defer(self, seconds: float = UI_FIRST_S) -> None:
        """The user pressed a key or clicked: the loader waits `seconds` before its next chunk,
        so the UI thread has the GIL to itself while it answers (sharing it with the loader
        doubled the time of a screen switch, to 100-200 ms). Loading slows only while the user
        types (a chunk per deferral at worst: _wait_for_ui); called from the UI thread."""
        self._defer_until = time.monotonic() + seconds

    def _wait_for_ui(self) -> None:
        """Until the deadline set when the wait began, not a later one: a key held down
        (auto-repeat every 20-30 ms) deferred again before each wait ended, and loading
        stalled until the key was let go; now a chunk goes through per deferral at worst."""
        until = self._defer_until
        while not self.stop.is_set() and (wait := until - time.monotonic()) > 0:
            self.stop.wait(wait)

    def request_stop(self) -> None:
        """Stop loading; a live source with a stop() (roceview live's batches) ends its capture,
        so a thread blocked waiting for its next packet returns."""
        self.stop.set()
        stop_source = getattr(self.source, "stop", None)
        if callable(stop_source):
            stop_source()

    # ---- the worker thread ----------------------------------------------------------------
    def run(self) -> None:
        from roceview.errors import RoceviewError

        try:
            self.prepare()
            if isinstance(self._prepared, BaseException):
                raise self._prepared
            self._start = time.monotonic()
            self._post(self.analyzer.snapshot(self._files(), self.warnings), 0.0, done=False)
            last = 0.0
            cost = 0.0
            for batch in self._items():
                if self.stop.is_set():
                    break
                if batch is None:
                    self._on_silence()
                    continue
                self._wait_for_ui()
                self._feed(batch)
                time.sleep(YIELD_S)            # hand the GIL to the UI thread between chunks
                now = time.monotonic()
                if now - last >= max(SNAPSHOT_EVERY, SNAPSHOT_COST_FACTOR * cost):
                    self._snapshot(done=False)
                    last = time.monotonic()
                    cost = last - now
            if not self.stop.is_set():     # quitting: the app waits for this thread (a live
                self._finish()             # session is finished by `roceview live` after it)
        except RoceviewError as exc:
            self._failed(str(exc))
        except Exception as exc:   # noqa: BLE001  the UI shows it; it never takes the screen down
            self._failed(f"{type(exc).__name__}: {exc}")

    def _on_silence(self) -> None:
        """A live source fell silent: show all it gave, findings included (the findings lag
        the rows shown, which lag the rows fed)."""
        if self._findings_rows != self.analyzer.rows_seen:
            self._findings_at = 0.0
            self._snapshot(done=False)

    def _failed(self, message: str) -> None:
        if self.analyzer is None:
            from roceview.analysis import Analyzer

            self.analyzer = Analyzer()
        self._post(self.analyzer.snapshot(), 0.0, done=True, error=message)

    def _prepare(self) -> None:
        from roceview.api import Analysis, load_settings
        from roceview.packets.decode import port_table

        o = self.options
        self.index.ports = port_table(o.roce_ports)
        self._settings = load_settings(o.config)
        if self.analysis is None:
            self.analysis = Analysis(o.pmtu, o.link_speed, o.bucket_ms, self._settings, packet_flags=True)
        self.analyzer = self.analysis.analyzer
        import roceview.render.lines  # noqa: F401  (pandas: here, not on the UI thread's first packet list)
        if self._is_paths():
            from roceview.capture.source import expand_paths
            from roceview.packets.read import time_ordered

            self.index.files, self._starts = time_ordered(expand_paths(self.source))
            self._total_bytes = sum(_size(f) for f in self.index.files)

    def _is_paths(self) -> bool:
        return isinstance(self.source, (str, bytes)) or isinstance(self.source, (list, tuple)) and \
            all(isinstance(p, str) or hasattr(p, "__fspath__") for p in self.source)

    def _files(self) -> list[str]:
        return list(self.index.files)

    def _items(self) -> Iterable:
        """The batches; for a live source, None too after each SNAPSHOT_EVERY s of silence."""
        if self._is_paths():
            return self._batches()
        from roceview.tui.stream import with_silences

        return with_silences(self._batches(), SNAPSHOT_EVERY, self.stop)

    def _batches(self) -> Iterable:
        """(chunk or None, batch) pairs."""
        if not self._is_paths():
            for item in self.source:
                yield item if isinstance(item, tuple) else (None, item)
            return
        from roceview.packets.read import decoded
        from roceview.tui.merged import tag_places

        merging = len(self.index.files) > 1 and "-" not in self.index.files     # in time, as analyze
        yield from decoded(self.index.files, self._starts, self.options.roce_ports, self.options.chunk_packets,
                           self.warnings.append, walk_ahead=not merging, projection="analysis", tag=tag_places)

    def _feed(self, item) -> None:
        chunk, batch = item
        places = record_places(batch) if chunk is None else None
        if places is not None:                        # files merged in time: each row its own file
            self._index_places(places)
        elif chunk is not None and is_mapped(chunk):  # offsets are file offsets
            file_no = int(batch.cols["_file"][0]) if "_file" in batch.cols and batch.n else 0
            if self.index.off.n == 0 and chunk.n > 1:
                self.index.reserve(_expected_rows(chunk.off, self._total_bytes))
            self.index.add_mapped(file_no, chunk)
            if chunk.n:
                self._read[file_no] = int(chunk.off[-1])
        else:
            self.index.add_stream(batch, chunk)
        self.analysis.feed(batch)
        self._take_analyzed()

    def _take_analyzed(self) -> None:
        """Flow ids and flags of the rows the Analyzer analyzed (it may hold rows back for
        path-MTU evidence, and analyze them later together)."""
        rows = self.analyzer.last_rows
        if rows is not None:
            self.analyzer.last_rows = None
            self.index.set_flows(*rows)
        for done in self.analyzer.take_analyzed():
            self.index.set_flags(self._flagged, done)
            self._flagged += done.n

    def _index_places(self, places: dict) -> None:
        if self.index.off.n == 0 and len(places["off"]) > 1:
            self.index.reserve(_expected_rows(places["off"], self._total_bytes))
        self.index.add_places(places)
        files, off = places["file"], places["off"]
        for f in np.unique(files).tolist():
            self._read[f] = max(self._read.get(f, 0), int(off[files == f].max()))

    def _fraction(self) -> float | None:
        if not self._total_bytes or not self._read:
            return None
        done = sum(min(self._read.get(f, 0), _size(path)) for f, path in enumerate(self.index.files))
        return min(1.0, done / self._total_bytes)

    def _snapshot(self, done: bool) -> None:
        result = self.analyzer.snapshot(self._files(), self.warnings)
        now = time.monotonic()
        if now - self._findings_at >= FINDINGS_EVERY:
            self._findings_at = now
            self._findings = self._diagnose(result, self.analysis.facts.finish())
            self._findings_rows = self.analyzer.rows_seen
        result.set_findings(self._findings)
        self._post(result, now - self._start, done=done)

    def _finish(self) -> None:
        result = self.analysis.finish(self._files(), self.warnings)
        self._take_analyzed()                        # rows held back for path-MTU evidence till now
        self._post(result, time.monotonic() - self._start, done=True)

    def _diagnose(self, result, facts) -> list[dict]:
        from roceview.diagnose import find

        result.facts = facts
        return find(result, self._settings)

    def _post(self, result, elapsed: float, done: bool, error: str | None = None) -> None:
        stats = dict(self.live_stats()) if self.live_stats is not None else {}
        fraction = 1.0 if done and self._total_bytes else self._fraction()
        snap = Snapshot(result, int(self.analyzer.rows_seen), elapsed, fraction, done, stats, error,
                        tuple(self.warnings))
        self.latest = snap
        if self.on_snapshot is not None:
            self.on_snapshot(snap)


def _expected_rows(off: np.ndarray, total_bytes: int) -> int:
    """Records in the input at the first chunk's bytes per record, 5 % over."""
    per_record = max((int(off[-1]) - int(off[0])) / (len(off) - 1), 1.0)
    return int(total_bytes / per_record * 1.05) + len(off)


def _size(path: str) -> int:
    import os

    try:
        return os.path.getsize(path) if path != "-" else 0
    except OSError:
        return 0


def exit_code(snapshot: Snapshot | None, fail_on: str | None) -> int:
    """0, or 3 when a finding of `fail_on` severity or worse exists (as `analyze --fail-on`)."""
    from roceview.analysis.result import SEVERITY_RANK

    if fail_on is None or snapshot is None:
        return 0
    worst = snapshot.result.worst_severity()
    return 3 if worst is not None and SEVERITY_RANK[worst] >= SEVERITY_RANK[fail_on] else 0
