"""The streaming analyzer: feed Batches in capture order, get an AnalysisResult at the end.

Per chunk, the RoCE rows are grouped by flow and PSN space (one stable radix sort, chunk.py) and
every step is a numpy operation over the chunk; only per-flow / per-space state crosses chunk
boundaries (see psn.py, rtt.py, pauses.py), so memory is bounded by flows, not packets, and the result
does not depend on the chunk size. Within a flow, packets are taken in capture order. Steps skip
what a chunk does not contain (no PFC frames, no NAKs, no retransmissions, ...), so in-order
traffic costs a few passes over the chunk.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import chunk_counts, chunk_psn, related, unsent
from roceview.analysis.causality import EarlyResponses
from roceview.analysis.cc import CnpReactions
from roceview.analysis.chunk import ChunkRows
from roceview.analysis.copies import Copies
from roceview.analysis.chunk_psn import NO_NEW_FLOW, pairing_window_open
from roceview.analysis.events import EventLog
from roceview.analysis.packet_flags import FlagSink
from roceview.analysis.flows import new_registry
from roceview.analysis.pairing import CmPairs, Pairing
from roceview.analysis.pause_watch import PauseWatch
from roceview.analysis.pauses import ALL, SLOTS, PfcAccounting
from roceview.analysis.pmtu import PathMtu
from roceview.analysis.priorities import PriorityCounts
from roceview.analysis.connections import ConnectionLog
from roceview.analysis.ops import OpTracker
from roceview.analysis.psn import PsnSpaces
from roceview.analysis.reuse import NONE_HI, NONE_LO
from roceview.analysis.rtt import RttMatcher
from roceview.analysis.sends import FirstSends
from roceview.analysis.state import Columns
from roceview.analysis.timeline import Timeline
from roceview.analysis.build import build_result
from roceview.packets.batch import Batch, PROTO_CODE, PROTO_NAMES

HOLD_LIMIT = 1 << 20  # rows held back while waiting for path-MTU evidence
_ROCE = np.zeros(len(PROTO_NAMES), dtype=bool)
_ROCE[[PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]] = True


FLOW_STATE = {
    "packets": (np.int64, 0), "bytes": (np.int64, 0), "data_packets": (np.int64, 0),
    "payload_bytes": (np.int64, 0), "acks": (np.int64, 0), "naks_seq": (np.int64, 0),
    "naks_rnr": (np.int64, 0), "naks_other": (np.int64, 0), "gap_events": (np.int64, 0),
    "gap_psns": (np.int64, 0), "retransmitted_packets": (np.int64, 0),
    "retransmitted_bytes": (np.int64, 0), "retransmitted_payload": (np.int64, 0),
    "ecn_not_ect": (np.int64, 0), "ecn_ce": (np.int64, 0), "cnp_packets": (np.int64, 0),
    "first_ts": (np.int64, np.iinfo(np.int64).max), "last_ts": (np.int64, np.iinfo(np.int64).min),
    "transport": (np.int8, -1), "last_nak_idx": (np.int64, -1), "first_idx": (np.int64, -1),
    "last_gap_idx": (np.int64, -1),     # the last request-space gap (RTT: no sample across it)
    "last_gap_first": (np.int64, -1),   # ... its first missing PSN (related.py: the NAK it causes)
    "last_ce_idx": (np.int64, -1)}      # the last CE-marked packet (related.py: the CNP answering it)
SPACE_STATE = {"last_retrans": (bool, False), "last_run_idx": (np.int64, -1),
               "read_lo": (np.int64, NONE_LO), "read_hi": (np.int64, NONE_HI)}


def _opcode_name(batch: Batch) -> str:
    return "opcode" if "opcode" in batch.cols else "_opcode"


class Analyzer:
    def __init__(self, pmtu: int | None = None, link_speed_gbps: float = 100.0, bucket_ms: float = 1.0,
                 keep_packets: bool = False, packet_flags: bool = False, priority_table=None):
        """priority_table: a frame's priority per class (priorities.priority_table, from the
        diagnoser's `trust` / `dscp_to_priority`: Config.priority_table); None: the default."""
        self.pmtu_given = pmtu
        self.priority_table = priority_table
        self.path_mtu = PathMtu(pmtu)
        self.flow_paths = np.zeros(0, dtype=np.uint64)  # path key per flow (pmtu.py)
        self.link_speed_gbps = link_speed_gbps
        self.bucket_ms = bucket_ms
        self.registry = new_registry()
        self.flow = Columns(FLOW_STATE)
        self.space = Columns(SPACE_STATE)
        self.spaces = PsnSpaces()
        self.pairing = Pairing()
        self.cm = CmPairs()
        self.rtt = RttMatcher()
        self.ops = OpTracker()                         # ops.py: one row per RDMA message
        self.connections = ConnectionLog()             # connections.py: one row per CM connection
        self.early = EarlyResponses()
        self.cc = CnpReactions(registry=self.registry)   # cc.py: DCQCN reaction per sender QP (cc.csv)
        self.sends = FirstSends()
        self.unsent_found: list = []                   # unsent.py: decided at the end
        self.pfc = PfcAccounting(link_speed_gbps)
        self.pause_watch = PauseWatch(self.pfc, priority_table)     # frames sent while paused (pause_watch.py)
        # pause frames logged as events and counted; False: a Dask partition fed copies of them
        # only for its own flows' pause state (the PFC partition logs them)
        self.pfc_owner = True
        self.priorities: PriorityCounts | None = PriorityCounts()    # priorities.csv (None: not counted)
        self.timeline = Timeline(max(1, int(round(bucket_ms * 1_000_000))))
        self.events = EventLog()
        self.rows_seen = 0
        self.last_new_flow_idx = NO_NEW_FLOW
        self.proto_counts = np.zeros(len(PROTO_NAMES), dtype=np.int64)
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self._held: list[Batch] = []
        self._kept: list[Batch] | None = [] if keep_packets else None
        # flags per packet (packet_flags.py): analyzed batches get the columns; `analyzed` lists
        # those not yet taken (take_analyzed), for a reader that streams them (packets/read.py)
        self.packet_flags = packet_flags or keep_packets
        self.analyzed: list[Batch] = []
        self._flow_ids: tuple | None = None           # (batch, its RoCE rows' flow ids)
        self.copies = Copies()                        # second captures of a frame (copies.py)
        self.last_rows: tuple | None = None           # (idx0, rows or None = all, flow ids) of the last chunk

    # ---- input -------------------------------------------------------------------------------
    def feed(self, batch: Batch) -> None:
        if batch.n == 0:
            return
        self.connections.feed(batch)                   # every batch once, in order (before the hold)
        self.path_mtu.from_cm(batch)
        if self.path_mtu.hold(batch, _opcode_name(batch), _ROCE, bool(self._held)):
            self._held.append(batch)
            if sum(b.n for b in self._held) >= HOLD_LIMIT:
                self.path_mtu.pending.clear()          # no evidence in sight: FALLBACK_PMTU
            if not self.path_mtu.pending:
                self._release()
            return
        self._process(batch)

    def flow_ids(self, batch: Batch) -> np.ndarray | None:
        """The flow id of each RoCE row (with an opcode and a dest QP) of `batch`, the batch
        just fed, in row order; None when it was held back (or had no such rows). Given once:
        the reference is dropped."""
        kept, self._flow_ids = self._flow_ids, None
        return kept[1] if kept is not None and kept[0] is batch else None

    def _release(self) -> None:
        held, self._held = self._held, []
        self._process(Batch.concat(held))

    def finish(self, files=(), warnings=()):
        self._flow_ids = None                          # not asked for: drop the last batch
        if self._held:
            self._release()
        self.pfc.finish()
        self.cc.finish()
        self.forget(self.pairing.unconfirmed_lone(self.registry, self.flow.transport))
        self.forget(self.cm.apply(self.registry, self.pairing))
        unsent.finish(self)
        self.ops.finish(self)
        packets = None
        if self._kept is not None:                     # asked for: the packets table as well
            from roceview.packets.table import to_dataframe

            from roceview.analysis.packet_flags import packet_columns

            packets = to_dataframe(Batch.concat(self._kept) if self._kept else None, packet_columns())
        result = build_result(self, list(files), list(warnings), packets)
        self.sends = FirstSends()       # read only while feeding: not held through the diagnoser
        return result

    def snapshot(self, files=(), warnings=()):
        """The result so far, for a view that updates while reading (the TUI): built like
        finish()'s but changing no state, so feeding can go on. Pauses still open, lone
        pairings and CM handshakes are settled only by finish(); operations still open are
        listed as they stand."""
        return build_result(self, list(files), list(warnings), None, snapshot=True)

    def forget(self, flows: np.ndarray) -> None:
        """Withdrawn pairings: the RTT samples and operation completions taken through them go."""
        self.rtt.forget(flows)
        self.ops.forget(flows)

    def pairing_open(self, last_idx: int) -> bool:
        """Whether a chunk ending at row `last_idx` may still pair QPs: a flow appeared within
        PAIRING_HORIZON rows (engines/dask/partition: a partition is told the whole capture's answer)."""
        return bool(pairing_window_open(last_idx, self.last_new_flow_idx))

    # ---- one chunk ---------------------------------------------------------------------------
    def _process(self, batch: Batch) -> None:
        if not self.packet_flags:
            self._analyze(batch)
            return
        sink = FlagSink(batch.n, self.rows_seen)
        self.events.sink = self.rtt.sink = sink
        try:
            self._analyze(batch)
        finally:
            self.events.sink = self.rtt.sink = None
        sink.attach(batch)
        self.analyzed.append(batch)
        if self._kept is not None:
            self._kept.append(batch)

    def flush(self) -> None:
        """Analyze the batches held back for path-MTU evidence (the end of the input)."""
        if self._held:
            self._release()

    @property
    def holding(self) -> bool:
        """Whether batches are held back, waiting for evidence of the path MTU (pmtu.py)."""
        return bool(self._held)

    def take_analyzed(self) -> list[Batch]:
        """The batches analyzed since the last call, with their flag columns (in order)."""
        out, self.analyzed = self.analyzed, []
        return out

    def _analyze(self, batch: Batch) -> None:
        idx0 = self.rows_seen
        self.rows_seen += batch.n
        proto = batch.cols["_proto"]
        counts = np.bincount(proto, minlength=len(PROTO_NAMES))[: len(PROTO_NAMES)]
        self.proto_counts += counts
        ts = batch.cols["ts_ns"]
        in_order = bool(len(ts) < 2 or (ts[1:] >= ts[:-1]).all())     # the usual capture
        lo, hi = (int(ts[0]), int(ts[-1])) if in_order else (int(ts.min()), int(ts.max()))
        self.first_ts = lo if self.first_ts is None else min(self.first_ts, lo)
        self.last_ts = hi if self.last_ts is None else max(self.last_ts, hi)
        if self.priorities is not None:
            self.priorities.feed(batch, in_order)
        self.pause_watch.carry(lo)
        if counts[PROTO_CODE["pfc"]] or counts[PROTO_CODE["pause"]]:
            self._pfc_rows(batch, proto, idx0)
        self.cm.feed(batch)
        name = _opcode_name(batch)
        if name in batch.cols:
            rows = self._roce_rows(batch, name, int(counts[_ROCE].sum()))
            if rows is None or len(rows):
                ch = ChunkRows(self, batch, rows, idx0, name, in_order)
                self._flow_ids = (batch, self._without_copies(ch))
                self.cc.feed(batch, self._flow_ids[1])
                self.last_rows = (idx0, rows, ch.all_fid)       # copies too: the TUI lists them under their QP
                if ch.n:
                    self.pause_watch.feed(self, ch)      # before the flow counters take the chunk
                    ChunkAnalysis(self, ch).run()

    def _without_copies(self, ch: ChunkRows) -> np.ndarray:
        """The flow id of every RoCE row of the chunk, -1 for second captures of a frame
        (copies.py), which are logged as `duplicate` events and analyzed no further."""
        if ch.copies is None:
            return ch.fid
        at, ts, idx, fid, psn, later, original = ch.copies
        self.events.add("duplicate", ts, idx, fid, psn, later, rel=original)
        ids = ch.all_fid.copy()
        ids[at] = -1
        return ids

    @staticmethod
    def _roce_rows(batch: Batch, opcode_col: str, n_roce: int) -> np.ndarray | None:
        """RoCE rows with an opcode and a dest QP; None when that is every row (no copies)."""
        sel = None if n_roce == batch.n else _ROCE[batch.cols["_proto"]]
        for name in (opcode_col, "dest_qp"):
            valid = batch.valid.get(name)
            if valid is not None:
                sel = valid.copy() if sel is None else sel & valid
        if sel is None or sel.all():
            return None
        return np.flatnonzero(sel)

    def _pfc_rows(self, batch: Batch, proto: np.ndarray, idx0: int) -> None:
        parts = []
        if "pfc_enable" in batch.cols:
            rows = np.flatnonzero((proto == PROTO_CODE["pfc"]) & batch.mask("pfc_enable"))
            if len(rows):
                bits = (batch.cols["pfc_enable"][rows, None].astype(np.int64) >> np.arange(8)) & 1
                quanta = np.stack([batch.cols[f"pfc_quanta{p}"][rows] for p in range(8)], axis=1)
                r, p = np.nonzero(bits)  # quanta of disabled classes are ignored (802.1Qbb 36.1.3)
                parts.append((rows[r], p, quanta[r, p]))
        if "pause_quanta" in batch.cols:
            rows = np.flatnonzero((proto == PROTO_CODE["pause"]) & batch.mask("pause_quanta"))
            if len(rows):
                parts.append((rows, np.full(len(rows), ALL), batch.cols["pause_quanta"][rows]))
        if not parts:
            return
        rows, slot, quanta = (np.concatenate(c) for c in zip(*parts))
        order = np.argsort(rows, kind="stable")
        rows, slot, quanta = rows[order], slot[order].astype(np.int64), quanta[order].astype(np.int64)
        mac = self.pfc.mac_ids(batch.cols["_src_mac"][rows].astype(np.uint64))
        ts = batch.cols["ts_ns"][rows]
        idx = rows + idx0 if "_gidx" not in batch.cols else batch.cols["_gidx"][rows]
        self.pause_watch.pause_rows(mac * SLOTS + slot, rows, ts, quanta, *self.pfc.feed(mac, slot, quanta, ts, idx))
        if not self.pfc_owner:
            return
        pause = quanta > 0
        self.events.add("pfc_pause", ts[pause], idx[pause], mac[pause], None, slot[pause], quanta[pause])
        self.events.add("pfc_resume", ts[~pause], idx[~pause], mac[~pause], None, slot[~pause], quanta[~pause])


class ChunkAnalysis:
    """The steps over one chunk's RoCE rows, in the order their state dependencies need."""

    def __init__(self, an: Analyzer, ch: ChunkRows):
        self.an, self.ch = an, ch
        for cols in (an.flow, an.spaces):
            cols.grow(ch.n_flows)
        an.space.grow(2 * ch.n_flows)
        an.pairing.grow(ch.n_flows)
        an.sends.grow(ch.n_flows)
        an.ops.grow(ch.n_flows)

    def run(self) -> None:
        an, ch = self.an, self.ch
        last_idx = int(ch.idx(np.array([ch.n - 1]))[0])
        chunk_counts.transport(an, ch)
        counted = chunk_counts.counters(an, ch)
        part = chunk_psn.spaces(an, ch, chunk_psn.spans(an, ch, counted.nak))
        an.forget(an.cm.apply(an.registry, an.pairing))
        if an.pairing_open(last_idx):
            an.forget(an.pairing.update(*chunk_psn.pairing_evidence(an, ch, part)))
        gaps = related.request_gaps(ch, part)
        related.nak_events(an, ch, counted, gaps)
        related.cnp_events(an, ch, counted)
        related.retransmit_events(an, ch, part)
        chunk_psn.timeouts(an, ch, part, counted.nak_seq_rnr)
        responses = chunk_psn.responses(an, ch, part, counted.nak_seq)
        an.ops.feed(an, ch, part, responses)
        chunk_psn.unsent(an, ch, part, responses)
        an.early.feed(an, ch, part, responses)
        chunk_psn.rtt(an, ch, part, responses, gaps)
        chunk_counts.timeline(an, ch, counted, part.retrans_r)
