"""A sender QP's rate limiter read from the spacing of its packets (the DCQCN reaction point's
rate as the wire shows it), one chunk of samples at a time.

A sample is one gap inside a message: the wire bits of the packet before it (frame, FCS,
preamble/SFD and inter-frame gap: wire_len + 24 bytes, as the generator and the NIC clock them)
over the time to the next packet. A limiter paces packet by packet (the next packet leaves when
the one before has been paid for at the current rate), so no gap is shorter than its pacing;
longer ones (a window stall, a PFC pause, go-back-N) say nothing about it. So the limiter's rate
is the upper envelope of the samples: the second highest of K in a row (the highest would take
one packet bunched by capture jitter for the rate). Gaps between messages (the later packet
FIRST or ONLY) are not samples: an application that posts messages apart sets them, not the
limiter, and a sender whose every message is one packet shows no limiter at all.

A cut is the first sample of a run where the rate falls at least MIN_CUT below the envelope just
before it, and stays there: the envelope of the K samples from it on is below too (a window
stall is one slow gap and the next ones are back at the old rate). It took effect between two
packets' departures (cut_kinds): usually after the one before the last packet ahead of the slow
gap and by the time that last one left (the limiter set the slow gap from its new rate).
Two cuts less than K samples apart are one. Recovery after a cut: the first envelope made only
of samples after it at RECOVERED of the rate before the cut.
"""
from __future__ import annotations

import numpy as np

K = 4                # samples in an envelope window
MIN_CUT = 0.10       # a cut lowers the rate by at least this share (shallower: jitter)
RECOVERED = 0.90     # recovered: the envelope is back at this share of the rate before the cut
STALL = 0.75         # a sample below this share of its envelope is a stall, not the limiter's rate
WIRE_OVERHEAD = 24   # FCS 4 + preamble/SFD 8 + inter-frame gap 12 bytes


def windows(values: np.ndarray, same: np.ndarray, forward: bool) -> np.ndarray:
    """(n, K) matrix: row i holds values i-j (backward) or i+j (forward), j < K, -inf where
    that row is outside i's group (same[i]: row i-1 is of i's group; same[0] is False)."""
    n = len(values)
    out = np.full((n, K), -np.inf)
    out[:, 0] = values
    ok = np.ones(n, dtype=bool)
    for j in range(1, min(K, n)):
        if forward:          # i+j is in the group when rows i+1 .. i+j all continue it
            ok[: n - j] &= same[j:]
            ok[n - j:] = False
            out[: n - j, j] = np.where(ok[: n - j], values[j:], -np.inf)
        else:                # i-j is in the group when rows i-j+1 .. i all continue it
            ok[j:] &= same[1: n - j + 1]
            ok[:j] = False
            out[j:, j] = np.where(ok[j:], values[: n - j], -np.inf)
    return out


def envelope(win: np.ndarray) -> np.ndarray:
    """The second highest of each row's values (the highest when it is the only one)."""
    if win.shape[1] == 4:        # pairwise: far cheaper than sorting each row
        a, b, c, d = win.T
        hi1, lo1, hi2, lo2 = np.maximum(a, b), np.minimum(a, b), np.maximum(c, d), np.minimum(c, d)
        second = np.maximum(np.minimum(hi1, hi2), np.maximum(lo1, lo2))
        top = np.maximum(hi1, hi2)
    else:
        rows = np.sort(win, axis=1)
        second, top = rows[:, -2], rows[:, -1]
    return np.where(np.isfinite(second), second, top)


def envelopes(rate: np.ndarray, same: np.ndarray, final: bool) -> tuple:
    """(backward envelope, forward envelope, rows whose forward window is complete). The forward
    window of row i is the backward one of row i+K-1 when that row is of i's group; rows near a
    group's end have it only at the end of the capture (`final`: computed from what there is)."""
    back = envelope(windows(rate, same, forward=False))
    n = len(rate)
    run = np.ones(n, dtype=bool)          # rows i+1 .. i+K-1 all continue i's group
    for j in range(1, K):
        if j >= n:                        # fewer than K rows: no window is complete
            run[:] = False
            break
        run[: n - j] &= same[j:]
        run[n - j:] = False
    fwd = np.full(n, np.nan)
    fwd[: max(n - K + 1, 0)] = back[K - 1:]
    fwd[~run] = np.nan
    if final and not run.all():
        fwd[~run] = envelope(windows(rate, same, forward=True)[~run])
    return back, fwd, run


def cut_marks(rate: np.ndarray, same: np.ndarray, back: np.ndarray, fwd: np.ndarray) -> tuple:
    """Per sample: whether a cut starts at it (see the module docstring), and the rates just
    before and after it: the samples on either side of the cut, unless one is a stall (below
    STALL of its envelope), then the envelope. The samples, not the envelopes, where they can:
    a limiter recovering fast (at low rates) moves within a window, and the envelope lags it."""
    prev_env = _shift(back, same)
    prev_rate = _shift(rate, same)
    limit = (1 - MIN_CUT) * prev_env
    nxt = _next(rate, same)
    # slow, slow ahead, and the next sample slow too (or none): a stall just before a cut paced
    # at the old rate is followed by a fast gap, and the cut starts after it
    cand = (rate < limit) & (fwd < limit) & ~(nxt >= limit)   # NaN compares false
    first = cand.copy()
    first[1:] &= ~(cand[:-1] & same[1:])
    before = np.where(prev_rate >= STALL * prev_env, prev_rate, prev_env)
    return first, before, _after(rate, same)


def cut_kinds(rate: np.ndarray, same: np.ndarray, rate_b: np.ndarray, before: np.ndarray, after: np.ndarray,
              at: np.ndarray) -> tuple:
    """Per cut starting at sample row `at`, where it landed (masks over `at`). A limiter sets the
    gap after a packet when the packet leaves, from its rate then, and no gap is shorter than
    its pacing. Usually the cut came after the packet before the previous one left (that gap was
    the old rate's) and by the time the previous one left (the first slow gap is the new
    rate's): it is timed at the previous packet. Otherwise:
      early: the gap before the previous packet, a message boundary, was slow too: the cut
             landed one packet sooner;
      stall: the first slow gap is far slower than the next (a window stall, a pause): not the
             limiter's, so the cut came at the latest when the packet after it left;
      late:  a stall, or the first slow gap is shorter than the new pacing (`after`, from
             cut_marks) by more than MIN_CUT: it was the old rate's, stretched by the port
             sending something else, so the cut came after the previous packet left and by
             the time the next one did."""
    r, nxt = rate[at], _next(rate, same)[at]
    early = rate_b[at] < (1 - MIN_CUT) * before[at]
    stall = ~early & (r < STALL * nxt)                 # NaN (no next sample) compares false
    late = stall | (~early & (r * (1 - MIN_CUT) > after[at]))
    return early, stall, late


def _after(rate: np.ndarray, same: np.ndarray) -> np.ndarray:
    """The rate right after a cut at each sample: the lower of its sample and the next one (the
    first slow gap may be partly paced at the old rate), leaving out either when it is a stall
    against the other (a limiter recovering at low rates climbs a lot from one gap to the next,
    so the next sample is the only fair reference)."""
    nxt = _next(rate, same)
    low = np.where(rate < STALL * nxt, nxt, np.where(nxt < STALL * rate, rate, np.fmin(rate, nxt)))
    return np.where(np.isfinite(nxt), low, rate)


def _next(values: np.ndarray, same: np.ndarray) -> np.ndarray:
    """Row i: the value of row i+1 of its group (NaN at a group's last row)."""
    out = np.full(len(values), np.nan)
    out[:-1] = np.where(same[1:], values[1:], np.nan)
    return out


def _shift(values: np.ndarray, same: np.ndarray) -> np.ndarray:
    """Row i: the value of row i-1 of its group (NaN at a group's first row)."""
    out = np.empty_like(values, dtype=np.float64)
    out[1:] = values[:-1]
    out[:1] = np.nan
    out[~same] = np.nan
    return out
