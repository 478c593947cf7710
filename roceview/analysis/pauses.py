"""PFC (IEEE 802.1Qbb) and 802.3x PAUSE accounting per (source MAC, priority).

A frame that enables priority p (its bit in the class-enable vector is set) with quanta q pauses
p for q x 512 bit times at the link speed, until that time ends or the next frame from the same
source for p arrives; q = 0 resumes at once. Quanta in slots whose enable bit is clear are
ignored (802.1Qbb 36.1.3). An 802.3x PAUSE frame counts as priority `all` (slot 8 here).

`paused_us` adds up each pause's effective duration; `longest_pause_us` is the longest
continuous paused period: a pause refreshed before it ran out (the usual XOFF refresh) continues
the same period. The last pause of each slot stays open between chunks; at the end of the
capture it runs for its full quanta time. `feed` also tells, per frame, the XOFF that began the
continuous period the frame's pause belongs to (pause_watch.py: frames sent while paused).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import group_bounds
from roceview.analysis.state import Columns
from roceview.packets.names import mac_text

ALL = 8  # slot of 802.3x PAUSE
SLOTS = 9


class PfcAccounting:
    def __init__(self, link_speed_gbps: float = 100.0):
        self.ns_per_quantum = 512.0 / float(link_speed_gbps)  # 1 Gb/s = 1 bit per ns
        self.macs: dict[int, int] = {}
        self.mac_list: list[int] = []
        self.st = Columns({
            "pause_frames": (np.int64, 0), "resume_frames": (np.int64, 0),
            "pause_quanta": (np.int64, 0), "paused_ns": (np.float64, 0.0),
            "longest_ns": (np.float64, 0.0), "first_ts": (np.int64, 0), "last_ts": (np.int64, 0),
            "open": (bool, False), "open_ts": (np.int64, 0), "open_q": (np.int64, 0),
            "run_ns": (np.float64, 0.0),
            "run_ts": (np.int64, 0), "run_idx": (np.int64, -1)})    # the open pause's period: its first XOFF

    def feed(self, mac_id: np.ndarray, slot: np.ndarray, quanta: np.ndarray, ts: np.ndarray,
             idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One row per (frame, enabled priority), in capture order; mac_id from `mac_ids`; idx:
        the rows' frame indexes. Returns per row the timestamp and frame index of the XOFF that
        began the continuous paused period its pause belongs to (a resume: its own)."""
        if len(mac_id) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        idx = np.arange(len(ts), dtype=np.int64) if idx is None else np.asarray(idx, np.int64)
        key = mac_id * SLOTS + slot
        order = np.argsort(key, kind="stable")
        key, quanta, ts, idx = key[order], quanta[order].astype(np.int64), ts[order], idx[order]
        starts, lengths, gid = group_bounds(key)
        self._count(key, quanta, ts, starts, lengths)
        start_ts, start_idx = np.empty_like(ts), np.empty_like(idx)
        start_ts[order], start_idx[order] = self._durations(key, quanta, ts, idx, starts, lengths, gid)
        return start_ts, start_idx

    def mac_ids(self, mac: np.ndarray) -> np.ndarray:
        """Dense index per source MAC (uint64), in order of first appearance (within a chunk
        too: pfc.csv's row order does not depend on the chunk size)."""
        uniq, first, inv = np.unique(mac, return_index=True, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int64)
        for i in np.argsort(first).tolist():
            m = int(uniq[i])
            if m not in self.macs:
                self.macs[m] = len(self.mac_list)
                self.mac_list.append(m)
            ids[i] = self.macs[m]
        self.st.grow(len(self.mac_list) * SLOTS)
        return ids[inv]

    def _count(self, key, quanta, ts, starts, lengths) -> None:
        st = self.st
        st.add("pause_frames", key[quanta > 0])
        st.add("resume_frames", key[quanta == 0])
        st.add("pause_quanta", key, quanta.astype(np.float64))
        keys = key[starts]
        new = (st.pause_frames[keys] + st.resume_frames[keys]) == lengths
        st.first_ts[keys[new]] = ts[starts[new]]
        st.last_ts[keys] = ts[starts + lengths - 1]

    def _durations(self, key, quanta, ts, idx, starts, lengths, gid) -> tuple[np.ndarray, np.ndarray]:
        """Prepend each slot's open pause, cut each pause at the next frame, sum periods; the
        period starts of the rows (without the prepended ones)."""
        st = self.st
        keys = key[starts]
        carried = st.open[keys]
        # virtual leading row per group: the carried open pause (or a zero pause)
        v_ts = np.where(carried, st.open_ts[keys], ts[starts])
        v_q = np.where(carried, st.open_q[keys], 0)
        all_ts = np.insert(ts, starts, v_ts)
        all_q = np.insert(quanta, starts, v_q)
        # each row's own start; a carried pause's is its period's first XOFF
        begin_ts = np.insert(ts, starts, np.where(carried, st.run_ts[keys], v_ts))
        begin_idx = np.insert(idx, starts, np.where(carried, st.run_idx[keys], -1))
        vstarts = starts + np.arange(len(starts))
        vlen = lengths + 1
        last = vstarts + vlen - 1
        nominal = all_q * self.ns_per_quantum  # float ns; timestamps stay integers
        wait = np.zeros(len(all_ts), dtype=np.int64)
        wait[:-1] = all_ts[1:] - all_ts[:-1]
        nxt_q = np.empty_like(all_q)
        nxt_q[:-1] = all_q[1:]
        has_next = np.ones(len(all_ts), dtype=bool)
        has_next[last] = False
        dur = np.where(has_next & (all_q > 0), np.minimum(nominal, wait), 0.0)
        cont = has_next & (all_q > 0) & (nxt_q > 0) & (wait <= nominal)
        run_first = self._periods(keys, dur, cont, vstarts, carried)
        st.paused_ns += np.bincount(np.repeat(keys, vlen), dur, minlength=st.n)
        st.open[keys] = all_q[last] > 0
        st.open_ts[keys] = all_ts[last]
        st.open_q[keys] = all_q[last]
        st.run_ts[keys], st.run_idx[keys] = begin_ts[run_first[last]], begin_idx[run_first[last]]
        real = np.ones(len(all_ts), dtype=bool)
        real[vstarts] = False
        return begin_ts[run_first][real], begin_idx[run_first][real]

    def _periods(self, keys, dur, cont, vstarts, carried) -> np.ndarray:
        """Continuous paused periods: consecutive pauses where each arrived before the last ran
        out. Returns each row's period's first row."""
        st = self.st
        run_start = np.ones(len(dur), dtype=bool)
        run_start[1:] = ~cont[:-1]
        run_start[vstarts] = True
        run_id = np.cumsum(run_start) - 1
        extra = np.zeros(len(dur))
        extra[vstarts] = np.where(carried, st.run_ns[keys], 0.0)  # period carried from before
        totals = np.bincount(run_id, dur + extra)
        if len(totals):
            group_of_run = np.repeat(keys, np.diff(np.append(run_id[vstarts], run_id[-1] + 1)))
            np.maximum.at(st.longest_ns, group_of_run, totals)
        # the open pause (last row) continues its period into the next chunk
        last = np.append(vstarts[1:], len(dur)) - 1
        st.run_ns[keys] = totals[run_id[last]] - 0.0
        return np.maximum.accumulate(np.where(run_start, np.arange(len(dur)), 0))

    def finish(self) -> None:
        """End of capture: each open pause runs for its full quanta time."""
        st = self.st
        rest = np.where(st.open, st.open_q * self.ns_per_quantum, 0.0)
        st.paused_ns += rest
        st.longest_ns = np.maximum(st.longest_ns, np.where(st.open, st.run_ns + rest, 0.0))
        st.open[:] = False

    def table(self):
        from roceview.analysis.tables import PFC_COLUMNS, Table

        st = self.st
        rows = np.flatnonzero((st.pause_frames + st.resume_frames) > 0)
        macs = [mac_text(self.mac_list[k // SLOTS]) for k in rows.tolist()]
        prios = ["all" if k % SLOTS == ALL else str(k % SLOTS) for k in rows.tolist()]
        return Table(PFC_COLUMNS, {
            "src_mac": macs, "priority": prios, "pause_frames": st.pause_frames[rows],
            "resume_frames": st.resume_frames[rows], "pause_quanta": st.pause_quanta[rows],
            "paused_us": st.paused_ns[rows] / 1000.0, "longest_pause_us": st.longest_ns[rows] / 1000.0,
            "first_ts": st.first_ts[rows], "last_ts": st.last_ts[rows]})

