"""Per-packet analysis flags: the events of one chunk written onto its packets.

Every event the analysis adds (events.EventLog.add) is about one packet, its row index `idx`;
while a chunk is analyzed with flags asked for, EventLog hands each event to this chunk's
FlagSink, before the per-kind budget (MAX_PER_KIND), so the flags are the events, all of them.
A packet's flags depend only on packets before it (the analysis is one forward pass). Nothing
here runs when flags are not asked for (EventLog.sink is None).

Columns added to the Batch (docs/columns.md, "Analysis columns"):
  flags          uint32, bits of roceview.packets.flags.Flag
  missing_psns   PSNs missing just before this packet (valid where the GAP bit is set)
  rel_frame      the related frame (1-based): a retransmission -> the frame that first carried
                 its PSN; a NAK -> the frame that opened the gap it reports; a CNP -> the last
                 CE-marked frame of the flow it answers; an ACK -> the request of its RTT sample
  rtt_ns         the RTT sample an ACK closes (valid where RTT_ACK is set)
"""
from __future__ import annotations

import numpy as np

from roceview.packets.flags import Flag

ANALYSIS_COLUMNS = ("flags", "missing_psns", "rel_frame", "rtt_ns")


def packet_columns() -> tuple:
    """The packets table's columns with the analysis columns (imports pandas: call lazily)."""
    from roceview.packets.table import COLUMNS

    return tuple(COLUMNS) + ANALYSIS_COLUMNS
KIND_FLAG = {"gap": Flag.GAP, "retransmit": Flag.RETRANSMISSION,
             "timeout_retransmit": Flag.RETRANSMISSION | Flag.TIMEOUT_RETRANSMISSION,
             "psn_reuse": Flag.PSN_REUSE, "duplicate": Flag.DUPLICATE, "nak_seq": Flag.NAK,
             "nak_other": Flag.NAK, "nak_rnr": Flag.RNR_NAK, "ecn_ce": Flag.ECN_CE, "cnp": Flag.CNP,
             "pfc_pause": Flag.PFC_PAUSE, "pfc_resume": Flag.PFC_RESUME}


class FlagSink:
    """The flag columns of one analyzed chunk (batch rows idx0 .. idx0 + n - 1)."""

    def __init__(self, n: int, idx0: int):
        self.n, self.idx0 = n, idx0
        self.flags = np.zeros(n, dtype=np.uint32)
        self.missing = np.zeros(n, dtype=np.int64)
        self.rel = np.full(n, -1, dtype=np.int64)       # row index, -1: none
        self.rtt = np.full(n, -1, dtype=np.int64)

    def mark(self, kind: str, idx, a=None, rel=None) -> None:
        bit = KIND_FLAG.get(kind)
        if bit is None or len(idx) == 0:
            return
        r = np.asarray(idx, dtype=np.int64) - self.idx0
        inside = (r >= 0) & (r < self.n)          # (events decided at the end are not here)
        r = r[inside]
        self.flags[r] |= np.uint32(bit)
        if kind == "gap" and a is not None:
            self.missing[r] = np.asarray(a)[inside]
        if rel is not None:
            self.relate(r, np.asarray(rel, dtype=np.int64)[inside])

    def relate(self, r: np.ndarray, rel: np.ndarray) -> None:
        """The first relation a packet gets stays (a NAK's gap before the RTT sample it closes)."""
        ok = (rel >= 0) & (self.rel[r] < 0)
        self.rel[r[ok]] = rel[ok]

    def rtt_samples(self, resp_idx: np.ndarray, req_idx: np.ndarray, ns: np.ndarray) -> None:
        """RTT samples closed by responses at resp_idx: several requests one response covers
        name the newest (the last one the response answers)."""
        if len(resp_idx) == 0:
            return
        order = np.lexsort((req_idx, resp_idx))
        resp_idx, req_idx, ns = resp_idx[order], req_idx[order], ns[order]
        last = np.ones(len(resp_idx), dtype=bool)
        last[:-1] = resp_idx[1:] != resp_idx[:-1]
        r = resp_idx[last] - self.idx0
        ok = (r >= 0) & (r < self.n)
        r = r[ok]
        self.flags[r] |= np.uint32(Flag.RTT_ACK)
        self.rtt[r] = ns[last][ok]
        self.relate(r, req_idx[last][ok])

    def attach(self, batch) -> None:
        """Write the columns onto `batch` (the chunk analyzed), with the flags the packets table
        decides by itself (bad ICRC, truncated)."""
        flags = self.flags
        if "icrc_ok" in batch.cols:
            bad = ~batch.cols["icrc_ok"].astype(bool)
            ok = batch.valid.get("icrc_ok")
            if ok is not None:
                bad &= ok
            flags[bad] |= np.uint32(Flag.ICRC_BAD)
        if "truncated" in batch.cols:
            flags[batch.cols["truncated"].astype(bool)] |= np.uint32(Flag.TRUNCATED)
        batch.cols["flags"] = flags
        batch.cols["missing_psns"] = self.missing
        batch.valid["missing_psns"] = (flags & np.uint32(Flag.GAP)) != 0
        batch.cols["rel_frame"] = self.rel + 1
        batch.valid["rel_frame"] = self.rel >= 0
        batch.cols["rtt_ns"] = self.rtt
        batch.valid["rtt_ns"] = self.rtt >= 0
