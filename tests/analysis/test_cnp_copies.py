"""CNPs without an IPv4 identification (0, IPv6, RoCEv1; roceview/analysis/copies.py): genuine
CNPs, however close, are never taken for copies, also when the sender numbers its other
datagrams and when a mirror duplicates the frames around them. A duplicating mirror's copy of
such a CNP is counted as a CNP of its own (strict xfails): nothing on the wire tells it from a
genuine CNP sent as soon after, and a rule that guessed by timing lost genuine CNPs."""
from __future__ import annotations

import os
import random

import pytest

from helpers.analysis import A, B, CNP, T0, ack, analyze_rows, flow_id, flow_row, req
from roceview.diagnose import find, load_config

US = 1000
A6, B6 = "fd00::1", "fd00::2"
STYLES = ("numbered data, CNPs 0", "all 0", "IPv6")


def addresses(style: str) -> tuple[str, str]:
    return (A6, B6) if style == "IPv6" else (A, B)


def identified(rows, style: str, start: int = 1):
    """The rows as `style` sends them: a per-host counter on everything but CNPs (which carry 0),
    0 on every datagram, or IPv6 (no identification at all)."""
    if style == "IPv6":
        return rows
    n, out = {}, []
    for r in rows:
        n[r["src"]] = n.get(r["src"], start + 1000 * len(n)) + 1
        numbered = style.startswith("numbered") and r["opcode"] != CNP
        out.append(dict(r, ip_id=n[r["src"]] if numbered else 0))
    return out


def cnp(ts, src=B, dst=A, qp=0xC1, **kw) -> dict:
    """A17.9.2: BECN set, PSN 0, to the data sender's QP."""
    return dict(ts=ts, psn=0, opcode=CNP, src=src, dst=dst, qp=qp, payload=0, **kw)


def traffic(style: str, cnp_times, data_us: int = 100, src=None, dst=None) -> list:
    """WRITEs from `src` every microsecond, CE-marked, an ACK for every fourth, and CNPs back at
    `cnp_times` (ns after T0)."""
    a, b = addresses(style) if src is None else (src, dst)
    rows = [req(T0 + i * US, 100 + i, src=a, dst=b, ecn=3, ackreq=i % 4 == 3) for i in range(data_us)]
    rows += [ack(T0 + i * US + 600, 100 + i, src=b, dst=a) for i in range(3, data_us, 4)]
    rows += [cnp(T0 + t, src=b, dst=a) for t in cnp_times]
    return identified(sorted(rows, key=lambda r: r["ts"]), style)


def mirrored(rows, data_ns: int = 88, cnp_ns: int = 7) -> list:
    """Every row again, as two mirror sessions clock replicas out back to back: a 1 KiB
    frame's copy one serialisation time later, a CNP's sooner."""
    copies = [dict(r, ts=r["ts"] + (cnp_ns if r["opcode"] == CNP else data_ns)) for r in rows]
    return sorted(rows + copies, key=lambda r: r["ts"])


def cnps_counted(result, style: str) -> tuple[int, int, int]:
    """(cc.csv rows, qps.csv cnps_received, cnps_excess) of the sender's QP."""
    a, b = addresses(style)
    row = flow_row(result, flow_id(a, b, 0xD2))
    return len(result.cc_table.data["flow"]), int(row["cnps_received"]), int(row["cnps_excess"])


def excess_findings(result) -> list:
    return [f for f in find(result, load_config(min_time_between_cnps_us=4.0)) if f["kind"] == "cnp_excess"]


COUNTED_TWICE = pytest.mark.xfail(strict=True, reason="a mirror's copy of a CNP without identification "
                                   "is a CNP of its own (copies.py)")


@COUNTED_TWICE
@pytest.mark.parametrize("style", STYLES)
def test_a_duplicating_mirror_counts_each_cnp_without_identification_once(style):
    times = [10 * US + 5 * US * k for k in range(15)]           # 5 us apart: mlx5's 4 us respected
    result = analyze_rows(mirrored(traffic(style, times)))
    assert cnps_counted(result, style) == (15, 15, 0)
    assert excess_findings(result) == []


@pytest.mark.parametrize("style", STYLES)
def test_genuine_cnps_1_us_apart_without_duplication_are_all_kept(style):
    # upstream mlx5's np_min_time_between_cnps is 0: a CNP per CE-marked packet
    times = [10 * US + US * k for k in range(8)]
    result = analyze_rows(traffic(style, times))
    assert cnps_counted(result, style)[:2] == (8, 8)


def test_duplication_between_two_other_hosts_does_not_merge_a_pairs_genuine_cnps():
    c, d = "10.0.0.3", "10.0.0.4"
    duplicated = mirrored(traffic("all 0", [], src=c, dst=d))
    rows = sorted(duplicated + traffic("all 0", [10 * US + 500 * k for k in range(8)]), key=lambda r: r["ts"])
    assert cnps_counted(analyze_rows(rows), "all 0")[:2] == (8, 8)


@pytest.mark.parametrize("style", STYLES)
def test_a_mirror_that_copies_the_data_but_not_the_cnps_loses_no_cnp(style):
    # mirror sessions on port A's receive side and port B's both sides: the data A -> B is
    # seen twice, the CNPs B -> A once; so is a second capture file of the data alone
    rows = traffic(style, [10 * US + 500 * k for k in range(12)])
    cnps = [r for r in rows if r["opcode"] == CNP]
    rows = sorted(mirrored([r for r in rows if r["opcode"] != CNP], data_ns=1500) + cnps, key=lambda r: r["ts"])
    assert cnps_counted(analyze_rows(rows), style)[:2] == (12, 12)


@COUNTED_TWICE
def test_genuine_cnps_closer_than_the_mirrors_copy_offset_are_all_counted():
    # the mirror's copies 900 ns later (data) and 600 ns (CNPs); the NP sends CNPs 300 ns apart:
    # copies and genuine CNPs interleave, and the count is still the NP's
    times = [10 * US + 300 * k for k in range(6)] + [40 * US + 300 * k for k in range(3)]
    result = analyze_rows(mirrored(traffic("all 0", times), data_ns=900, cnp_ns=600))
    assert cnps_counted(result, "all 0")[:2] == (9, 9)


def random_mirrored(seed: int) -> tuple[list, int]:
    """A host pair's CE-marked WRITEs and CNPs, both copied by a duplicating mirror (data copies
    up to 2 us later, each CNP's at most as late), the CNPs at random spacings from 0 up; some
    seeds without duplication. Returns (rows, genuine CNPs)."""
    rnd = random.Random(seed)
    style = rnd.choice(STYLES)
    t, times = 10 * US, []
    for _ in range(rnd.randint(1, 30)):
        t += rnd.choice([0, 50, 300, 1000, 4000, 20 * US, 300 * US, 1500 * US])
        times.append(t)
    rows = traffic(style, times, data_us=rnd.randint(5, 30))
    if rnd.random() < 0.8:
        data_ns = rnd.randint(5, 2000)
        rows = mirrored(rows, data_ns, rnd.randint(0, data_ns))
    return rows, len(times)


def counted_right(rows, genuine: int, style: str) -> bool:
    """Every genuine CNP counted; no more unless the mirror copied them (then each twice)."""
    got = cnps_counted(analyze_rows(rows), style)[1]
    copied = sum(r["opcode"] == CNP for r in rows) - genuine
    return got == genuine + copied


@pytest.mark.parametrize("seed", range(16))
def test_a_duplicated_cnp_stream_loses_no_genuine_cnp_in_any_chunking(seed):
    rows, genuine = random_mirrored(seed)
    whole = analyze_rows(rows)
    style = "IPv6" if ":" in rows[0]["src"] else "all 0"
    assert counted_right(rows, genuine, style)
    for chunk in (5, 16):
        assert cnps_counted(analyze_rows(rows, chunk=chunk), style) == cnps_counted(whole, style), chunk


@pytest.mark.skipif(not os.environ.get("ROCEVIEW_FUZZ_EXAMPLES"), reason="a longer run: ROCEVIEW_FUZZ_EXAMPLES=n")
def test_a_duplicated_cnp_stream_loses_no_genuine_cnp_longer_run():
    n = int(os.environ["ROCEVIEW_FUZZ_EXAMPLES"])
    failed = []
    for seed in range(1000, 1000 + n):
        rows, genuine = random_mirrored(seed)
        style = "IPv6" if ":" in rows[0]["src"] else "all 0"
        if not counted_right(rows, genuine, style):
            failed.append(seed)
    print(f"{n} tries, {len(failed)} failures")
    assert not failed


def test_a_numbering_senders_datagram_with_identification_0_is_still_known_as_a_copy():
    """A numbering host passes identification 0 once every 65,536 datagrams: captured at two
    points (the far copy 10 us later, past the 2 us any data copy gets), its copy is still a
    copy, not a resend (only a CNP with 0 is taken as not numbered)."""
    from helpers.analysis import ACKNOWLEDGE, SYN_ACK, WRITE_ONLY

    rows, t, ids = [], T0, [65530, 65533]
    for psn in range(20):
        for off in (0, 10_000):
            rows.append(dict(ts=t + off, psn=psn, opcode=WRITE_ONLY, src=A, dst=B, qp=0xD2, payload=1024, ip_id=ids[0]))
            rows.append(dict(ts=t + 3_000 + off, psn=psn, opcode=ACKNOWLEDGE, src=B, dst=A, qp=0xC1, syndrome=SYN_ACK,
                             ip_id=ids[1]))
        ids = [(i + 1) & 0xFFFF for i in ids]
        t += 20_000
    kinds = analyze_rows(sorted(rows, key=lambda r: r["ts"])).events_table.text_column("kind")
    resent = [k for k in kinds if k in ("retransmit", "timeout_retransmit")]
    assert len(resent) <= 2, resent          # PSN 0's copy, before the numbering is learnt (as before)
