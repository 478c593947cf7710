"""Python API: `roceview.analyze(paths, **options) -> AnalysisResult`.

    result = roceview.analyze("mirror.pcap", link_speed=100, pmtu=None)
    result.flows        # pandas DataFrame, one row per flow (qps.csv columns)
    result.pfc, result.events, result.timeline, result.findings, result.summary
    result.priorities   # per direction (MAC pair), priority and DSCP: traffic, RoCE, CE, pauses
    result.cc           # one row per CNP received: the sender's DCQCN reaction (cc.csv)
    result.paused_flows # per (pausing MAC, priority, flow): frames sent to it, and while paused
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from roceview.analysis import AnalysisResult
    from roceview.packets.batch import Batch

DEFAULT_CHUNK = 1 << 16


def analyze(paths, *, pmtu: int | None = None, link_speed: float = 100.0, bucket_ms: float = 1.0,
            roce_ports: Iterable[int] = (), chunk_packets: int = DEFAULT_CHUNK, packets: bool = False,
            warn: Callable[[str], None] | None = None, progress: Callable[[int], None] | None = None,
            diagnose: bool = True, config=None, display_filter: str | None = None,
            on_batch: Callable[[Batch], None] | None = None, engine: str = "local",
            scheduler: str | None = None, scheduler_timeout: float | None = None) -> AnalysisResult:
    """Analyze capture file(s): a path, several paths, a directory, or '-' for stdin.

    pmtu: path MTU in bytes (default: inferred from FIRST/MIDDLE payloads); link_speed: Gb/s for
    PFC pause time; bucket_ms: timeline bucket; packets=True also returns the packets table as
    `result.packets`; warn receives decode warnings (default: stderr); progress(n) is called with
    the number of packets of each chunk read, on_batch(batch) with the chunk itself (its
    `cap_len` column: the bytes read, for a progress bar); config: a roceview.diagnose.Config or
    the path of a TOML file of thresholds; display_filter: a Wireshark display filter
    (roceview.filter): only the packets it matches are analyzed (and counted by progress), like
    `tshark -R` (a QP whose ACKs are filtered out looks like loss); engine="dask" decodes the
    files on a Dask cluster (the scheduler at address `scheduler`, else a LocalCluster; `pip
    install 'roceview[dask]'`) with results identical to the local engine's
    (roceview.engines.dask.client). Raises roceview.errors.BadInput for bad input (a bad filter included).
    """
    from roceview import engines

    check_options(pmtu, link_speed, bucket_ms)
    roce_ports = checked_ports(roce_ports)
    warnings: list[str] = []

    def on_warning(message: str) -> None:
        warnings.append(message)
        if warn is not None:
            warn(message)
        else:
            import sys
            print(f"roceview: warning: {message}", file=sys.stderr)

    display = _display_filter(display_filter)
    files = engines.get(engine if engine in engines.NAMES else "local").inputs(paths)
    settings = load_settings(config)      # the analysis too reads it: trust / dscp_to_priority
    chosen = engines.get(engine)          # an unknown name is refused after bad inputs and config are
    connection = None
    timeout = {} if scheduler_timeout is None else {"scheduler_timeout": scheduler_timeout}
    if chosen.ANALYZES and not packets and display is None:     # the analysis on the workers
        if on_batch is not None:          # no batch passes here: the callback sees an empty one
            import numpy as np

            from roceview.packets.batch import Batch

            on_batch(Batch(0, {"cap_len": np.zeros(0, np.uint32)}))
        result, connection = chosen.analyzed(files, scheduler, on_warning, roce_ports=roce_ports,
                                             chunk_packets=chunk_packets, pmtu=pmtu, link_speed=link_speed,
                                             bucket_ms=bucket_ms, facts=diagnose,
                                             priority_table=_priority_table(settings), **timeout)
        if result is not None:
            if progress is not None:
                progress(result.summary["packets"])
            return _diagnosed(result, settings, diagnose)
    # Reading starts now, on its own thread: the analysis modules import meanwhile. The
    # analysis reads 22 of the declared columns: the kernel extracts only those, unless the
    # caller asked for the packets table as well.
    batches = chosen.batches(files, scheduler, roce_ports=roce_ports, chunk_packets=chunk_packets,
                             warn=on_warning, projection=None if packets else _projection(display),
                             display_filter=display, connection=connection, **timeout)
    analysis = Analysis(pmtu, link_speed, bucket_ms, settings, diagnose=diagnose, keep_packets=packets)
    try:
        for batch in batches:
            if display is not None and batch.n:   # events, ops, cc.csv: the capture's frame numbers
                batch.cols["_gidx"] = batch.cols["frame"].astype("int64") - 1
            analysis.feed(batch)
            if progress is not None:
                progress(batch.n)
            if on_batch is not None:
                on_batch(batch)
    finally:
        batches.close()
    return analysis.finish(files, warnings)


def iter_packets(paths, columns=None, roce_ports: Iterable[int] = (), chunk_packets: int = DEFAULT_CHUNK,
                 warn=None, analysis: bool = False, pmtu: int | None = None):
    """The packets table in chunks of pandas DataFrames; analysis=True adds the analysis
    columns (flags, missing_psns, rel_frame, rtt_ns: docs/columns.md) from the same streaming
    analysis as `analyze` (pmtu as there)."""
    from roceview.packets.read import iter_batches
    from roceview.packets.table import to_dataframe

    batches = iter_batches(paths, roce_ports, chunk_packets, warn)
    if analysis:
        batches, columns = _with_analysis(batches, columns, pmtu)
    for batch in batches:
        yield to_dataframe(batch, columns)


def read_packets(paths, columns=None, roce_ports: Iterable[int] = (), warn=None, analysis: bool = False,
                 pmtu: int | None = None):
    """The whole packets table as one pandas DataFrame (columns: docs/columns.md); analysis=True
    adds the analysis columns, as iter_packets."""
    from roceview.packets.batch import Batch
    from roceview.packets.read import iter_batches
    from roceview.packets.table import to_dataframe

    batches = iter_batches(paths, roce_ports, warn=warn)
    if analysis:
        batches, columns = _with_analysis(batches, columns, pmtu)
    batches = list(batches)
    return to_dataframe(Batch.concat(batches) if batches else None, columns)


def _with_analysis(batches, columns, pmtu):
    """The batches with the analysis columns written on (annotate.analyzed), and the columns
    asked for grown by them."""
    from roceview.analysis.annotate import analyzed
    from roceview.analysis.packet_flags import ANALYSIS_COLUMNS, packet_columns

    columns = packet_columns() if columns is None else tuple(columns) + tuple(
        c for c in ANALYSIS_COLUMNS if c not in columns)
    return analyzed(batches, pmtu), columns


class Analysis:
    """The analysis `analyze` runs over batches fed one at a time: the Analyzer, the
    diagnoser's FactCollector (when diagnosing) and, at the end, the findings. `roceview live`
    and the TUI's loader run one too (packet_flags: the per-packet flags of the packet list)."""

    def __init__(self, pmtu, link_speed, bucket_ms, settings, *, diagnose: bool = True,
                 keep_packets: bool = False, packet_flags: bool = False):
        from roceview.analysis import Analyzer

        self.analyzer = Analyzer(pmtu=pmtu, link_speed_gbps=link_speed, bucket_ms=bucket_ms,
                                 keep_packets=keep_packets, packet_flags=packet_flags,
                                 priority_table=_priority_table(settings))
        self.facts = _fact_collector() if diagnose else None
        self.settings, self.diagnose = settings, diagnose

    def feed(self, batch) -> None:
        self.analyzer.feed(batch)
        if self.facts is not None:
            self.facts.feed(batch, self.analyzer.flow_ids(batch))

    def finish(self, files, warnings, summary: dict | None = None):
        """The final result, findings included (Analyzer.finish: call once); `summary` adds to
        the result's summary before the diagnoser reads it (live: the capture tool's drops)."""
        result = self.analyzer.finish(files=files, warnings=warnings)
        result.summary.update(summary or {})
        if self.facts is not None:
            result.facts = self.facts.finish()
        return _diagnosed(result, self.settings, self.diagnose)


def _diagnosed(result, settings, diagnose: bool):
    if diagnose:
        from roceview.diagnose import find

        result.set_findings(find(result, settings))
    return result


def _display_filter(text: str | None):
    if text is None:
        return None
    from roceview.filter import compile_filter

    return compile_filter(text)


def _projection(display) -> str | None:
    """The analysis projection, grown to every column when the filter reads a header field
    outside it (packets.read.projection_for)."""
    from roceview.packets.read import projection_for

    return "analysis" if display is None else projection_for("analysis", display.fields)


def _priority_table(settings):
    """The analysis's priority of each frame class from the settings' `trust` and
    `dscp_to_priority` (Config.priority_table); None for no settings or the default map (the
    analysis's own, faster path gives the same)."""
    if settings is None or (settings.trust == "auto" and not settings.dscp_to_priority):
        return None
    return settings.priority_table()


def _fact_collector():
    from roceview.diagnose import FactCollector

    return FactCollector()


def load_settings(config, pfc_priorities=None):
    """A Config as is; a path is loaded (BadInput, one line, when it cannot be). Nothing is
    imported for the rest: the diagnoser's modules import once reading has started.
    `pfc_priorities` (--pfc-priorities) is laid over the file's or the Config's setting."""
    is_path = isinstance(config, (str, bytes)) or hasattr(config, "__fspath__")
    if pfc_priorities is None and not is_path:
        return config
    from roceview.diagnose import load_config

    if pfc_priorities is None:
        return load_config(config)
    if config is not None and not is_path:
        import dataclasses

        return dataclasses.replace(config, pfc_priorities=sorted(set(pfc_priorities)))
    return load_config(config, pfc_priorities=list(pfc_priorities))


MAX_BUCKET_MS = 365 * 86_400_000   # a year: the bucket in ns and its doublings stay in int64 (1e303 overflowed)
MAX_LINK_GBPS = 10_000             # 10 Tb/s: above any Ethernet link (1.6 Tb/s in 2026); 1e300 is a typo


def check_options(pmtu, link_speed, bucket_ms) -> None:
    from roceview.errors import BadInput

    if pmtu is not None and pmtu not in (256, 512, 1024, 2048, 4096):
        raise BadInput(f"--pmtu must be one of 256, 512, 1024, 2048, 4096 (got {pmtu})")
    # `not x > 0` also refuses NaN; inf (or 1e400) would end in an OverflowError traceback
    check_link_speed(link_speed)
    if not (bucket_ms is not None and 0 < bucket_ms <= MAX_BUCKET_MS):
        raise BadInput(f"--bucket must be a number > 0 and at most {MAX_BUCKET_MS:,} ms, a year (got {bucket_ms})")


def check_link_speed(link_speed) -> None:
    from roceview.errors import BadInput

    # `not x > 0` also refuses NaN; inf (or 1e400) would end in an OverflowError traceback
    if not (link_speed is not None and 0 < link_speed <= MAX_LINK_GBPS):
        raise BadInput(f"--link-speed must be a number > 0 and at most {MAX_LINK_GBPS:,} Gb/s (got {link_speed})")


def checked_ports(roce_ports) -> tuple:
    """Each a UDP port, 1-65535 (decode.port_table indexes a 65536-entry table by it)."""
    from operator import index

    from roceview.errors import BadInput

    ports = tuple(roce_ports)
    for port in ports:
        try:
            ok = not isinstance(port, bool) and 1 <= index(port) <= 65535
        except TypeError:
            ok = False
        if not ok:
            raise BadInput(f"--roce-port must be a UDP port, 1-65535 (got {port!r})")
    return ports
