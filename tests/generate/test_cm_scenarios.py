"""The RDMA CM fault scenarios make their faults on the wire: cm-reject (a REQ answered by a REJ,
consumer reject and no listener), cm-retry (a REQ the server never saw resent after the REQ's
remote CM response timeout with the same transaction id, an MRA then a late REP, a REQ never
answered), cm-slow-setup (a REP long after its REQ). Read back from the capture with roceview's
own CM decode, checked against the model's truth counters."""
from __future__ import annotations

import hashlib
import os

import pytest

import roceview
from dissectors import cm
from roceview.generate import SCENARIOS, generate, write_capture
from roceview.generate.cm import timeout_ps

COLUMNS = ["frame", "ts_ns", "src_ip", "dst_ip", "dest_qp", "mad_attr_id", "mad_tid", "cm_local_comm_id",
           "cm_remote_comm_id", "cm_local_qpn", "cm_reject_reason", "cm_mraed_message", "cm_service_id"]
REQ, MRA, REJ, REP, RTU = (cm.ATTR[m] for m in ("REQ", "MRA", "REJ", "REP", "RTU"))


def mads(tmp_path, name: str, seed: int = 0, mirror: str | None = None):
    cap = generate(name, seed=seed, mirror=mirror)
    path = tmp_path / f"{name}-{seed}.pcap"
    write_capture(cap, path)
    frame = roceview.read_packets(path, columns=COLUMNS)
    return cap, frame[frame["mad_attr_id"].notna()], roceview.read_packets(path, columns=COLUMNS)


def of(frame, attr: int):
    return frame[frame["mad_attr_id"] == attr]


def test_the_cm_scenarios_are_registered_with_their_findings():
    assert SCENARIOS["cm-reject"].expected == ("cm_reject",)
    assert SCENARIOS["cm-retry"].expected == ("cm_retry",)
    assert SCENARIOS["cm-slow-setup"].expected == ("cm_slow_setup",)
    for name in ("clean", "pmtu-4096-cm", "read-depth-limit"):
        assert {"cm_reject", "cm_retry", "cm_slow_setup"} <= set(SCENARIOS[name].forbidden)


@pytest.mark.parametrize("mirror", ["sender", "receiver"])
def test_cm_reject_answers_two_reqs_with_rej_and_the_third_is_established(tmp_path, mirror):
    cap, m, every = mads(tmp_path, "cm-reject", mirror=mirror)
    rejs = of(m, REJ)
    assert sorted(rejs["cm_reject_reason"].tolist()) == [8, 28] and cap.truth.counters["cm_rej_sent"] == 2
    reqs = of(m, REQ)
    assert len(reqs) == 3 and len(of(m, REP)) == len(of(m, RTU)) == 1
    for _, rej in rejs.iterrows():                 # each REJ names its REQ's comm id, sent by the server
        (req,) = reqs[reqs["cm_local_comm_id"] == rej["cm_remote_comm_id"]].itertuples()
        assert rej["src_ip"] == req.dst_ip and rej["frame"] > req.frame and rej["cm_local_comm_id"] == 0
    refused = set(reqs["cm_local_qpn"]) - set(of(m, RTU).pipe(lambda r: reqs[reqs["cm_local_comm_id"].isin(
        r["cm_local_comm_id"])])["cm_local_qpn"])
    served = {q["requester_qpn"]: q["responder_qpn"] for q in cap.truth.qps}
    data = every[every["dest_qp"] != 1]
    assert len(refused) == 2 and not set(data["dest_qp"]) & {served[int(q)] for q in refused}
    assert len(data) > 20                           # the established connection carries its traffic
    no_listener = rejs[rejs["cm_reject_reason"] == 8]
    (sid,) = reqs[reqs["cm_local_comm_id"].isin(no_listener["cm_remote_comm_id"])]["cm_service_id"]
    assert cm.service_text(int(sid)) == "TCP port 5000"


@pytest.mark.parametrize("mirror", ["sender", "receiver"])
def test_cm_retry_resends_the_req_after_its_timeout_with_its_transaction_id(tmp_path, mirror):
    cap, m, _ = mads(tmp_path, "cm-retry", mirror=mirror)
    reqs = of(m, REQ)
    by_comm = reqs.groupby("cm_local_comm_id")
    counts = sorted(len(g) for _, g in by_comm)
    assert counts == [1, 2, 3]                      # answered at once (MRA), resent once, never answered
    wait = timeout_ps(8) // 1000
    for _, g in by_comm:
        assert g["mad_tid"].nunique() == 1          # a resent MAD keeps its transaction id (IBTA 13.4.6.4)
        # the timer runs from the post; the first REQs queue behind each other on the link (ns)
        assert (g["ts_ns"].diff().dropna() >= wait - 1000).all()
    (mra,) = of(m, MRA).itertuples()
    assert mra.cm_mraed_message == 0                # it MRAs the REQ, and the REP follows
    (rep_after,) = of(m, REP)[of(m, REP)["cm_remote_comm_id"] == mra.cm_remote_comm_id].itertuples()
    assert rep_after.ts_ns - mra.ts_ns > wait
    unanswered = [c for c, g in by_comm if len(g) == 3]
    assert not (of(m, REP)["cm_remote_comm_id"].isin(unanswered)).any()
    assert cap.truth.counters["cm_req_resent"] == 3 and cap.truth.counters["cm_mra_sent"] == 1
    assert cap.truth.counters["cm_req_given_up"] == 1 and len(of(m, RTU)) == 2


def test_cm_slow_setup_answers_one_req_150_ms_late_without_a_resend(tmp_path):
    cap, m, _ = mads(tmp_path, "cm-slow-setup")
    reqs, reps = of(m, REQ), of(m, REP)
    assert len(reqs) == len(reps) == len(of(m, RTU)) == 2 and cap.truth.counters["cm_req_resent"] == 0
    late = [rep.ts_ns - reqs[reqs["cm_local_comm_id"] == rep.cm_remote_comm_id]["ts_ns"].iloc[0]
            for rep in reps.itertuples()]
    assert sorted(x > 150_000_000 for x in late) == [False, True]


@pytest.mark.parametrize("name,digest", [("pmtu-4096-cm", "99d29c83bba3251e"), ("read-depth-limit", "9a0e3231ae62a200")])
def test_the_healthy_cm_scenarios_are_unchanged(name, digest):
    """The scenarios set up by RDMA CM before its faults were modelled: the same frames and
    timestamps, byte for byte (seed 0), and no resend."""
    cap = generate(name, seed=0)
    assert hashlib.sha256(cap.frames.tobytes() + cap.ts_ns.tobytes()).hexdigest()[:16] == digest
    assert not cap.truth.counters["cm_req_resent"]


SEEDS = range(int(os.environ.get("ROCEVIEW_CM_SEEDS", "2")))
TRUTH = {"cm-reject": {"cm_rej_sent": 2}, "cm-retry": {"cm_req_resent": 3, "cm_mra_sent": 1, "cm_req_given_up": 1},
         "cm-slow-setup": {"cm_req_resent": 0}}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(TRUTH))
def test_each_cm_scenario_gives_its_finding_and_its_truth_on_every_seed(tmp_path, name, seed):
    """Over seeds (ROCEVIEW_CM_SEEDS, default 2; a longer local run: 30): the model's counters, and
    among the CM kinds exactly the scenario's own."""
    from roceview.diagnose import find

    cap = generate(name, seed=seed)
    for counter, n in TRUTH[name].items():
        assert cap.truth.counters[counter] == n, counter
    path = tmp_path / f"{name}.pcap"
    write_capture(cap, path)
    found = {f["kind"] for f in find(roceview.analyze(path))} & {"cm_reject", "cm_retry", "cm_slow_setup"}
    assert found == set(SCENARIOS[name].expected)
