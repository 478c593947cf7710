"""One live capture: its source (tcpdump or dumpcap on an interface, or a stream), the
analysis fed as chunks arrive, the stops (Ctrl-C, --duration, --count) and the live counters.

The analysis is the one `analyze` runs (Analyzer + FactCollector, the diagnoser at the end), so
`live -r -` on a capture writes the same tables as `analyze` on the file. It is made once: with
the TUI, the TUI's loader feeds it (StoppableBatches.analysis, on the loader's thread, with
per-packet flags for the packet list) and shows its final result, the one --csv/--json get. Reading and decoding
run on a worker thread (packets.read.Prefetched, two batches ahead); when the analysis falls
behind, the pipe fills and the kernel ring drops, which the capture tool counts.
"""
from __future__ import annotations

import os
import signal
import stat
import threading
import time

import numpy as np

from roceview import interrupt
from roceview.capture import live_stream as capture
from roceview.errors import BadInput, WriteError
from roceview.live import save as saving

CHUNK_PACKETS = 1 << 16
# RTT samples kept (16 bytes each): the analysis keeps one per answered request for exact
# percentiles, without end on a live capture (50 k answered requests/s: +0.8 MB/s); past this,
# each flow's newest are kept (analysis.rtt.RttMatcher.keep_newest). The timeline and events
# have bounds of their own (timeline.MAX_ROWS, events.MAX_PER_KIND): RSS rises until they fill.
RTT_SAMPLES = 2_000_000
STATS_EVERY_S = 0.9          # tcpdump is asked for its counters (SIGUSR1) at most this often
# A second SIGINT this soon after the first is the same Ctrl-C delivered twice (`timeout -s INT`
# signals its child, then its process group), not a second press that means "stop at once".
SAME_SIGINT_S = 1.0


class LiveSession:
    def __init__(self, args, warn, packet_flags: bool = False):
        from roceview.api import check_options, load_settings

        check_options(args.pmtu, args.link_speed, args.bucket)
        self.settings = load_settings(args.config, getattr(args, "pfc_priorities", None))
        self.args, self._warn = args, warn
        self.warnings: list[str] = []
        self.stop_reason: str | None = None
        self.ended = False                   # the source ran out (end of stream, the tool exited)
        self.failed: BadInput | None = None  # the source's error (not a capture, the tool failed)
        self.packets = self.read_packets = self.cut_record = 0
        self.cut_at: int | None = None
        self.tool = None
        self.save = saving.open_save(args.write, args.count) if args.write else None
        try:
            self.stream, self.name = self._open_source(args)
        except BaseException:
            saving.close_save(self.save, None)
            raise
        self.records = capture.LiveRecords(self.stream, self.name, CHUNK_PACKETS, self._on_warning)
        self.title = f"roceview live {self.name}"
        self._analysis_setup(packet_flags)
        self.started = time.monotonic()
        self._asked = 0.0
        self._timer = self._previous_sigint = self._interrupted_at = None
        self._done = threading.Event()
        self.capture_started: float | None = None     # monotonic: when the tool began to capture

    def _open_source(self, args):
        if args.interface is not None:
            from roceview.live.tools import start_capture

            self.tool = start_capture(args.interface, args.snaplen, args.filter, args.count)
            # tcpdump runs in a session of its own (a Ctrl-C reaches roceview only): a signal
            # that ends roceview at once (SIGTERM, SIGHUP) stops it too, or it stays behind
            interrupt.on_interrupt(self.tool.stop)
            return capture.LiveStream(self.tool.fd(), self.save), f"interface {args.interface}"
        if args.read == "-":
            return capture.stdin_stream(self.save), "<stdin>"
        try:
            fd = os.open(args.read, os.O_RDONLY)
        except OSError as exc:
            raise BadInput(f"{args.read}: cannot open ({exc.strerror or exc})") from None
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise BadInput(f"{args.read}: is a directory; live reads one capture stream (analyze reads a directory)")
        return capture.LiveStream(fd, self.save), args.read

    def _analysis_setup(self, packet_flags: bool) -> None:
        from roceview.analysis.events import EVENT_KINDS
        from roceview.api import Analysis
        from roceview.packets.decode import port_table

        a = self.args
        self.analysis = Analysis(a.pmtu, a.link_speed, a.bucket, self.settings, packet_flags=packet_flags)
        self.analyzer, self.facts = self.analysis.analyzer, self.analysis.facts
        self._result = None
        self._lock = threading.Lock()        # feed and finish: the TUI's loader thread, then the command
        self.ports = port_table(a.roce_port)
        self.event_kinds = EVENT_KINDS

    def _on_warning(self, message: str) -> None:
        if self.stop_reason is not None and "ends in the middle of" in message:
            # we stopped the tool ourselves: its SIGINT came between a record's header and its
            # data, and the record it counted as captured was never written whole (not damage,
            # and not a packet roceview dropped)
            self.cut_record = 1
            return
        self.warnings.append(message)
        self._warn(message)

    # ---- start and stop ------------------------------------------------------------------------
    def __enter__(self):
        self._timer = threading.Thread(target=self._duration_clock, name="roceview-live-duration", daemon=True)
        self._timer.start()
        # an ignored SIGINT stays ignored: `roceview live ... &` in a script runs so, and a
        # Ctrl-C meant for the script's foreground job is not for it
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self._previous_sigint = signal.signal(signal.SIGINT, self._sigint)
        return self

    def _duration_clock(self) -> None:
        """--duration counts capture time, as tshark's `-a duration:`: from the moment the tool
        says it is listening (under load its start-up took seconds, which the capture lost),
        or at once for a stream. While it waits, the diagnoser and the report are imported,
        so that the stop is followed by the result, not by 0.2-0.5 s of imports."""
        tool = self.tool
        while tool is not None and not tool.listening.wait(0.05):
            if self._done.is_set() or tool.proc.poll() is not None:
                return
        self.capture_started = time.monotonic()
        _warm_up()
        if self.args.duration and not self._done.wait(self.args.duration - (time.monotonic() - self.capture_started)):
            self.stop("duration")

    def _sigint(self, signum, frame) -> None:
        """The first Ctrl-C stops the capture (the outputs are then written); the same one
        delivered again is ignored; a second press ends at once through the handler before
        (the CLI's: exit 130, the -w file put in place at its last whole record)."""
        now = time.monotonic()
        if self._interrupted_at is None:
            self._interrupted_at = now
            self.stop("interrupt")
            return
        if now - self._interrupted_at < SAME_SIGINT_S:
            return
        _pass_on(self._previous_sigint, signum, frame)

    def stop(self, reason: str) -> None:
        """Ask the source to end: tcpdump flushes and exits, a stream ends at the next read."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.tool is not None:
            self.tool.stop()
        else:
            self.stream.stop.set()

    def __exit__(self, *exc):
        self._done.set()                      # the duration clock stops waiting
        if self._previous_sigint is not None:        # the stop's echo may still be on its way
            signal.signal(signal.SIGINT, self._previous_sigint if self._interrupted_at is None
                          else _EchoOfStop(self._previous_sigint, self._interrupted_at + SAME_SIGINT_S))
        if self.tool is not None:
            self.tool.stop()
            self.tool.finish()
            interrupt.drop_hook(self.tool.stop)
        else:
            self.stream.stop.set()
        if self.cut_at is None and self.stream.ended and self.tool is None and self.stop_reason:
            self.cut_at = self.records.consumed      # stdin left mid-record: the file ends at a whole one
        saving.close_save(self.save, self.cut_at)
        return False

    # ---- the batches -----------------------------------------------------------------------------
    def _decoded(self, projection):
        from roceview.packets.decode import decode_chunk

        frame = 1
        for chunk, base in self.records:
            self.read_packets += chunk.n
            batch = decode_chunk(chunk, self.ports, frame, projection)
            frame += chunk.n
            # where each record ends, for cutting -w after the --count-th (the chunk's 8 MB
            # buffer is not kept while the batch waits in the queue)
            yield batch, self.records.record_ends(chunk, base) if self.args.count else None

    def stoppable_batches(self) -> "StoppableBatches":
        """The TUI's source: every column, and a stop() the TUI calls on quit (q)."""
        return StoppableBatches(self)

    def batches(self, full: bool = False, analyze: bool = True):
        """Each batch as it is analyzed (full: every column, for the TUI's packet list; not
        `analyze`: the consumer feeds each to feed(), the TUI's loader on its own thread)."""
        from roceview.packets.read import Prefetched

        source = Prefetched(self._decoded(None if full else "analysis"))
        given = 0
        try:
            for batch, ends in source:
                left = self.args.count - given if self.args.count else None
                if left is not None and batch.n >= left:
                    if batch.n > left:
                        batch = batch.select(np.arange(left))
                    self.cut_at = int(ends[left - 1])
                    if analyze:
                        self.feed(batch)
                    yield batch
                    self.stop("count")
                    return
                given += batch.n
                if analyze:
                    self.feed(batch)
                yield batch
            self.ended = True
        except WriteError as exc:       # the -w file (a full disk): the TUI shows it too
            self.failed = exc
            raise
        except BadInput as exc:
            if self.stop_reason is not None and self.stream.bytes_read == 0:
                return                  # stopped before the first byte (Ctrl-C at once): no packets
            if self.tool is not None and self.stream.bytes_read == 0:
                self.tool.finish()
                exc = self.tool.failure()
            self.failed = exc           # the TUI's loader shows it; the command raises it after q
            raise exc from None
        finally:
            source.close()

    def feed(self, batch) -> None:
        """Analyze one batch, with the live bounds (RTT_SAMPLES)."""
        with self._lock:
            self.analysis.feed(batch)
            self.analyzer.rtt.keep_newest(RTT_SAMPLES)
            self.packets += batch.n

    # ---- counters and the result -------------------------------------------------------------------
    def stats(self) -> dict:
        """The live counters (the status line's and the TUI's)."""
        now = time.monotonic()
        if self.tool is not None and now - self._asked >= STATS_EVERY_S:
            self._asked = now
            self.tool.ask_stats()
        events = self.analyzer.events
        return {"source": self.name, "packets": self.packets, "elapsed_s": now - self.started,
                "kernel_drops": self._kernel_drops(), "roceview_drops": self._own_drops(),
                "events": {k: events.count(k) for k in self.event_kinds}, "stopped": self.stop_reason,
                "ended": self.ended,
                "starting": self.tool is not None and not self.tool.listening.is_set()}

    def _kernel_drops(self) -> int | None:
        if self.tool is None:
            return None                    # the stream's writer knows (tcpdump prints it at its end)
        s = self.tool.stats
        return s.get("kernel_drops", 0) + s.get("interface_drops", 0)

    def _own_drops(self) -> int:
        """Packets the tool says it captured that roceview never read: none unless reading stopped early."""
        if self.tool is None or self.tool.proc.poll() is None:
            return 0
        return max(0, self.tool.stats.get("captured", self.read_packets) - self.read_packets - self.cut_record)

    def finish(self, files=None, warnings=None):
        """The analysis' result with its findings, made once (the TUI's loader asks at the end
        of its input, the command after the capture stopped); files and warnings: the session's."""
        with self._lock:
            if self._result is None:
                drops = self._kernel_drops()    # capture_loss names them when they explain it
                self._result = self.analysis.finish([self.name], self.warnings,
                                                    {"capture_drops": drops} if drops else None)
            return self._result

    def result(self):
        """finish()'s result with the live summary as it is now (the capture tool's last counters)."""
        result = self.finish()
        result.summary["live"] = self.live_summary()
        return result

    def live_summary(self) -> dict:
        tool = self.tool.stats if self.tool is not None else {}
        return {"source": self.name, "tool": self.tool.NAME if self.tool is not None else None,
                "stopped_by": self.stop_reason or "end of stream",
                "elapsed_s": round(time.monotonic() - self.started, 3),
                "packets_read": self.read_packets, "packets_analyzed": self.packets,
                "captured": tool.get("captured"), "received_by_filter": tool.get("received_by_filter"),
                "kernel_drops": self._kernel_drops(), "roceview_drops": self._own_drops(),
                "saved_to": self.args.write, "saved_bytes": self._saved_bytes()}

    def _saved_bytes(self) -> int | None:
        """Bytes of whole records saved to -w (after the --count cut)."""
        return None if self.save is None else self.save.saved

    def summary_line(self) -> str:
        s = self.live_summary()
        drops = "unknown (the stream's writer counts them)" if s["kernel_drops"] is None else f"{s['kernel_drops']:,}"
        saved = ""
        if self.save is not None:
            saved = f"; {'saved to' if s['saved_bytes'] else 'nothing saved to'} {self.save.name}"
        return (f"Live capture {s['source']}: {s['packets_analyzed']:,} packets in {s['elapsed_s']:.1f} s, "
                f"stopped by {s['stopped_by']}; kernel drops {drops}, roceview drops {s['roceview_drops']:,}{saved}")


def _warm_up() -> None:
    """Import what the end of a capture runs (the diagnoser, the report, the tables' writers)."""
    import roceview.diagnose  # noqa: F401
    import roceview.render.export  # noqa: F401
    import roceview.render.report  # noqa: F401


def _pass_on(handler, signum, frame) -> None:
    """A SIGINT to the handler that was there before (the CLI's: exit 130 with the -w file in
    place); KeyboardInterrupt when that was Python's or none."""
    if callable(handler):
        handler(signum, frame)
    raise KeyboardInterrupt


class _EchoOfStop:
    """The SIGINT handler once the capture has ended on a Ctrl-C: the same Ctrl-C delivered
    again (`timeout -s INT`), arriving while the outputs are written, is ignored; a later one
    puts the handler before back and goes to it."""

    def __init__(self, previous, until: float):
        self.previous, self.until = previous, until

    def __call__(self, signum, frame) -> None:
        if time.monotonic() < self.until:
            return
        signal.signal(signal.SIGINT, self.previous)
        _pass_on(self.previous, signum, frame)


class StoppableBatches:
    """session.batches(full=True) for the TUI, not analyzed: the TUI's loader feeds each batch
    to `analysis` (the session) on its own thread, so each packet is analyzed once and the
    loader's snapshots never race a feed. stop(): quitting ends the capture (tcpdump is
    stopped, a stream ends at its next read), so the TUI's loader thread, waiting for the next
    packet of a quiet interface, returns and the app can exit (it hung after q)."""

    def __init__(self, session: LiveSession):
        self.session = self.analysis = session

    def __iter__(self):
        return self.session.batches(full=True, analyze=False)

    def stop(self) -> None:
        self.session.stop("quit")
