"""Per-packet analysis flags: the packets table's flags / missing_psns /
rel_frame / rtt_ns columns are the events, one definition, on every packet."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import roceview
from roceview.analysis import Analyzer
from roceview.analysis.packet_flags import KIND_FLAG
from roceview.packets.flags import Flag
from roceview import iter_packets, read_packets
from roceview.analysis.annotate import analyzed
from roceview.packets.read import iter_batches

_EVENT_BIT = {kind: int(bit & ~Flag.RETRANSMISSION) if kind == "timeout_retransmit" else int(bit)
              for kind, bit in KIND_FLAG.items()}


def _frames(df, bit: int) -> set:
    f = df["flags"].to_numpy(np.int64)
    return set(df["frame"].to_numpy(np.int64)[(f & bit) != 0].tolist())


def _nullable(series) -> np.ndarray:
    return series.astype("Float64").fillna(-1).to_numpy(np.int64)


def _check_against_events(path, chunks: bool = True) -> None:
    packets = read_packets(path, analysis=True)
    result = roceview.analyze(path, diagnose=False)
    ev = result.events
    kinds, frames = ev["kind"].astype(str).to_numpy(), ev["frame"].to_numpy(np.int64)
    for kind, bit in _EVENT_BIT.items():
        if kind in ("nak_seq", "nak_other"):
            want = set(frames[np.isin(kinds, ["nak_seq", "nak_other"])].tolist())
        elif kind == "retransmit":
            want = set(frames[np.isin(kinds, ["retransmit", "timeout_retransmit"])].tolist())
        else:
            want = set(frames[kinds == kind].tolist())
        assert _frames(packets, bit) == want, kind
    by_frame = packets.set_index("frame")
    gaps = ev[ev["kind"] == "gap"]
    if len(gaps):
        assert by_frame.loc[gaps["frame"].to_numpy(), "missing_psns"].astype(int).tolist() == gaps["psn_count"].astype(int).tolist()
    related = ev[ev["related_frame"].notna() & ev["kind"].isin(["retransmit", "timeout_retransmit", "nak_seq", "cnp"])]
    if len(related):
        assert (_nullable(by_frame.loc[related["frame"].to_numpy(), "rel_frame"])
                == related["related_frame"].astype(int).to_numpy()).all()
    bad_icrc = set(packets["frame"][packets["icrc_ok"].fillna(True) == False].tolist())  # noqa: E712
    assert _frames(packets, int(Flag.ICRC_BAD)) == bad_icrc
    assert _frames(packets, int(Flag.TRUNCATED)) == set(packets["frame"][packets["truncated"]].tolist())
    # analyze(packets=True) gives the same columns
    same = roceview.analyze(path, packets=True, diagnose=False).packets
    for col in ("flags", "missing_psns", "rel_frame", "rtt_ns"):
        assert (_nullable(same[col]) == _nullable(packets[col])).all(), col
    if chunks:
        _check_small_chunks(path, packets)


def _check_small_chunks(path, packets) -> None:
    """Small chunks give the same flags, but for what needs the QP pair (pairing.py), which a
    small chunk may not know yet: RTT samples (as rtt_p50_us in qps.csv), a NAK's or CNP's related frame."""
    chunked = pd.concat(list(iter_packets(path, analysis=True, chunk_packets=7)), ignore_index=True)
    flags, flags_c = packets["flags"].to_numpy(np.int64), chunked["flags"].to_numpy(np.int64)
    other = ~np.int64(Flag.RTT_ACK)
    assert ((flags_c & other) == (flags & other)).all()
    assert (_nullable(chunked["missing_psns"]) == _nullable(packets["missing_psns"])).all()
    resent = (flags & int(Flag.RETRANSMISSION)) != 0
    assert (_nullable(chunked["rel_frame"])[resent] == _nullable(packets["rel_frame"])[resent]).all()


def test_flags_equal_the_events_on_samples(sample_capture):
    _check_against_events(sample_capture)


def test_flags_equal_the_events_on_real_captures(real_capture):
    _check_against_events(real_capture)


def test_flags_are_not_capped_like_the_event_log(repo_root):
    path = str(repo_root / "captures/pfc-storm.pcap")
    an = Analyzer(packet_flags=True)
    an.events.max_per_kind = 3
    out = []
    for batch in iter_batches(path):
        an.feed(batch)
        out += an.take_analyzed()
    an.flush()
    out += an.take_analyzed()
    flags = np.concatenate([b.cols["flags"] for b in out])
    assert an.events.kept["pfc_pause"] == 3
    assert np.count_nonzero(flags & Flag.PFC_PAUSE) == an.events.count("pfc_pause") > 3


def test_events_carry_frame_and_structured_columns(repo_root):
    ev = roceview.analyze(str(repo_root / "captures/pfc-storm.pcap"), diagnose=False).events
    pause = ev[ev["kind"] == "pfc_pause"].iloc[0]
    assert (pause["frame"], pause["pfc_priority"], pause["pfc_quanta"]) == (49, "3", 65535)
    assert pause["detail"] == "priority 3 quanta 65535"
    rnr = roceview.analyze(str(repo_root / "captures/rnr.pcap"), diagnose=False).events
    first = rnr[rnr["kind"] == "nak_rnr"].iloc[0]
    assert (first["frame"], first["rnr_timer"], first["aeth_syndrome"]) == (25, 4, 0x24)


def test_no_analysis_columns_unless_asked(repo_root):
    df = read_packets(str(repo_root / "captures/clean.pcap"))
    assert "flags" not in df.columns
    assert all("flags" not in b.cols for b in iter_batches(str(repo_root / "captures/clean.pcap")))
    assert sum(b.n for b in analyzed(iter_batches(str(repo_root / "captures/clean.pcap")))) == len(df)


@pytest.fixture
def repo_root():
    from pathlib import Path

    return Path(__file__).resolve().parents[2]
