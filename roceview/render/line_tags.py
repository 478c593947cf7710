"""The bracketed analysis tags at the end of a `dissect` line (`[PSN gap: 9 missing]`), built
column-wise (render/line_parts.py). The words are render/flag_text.py's `tags` (its per-packet
definition, used by `-V`); tests/render/test_packet_lines.py checks both agree on every tag."""
from __future__ import annotations

import numpy as np

from dissectors.ib import NAK_CODES, RNR_TIMER_MS
from roceview.render.cells import join_cells
from roceview.render.flag_text import (CNP, DUPLICATE, ECN_CE, GAP, NAK, PFC_PAUSE, PFC_RESUME, PSN_REUSE,
                                       RETRANSMISSION, RNR_NAK, RTT_ACK, TAGGED, TIMEOUT, _COLOUR)
from roceview.render.line_parts import Columns, decimals, digits, gather, lit, mapped, or_none
from roceview.units import duration

_RESET = "\x1b[0m"
_SCALES = (1.0, 1e3, 1e6, 1e9)                 # units.duration's ns, us, ms, s
_UNITS = (" ns", " us", " ms", " s")


class _Tags:
    """The tag parts of the rows of one block, in flag_text.tags' order."""

    def __init__(self, c: Columns, colour: bool):
        self.c, self.n, self.colour, self.parts = c, c.n, colour, []
        flags, _ = c.num("flags")
        self.flags = np.where(flags & TAGGED != 0, flags, 0)
        self.rel, rel_ok = c.num("rel_frame")
        self.has_rel = rel_ok & (self.rel != 0)              # `if rel`: None and 0 are false

    def rows(self, bit: int) -> np.ndarray:
        return self.flags & bit != 0

    def tag(self, shown: np.ndarray, severity: str, *pieces) -> None:
        """` [pieces]` on the shown rows; a piece is a text or a list of parts."""
        if not shown.any():
            return
        start = f" {_COLOUR[severity]}[" if self.colour else " ["
        self.parts.append(lit(self.n, start, shown))
        for piece in pieces:
            self.parts += [lit(self.n, piece, shown)] if isinstance(piece, str) else piece
        self.parts.append(lit(self.n, "]" + _RESET if self.colour else "]", shown))

    def frame(self, shown: np.ndarray, before: str) -> list:
        """`{before}frame {rel}` where the related frame is known."""
        with_rel = shown & self.has_rel
        return [lit(self.n, before + "frame ", with_rel)] + digits(self.rel, with_rel)


def tag_parts(c: Columns, gbps: float, colour: bool) -> list:
    """The parts of ` [tag] [tag]` (flag_text.tag_text with a leading space), in bit order."""
    t = _Tags(c, colour)
    if not t.flags.any():
        return []
    _transport_tags(t, c)
    _congestion_tags(t, c, gbps)
    return t.parts


def _transport_tags(t: _Tags, c: Columns) -> None:
    """PSN gap, retransmission, PSN reuse, duplicate, NAK, RNR NAK."""
    code, code_ok = c.num("aeth_code")
    missing, missing_ok = c.num("missing_psns")
    gap = t.rows(GAP)
    t.tag(gap, "error", "PSN gap: ", or_none(missing, missing_ok, gap), " missing")
    timeout, resent = t.rows(TIMEOUT), t.rows(RETRANSMISSION) & ~t.rows(TIMEOUT)
    t.tag(timeout, "error", "Timeout retransmission", t.frame(timeout, " of "))
    t.tag(resent, "error", "Retransmission", t.frame(resent, " of "))
    t.tag(t.rows(PSN_REUSE), "error", "PSN reuse")
    t.tag(t.rows(DUPLICATE), "warn", "Duplicate frame")
    nak = t.rows(NAK)
    t.tag(nak, "error", mapped(code, code_ok, nak, lambda v: f"NAK {NAK_CODES.get(v, v)}"), t.frame(nak, ", gap at "))
    rnr = t.rows(RNR_NAK)
    t.tag(rnr, "error", mapped(code, code_ok, rnr,
                               lambda v: f"RNR NAK: retry in {RNR_TIMER_MS[v]:g} ms" if v is not None else "RNR NAK"))


def _congestion_tags(t: _Tags, c: Columns, gbps: float) -> None:
    """ECN CE, CNP, PFC pause and resume, RTT sample (the costly pieces only when shown)."""
    t.tag(t.rows(ECN_CE), "warn", "ECN CE")
    cnp = t.rows(CNP)
    t.tag(cnp, "warn", "CNP", t.frame(cnp, " for CE "))
    pause, resume, rtt = t.rows(PFC_PAUSE), t.rows(PFC_RESUME), t.rows(RTT_ACK)
    if pause.any():
        t.tag(pause, "warn", "Pause", _paused(c, pause, gbps))
    if resume.any():
        t.tag(resume, "note", "Resume", _resumed(c, resume))
    if rtt.any():
        ns, ns_ok = c.num("rtt_ns")
        sample = rtt & ns_ok & t.has_rel
        t.tag(rtt, "note", [lit(c.n, "RTT ", sample)] + duration_parts(ns.astype(np.float64), sample),
              [lit(c.n, " to ", sample)], t.frame(sample, ""), [lit(c.n, "RTT sample", rtt & ~sample)])


def duration_parts(ns: np.ndarray, shown: np.ndarray) -> list:
    """units.duration(ns) of each shown row ('500 ns', '1.828 us', '12.370 ms'), as one part
    built on the shown rows only (tags are on few rows of a block). The unit is the one of the
    value rounded to 3 decimals (999.9996 us is '1.000 ms'); a value within a few ulps of that
    edge, or not finite, is written by units.duration itself."""
    n, rows = len(ns), np.flatnonzero(shown)
    if not len(rows):
        return [lit(n, "", shown)]
    x = np.asarray(ns, np.float64)[rows]
    size = np.abs(x)
    unit = (size >= 1e3).astype(np.int64) + (size >= 1e6) + (size >= 1e9)
    with np.errstate(invalid="ignore"):
        y = size / np.take(_SCALES, unit) * np.where(unit > 0, 1000.0, 1.0)   # in the last decimal
        edge = np.where(unit > 0, 999_999.5, 999.5)
        unsure = ~np.isfinite(x) | (np.abs(y - edge) <= 8 * np.spacing(edge))
        unit += (unit < 3) & (y >= edge) & ~unsure
    m, sure = len(rows), ~unsure
    parts = []
    for u, (scale, name) in enumerate(zip(_SCALES, _UNITS)):
        on = sure & (unit == u)
        if on.any():
            parts += decimals(x / scale, 3 if u else 0, on) + [lit(m, name, on)]
    if unsure.any():
        parts.append(gather(np.cumsum(unsure) - 1, [duration(v) for v in x[unsure].tolist()], unsure))
    mat, mask = join_cells(parts)
    full, full_mask = np.zeros((n, mat.shape[1]), np.uint8), np.zeros((n, mat.shape[1]), bool)
    full[rows], full_mask[rows] = mat, mask
    return [(full, full_mask)]


def _ns(quanta: np.ndarray, gbps: float) -> np.ndarray:
    """Nanoseconds of pause (quanta x 512 bit times), the float ops of flag_text._pause."""
    return quanta * 512 / gbps


def _paused(c: Columns, rows: np.ndarray, gbps: float) -> list:
    """` all 335.539 us` (PAUSE) or ` P0 335.539 us P7 15 ns` (PFC: priorities enabled with
    quanta > 0), nothing when none is."""
    n = c.n
    proto, names = c.cat("proto")
    is_pause = proto == names.index("pause") if "pause" in names else np.zeros(n, bool)
    q, q_ok = c.num("pause_quanta")
    whole = rows & is_pause & q_ok
    parts = [lit(n, " all ", whole)] + duration_parts(_ns(q, gbps), whole)
    en, _ = c.num("pfc_enable")
    for p in range(8):
        quanta, ok = c.num(f"pfc_quanta{p}")
        on = rows & ~whole & (en >> p & 1).astype(bool) & ok & (quanta != 0)
        parts += [lit(n, f" P{p} ", on)] + duration_parts(_ns(quanta, gbps), on)
    return parts


def _resumed(c: Columns, rows: np.ndarray) -> list:
    """` all` (PAUSE), or the enabled priorities with quanta 0 (or none read)."""
    n = c.n
    proto, names = c.cat("proto")
    is_pause = rows & (proto == names.index("pause") if "pause" in names else np.zeros(n, bool))
    parts = [lit(n, " all", is_pause)]
    en, _ = c.num("pfc_enable")
    for p in range(8):
        quanta, ok = c.num(f"pfc_quanta{p}")
        parts.append(lit(n, f" P{p}", rows & ~is_pause & (en >> p & 1).astype(bool) & ~(ok & (quanta != 0))))
    return parts
