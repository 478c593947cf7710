"""Per-flow RoCE analysis: PSN gaps and retransmissions, NAKs, PFC pause time, ECN/CNP, RTT.

`Analyzer` consumes `roceview.packets.batch.Batch` chunks in capture order and returns an
`AnalysisResult`; `analyze_batches` does both. Imports nothing from rich or textual.

What the engines share. The local engine feeds one Analyzer (and the diagnoser's
FactCollector) the whole capture; the Dask engine (roceview/engines/dask/) runs the same classes
on partitions of it and must take the same decisions. It uses only these public names, so a
change to them reaches both engines:
- `Analyzer.feed`, `flow_ids`, `take_analyzed`, `holding` (batches held back for path-MTU
  evidence) and `pairing_open`, which a partition's Analyzer overrides with the whole
  capture's answer;
- `chunk_psn.pairing_window_open` and `NO_NEW_FLOW`: the rule that says whether a chunk may still
  pair QPs, as the Analyzer applies it and as the Dask plan replays it for every chunk at once;
- `pmtu.path_keys`: the unordered endpoint pair a path MTU is kept for, by which the Dask
  engine partitions the rows (both directions of a queue pair in one partition);
- `timeline.Timeline.parts` / `rows` and the grid helpers (`grid_cells`, `cell_rows`,
  `grid_places`, `placed`, `as_table`): the timeline's merge, replayed over the partitions;
- `build.summary`, `tables.Table`, `events.KIND_CODE`: the result as the local engine builds it;
- in roceview.diagnose.facts: `FactCollector` and its `new_classes` hook, `CaptureFacts`,
  `steps_back`.
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
