"""Per-flow RoCE analysis: PSN gaps and retransmissions, NAKs, PFC pause time, ECN/CNP, RTT.

`Analyzer` consumes `roceview.packets.batch.Batch` chunks in capture order and returns an
`AnalysisResult`; `analyze_batches` does both. Imports nothing from rich or textual.
"""
from roceview.analysis.analyzer import Analyzer
from roceview.analysis.result import AnalysisResult
from roceview.analysis.tables import (EVENT_COLUMNS, FINDINGS_COLUMNS, FLOW_COLUMNS, PFC_COLUMNS,
                                      TIMELINE_COLUMNS, Table)


def analyze_batches(batches, pmtu=None, link_speed_gbps=100.0, bucket_ms=1.0, files=(), warnings=(),
                    keep_packets=False) -> AnalysisResult:
    analyzer = Analyzer(pmtu=pmtu, link_speed_gbps=link_speed_gbps, bucket_ms=bucket_ms,
                        keep_packets=keep_packets)
    for batch in batches:
        analyzer.feed(batch)
    return analyzer.finish(files=files, warnings=warnings)


__all__ = ["Analyzer", "AnalysisResult", "Table", "analyze_batches", "FLOW_COLUMNS", "PFC_COLUMNS",
           "EVENT_COLUMNS", "TIMELINE_COLUMNS", "FINDINGS_COLUMNS"]
