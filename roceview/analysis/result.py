"""AnalysisResult: the snapshot every renderer (report, CSV/JSON, TUI) and the diagnoser reads.

Tables are kept as numpy columns (`*_table`, see tables.py) and offered as pandas DataFrames
(`flows`, `pfc`, `events`, `timeline`, `ops`, `op_stats`, `read_depth`, `connections`, `priorities`, `cc`,
`paused_flows`, `findings`) built on first
access. The DataFrames have the
CSV columns; timestamps are datetime64[ns, UTC], QP numbers nullable UInt32.

`findings` is filled by the diagnoser (`roceview.diagnose`): assign a DataFrame with
FINDINGS_COLUMNS to `result.findings`, or call `result.set_findings(records)` with a list of
dicts (timestamps as int ns) to stay pandas-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roceview.analysis.cc_match import CC_COLUMNS
from roceview.analysis.connections import CONNECTION_COLUMNS
from roceview.analysis.priorities import PRIORITY_COLUMNS
from roceview.analysis.tables import (FINDINGS_COLUMNS, OP_STATS_COLUMNS, OPS_COLUMNS, PAUSED_FLOW_COLUMNS,
                                      READ_DEPTH_COLUMNS, Table)

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


@dataclass
class AnalysisResult:
    flows_table: Table
    pfc_table: Table
    events_table: Table
    timeline_table: Table
    summary: dict
    findings_table: Table = field(default_factory=lambda: Table.empty(FINDINGS_COLUMNS))
    packets: object = None  # DataFrame of the packets table when asked for
    facts: object = None    # roceview.diagnose.CaptureFacts gathered in the same pass
    ops_table: Table = field(default_factory=lambda: Table.empty(OPS_COLUMNS))            # ops.csv
    op_stats_table: Table = field(default_factory=lambda: Table.empty(OP_STATS_COLUMNS))  # per QP and op
    read_depth_table: Table = field(default_factory=lambda: Table.empty(READ_DEPTH_COLUMNS))
    connections_table: Table = field(default_factory=lambda: Table.empty(CONNECTION_COLUMNS))   # connections.csv
    priorities_table: Table = field(default_factory=lambda: Table.empty(PRIORITY_COLUMNS))      # priorities.csv
    cc_table: Table = field(default_factory=lambda: Table.empty(CC_COLUMNS))                    # cc.csv
    paused_flows_table: Table = field(default_factory=lambda: Table.empty(PAUSED_FLOW_COLUMNS))  # paused_flows.csv
    _frames: dict = field(default_factory=dict, repr=False)

    def _frame(self, name: str):
        if name not in self._frames:
            self._frames[name] = getattr(self, f"{name}_table").to_pandas()
        return self._frames[name]

    @property
    def flows(self):
        return self._frame("flows")

    @property
    def pfc(self):
        return self._frame("pfc")

    @property
    def events(self):
        return self._frame("events")

    @property
    def timeline(self):
        return self._frame("timeline")

    @property
    def connections(self):
        """One row per RDMA CM connection (connections.csv)."""
        return self._frame("connections")

    @property
    def priorities(self):
        """Per direction (source -> destination MAC), priority and DSCP: traffic, RoCE, ECN and
        the PFC pauses that held it (priorities.csv)."""
        return self._frame("priorities")

    @property
    def cc(self):
        """One row per CNP received: how the sender's DCQCN reaction point answered it (cc.csv)."""
        return self._frame("cc")

    @property
    def paused_flows(self):
        """Per (pausing MAC, priority, flow): the flow's frames to that MAC on that priority and
        those sent while the MAC paused it (paused_flows.csv)."""
        return self._frame("paused_flows")

    @property
    def ops(self):
        """One row per RDMA message (ops.csv)."""
        return self._frame("ops")

    @property
    def op_stats(self):
        """Per queue pair and operation: counts, latency p50/p99/max, message sizes."""
        return self._frame("op_stats")

    @property
    def read_depth(self):
        """Per requester flow and READ depth: the time at it and the READs started at it."""
        return self._frame("read_depth")

    @property
    def findings(self):
        return self._frame("findings")

    @findings.setter
    def findings(self, frame) -> None:
        records = []
        for row in frame.to_dict("records"):
            for ts in ("start_ts", "end_ts"):
                v = row.get(ts)
                row[ts] = int(v.value) if hasattr(v, "value") else int(v)
            records.append(row)
        self.set_findings(records)

    def set_findings(self, records: list[dict]) -> None:
        data = {c: [r.get(c, "") for r in records] for c in FINDINGS_COLUMNS}
        for ts in ("start_ts", "end_ts"):
            data[ts] = np.asarray(data[ts] or [], dtype=np.int64)
        self.findings_table = Table(FINDINGS_COLUMNS, data)
        self._frames.pop("findings", None)

    def worst_severity(self) -> str | None:
        """The most severe finding's severity (critical > warning > info), or None."""
        severities = [s for s in self.findings_table.data.get("severity", []) if s in SEVERITY_RANK]
        return max(severities, key=SEVERITY_RANK.get) if severities else None
