"""`roceview analyze` end to end on captures written by the project's own writer."""
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest

from helpers.analysis import (SYN_NAK_SEQ, T0, ack, pfc_frame, req, roce_v2_frame, write_rows_pcap)
from roceview.cli import Environment, main
from roceview.capture.writer import write_pcap, write_pcapng

US = 1000
QPS_HEADER = ("flow,src_ip,dst_ip,dest_qp,peer_qp,transport,first_ts,last_ts,packets,bytes,data_packets,"
              "payload_bytes,acks,naks_seq,naks_rnr,naks_other,gap_events,gap_psns,unrecovered_psns,"
              "retransmitted_packets,retransmitted_bytes,ecn_not_ect,ecn_ce,cnp_packets,rtt_p50_us,"
              "rtt_p99_us,goodput_gbps,connection,cnps_received,cnps_judged,cnps_ignored,cnps_excess,"
              "cnp_reaction_us_p50,rate_cut_pct_p50,recovery_us_p50,ce_without_cnp")


def lossy_rows():
    rows = [req(T0 + i * US, p, ackreq=True, ecn=3 if p == 4 else 2) for i, p in enumerate((0, 1, 3, 4))]
    rows.append(ack(T0 + 5 * US, 2, syndrome=SYN_NAK_SEQ))
    rows += [req(T0 + (6 + i) * US, 2 + i, ackreq=True) for i in range(3)]
    rows.append(ack(T0 + 10 * US, 4))
    rows.append(dict(proto="pfc", ts=T0 + 11 * US, mac="02:00:00:00:00:0a", enable=0x08,
                     quanta=[0, 0, 0, 1000, 0, 0, 0, 0]))
    return rows


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", *argv], Environment(stdin=io.StringIO(), stdout=out, stderr=err))
    # --csv names the files it wrote on stderr (issue 16); the tests here check stderr for the rest
    return code, out.getvalue(), "".join(line for line in err.getvalue().splitlines(True)
                                         if not line.startswith("roceview: wrote "))


@pytest.fixture
def capture(tmp_path):
    path = tmp_path / "lossy.pcap"
    write_rows_pcap(path, lossy_rows())
    return path


def test_csv_files_have_the_contract_columns_and_exact_numbers(capture, tmp_path):
    # RTT: no sample. PSN 0 -> NAK 2 and PSN 1 -> NAK 2 (a NAK 2 acknowledges PSN 1) span the gap
    # at PSN 3 (issue 15: a response after a gap may cover requests whose own ACK was lost);
    # PSNs 3 and 4 were retransmitted before any response covered them (Karn).
    # Goodput: 4 unique payloads of 1024 B in 8 us. PSN 4's CE mark got no CNP: ce_without_cnp 1.
    code, out, err = run([str(capture), "--csv", str(tmp_path / "out")])
    assert (code, err) == (0, "")
    qps = (tmp_path / "out" / "qps.csv").read_text().splitlines()
    assert qps[0] == QPS_HEADER
    assert qps[1] == ("10.0.0.1>10.0.0.2:0x0000d2,10.0.0.1,10.0.0.2,0x0000d2,0x0000c1,RC,1700000000.000000000,"
                      "1700000000.000008000,7,7686,7,7168,0,0,0,0,1,1,0,3,3294,0,1,0,,,4.096000,,0,0,0,0,,,,1")
    assert qps[2].startswith("10.0.0.2>10.0.0.1:0x0000c1,10.0.0.2,10.0.0.1,0x0000c1,0x0000d2,RC,"
                             "1700000000.000005000,1700000000.000010000,2,124,0,0,1,1,0,0,0,0,0,0,0,0,0,0,,,")
    pfc = (tmp_path / "out" / "pfc.csv").read_text().splitlines()
    assert pfc == ["src_mac,priority,pause_frames,resume_frames,pause_quanta,paused_us,longest_pause_us,first_ts,last_ts",
                   "02:00:00:00:00:0a,3,1,0,1000,5.120000,5.120000,1700000000.000011000,1700000000.000011000"]
    import csv

    with open(tmp_path / "out" / "findings.csv", newline="") as fh:
        findings = list(csv.DictReader(fh))
    assert list(findings[0]) == ["severity", "kind", "summary", "flows", "start_ts", "end_ts", "evidence", "advice",
                                "frames", "frame_count", "explains"]
    loss = [f for f in findings if f["kind"] == "network_loss"]
    assert [(f["severity"], f["start_ts"], f["end_ts"]) for f in loss] == [
        ("warning", "1700000000.000002000", "1700000000.000005000")]
    events = (tmp_path / "out" / "events.csv").read_text().splitlines()
    assert events[:3] == ["ts,flow,kind,psn,detail,frame,related_frame,psn_count,first_missing_psn,"
                          "aeth_syndrome,rnr_timer,pfc_priority,pfc_quanta,resend_delay_ns,copy_delay_ns,early_ns,"
                          "sent_beyond,pause_delay_ns",
                          "1700000000.000002000,10.0.0.1>10.0.0.2:0x0000d2,gap,3,1 PSN skipped from 2,3,,1,2,,,,,,,,,",
                          "1700000000.000003000,10.0.0.1>10.0.0.2:0x0000d2,ecn_ce,4,,4,,,,,,,,,,,,"]
    assert [e.split(",")[2] for e in events[4:]] == ["retransmit"] * 3 + ["pfc_pause"]
    timeline = (tmp_path / "out" / "timeline.csv").read_text().splitlines()
    assert timeline[0] == "bucket_start,flow,bytes,gbps,ecn_ce,cnp_packets,retransmitted_packets"
    assert timeline[1] == "1700000000.000000000,10.0.0.1>10.0.0.2:0x0000d2,7686,0.061488,1,0,3"


def test_report_has_summary_findings_queue_pairs_and_pfc_sections(capture):
    code, out, _ = run([str(capture)])
    assert code == 0
    for text in ("Capture", "Findings", "network_loss", "Queue pairs", "PFC / PAUSE", "10.0.0.1>10.0.0.2:0x0000d2"):
        assert text in out


def _variants(tmp_path, rows):
    frames = [pfc_frame(r) if r.get("proto") else roce_v2_frame(r) for r in rows]
    ts = [r["ts"] for r in rows]
    plain = tmp_path / "plain.pcap"
    write_rows_pcap(plain, rows)
    gz = tmp_path / "plain.pcap.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    ng = tmp_path / "plain.pcapng"
    write_pcapng(ng, frames, ts)
    cut = tmp_path / "cut.pcap"
    cut_frames = [f[:90] for f in frames]
    write_pcap(cut, np.frombuffer(b"".join(cut_frames), np.uint8), [len(f) for f in cut_frames], ts,
               wire_lengths=[len(f) for f in frames])
    return [plain, gz, ng, cut]


def test_gzip_pcapng_and_snaplen_truncated_variants_give_identical_qps_csv(tmp_path):
    outputs = []
    for i, path in enumerate(_variants(tmp_path, lossy_rows())):
        code, _, err = run([str(path), "--csv", str(tmp_path / f"o{i}")])
        assert code == 0, err
        outputs.append((tmp_path / f"o{i}" / "qps.csv").read_text())
    assert outputs[1:] == outputs[:1] * 3


def test_json_has_the_same_tables_and_the_summary(capture, tmp_path):
    code, _, _ = run([str(capture), "--json", str(tmp_path / "r.json")])
    doc = json.loads((tmp_path / "r.json").read_text())
    assert code == 0
    assert set(doc) == {"summary", "flows", "pfc", "findings", "events", "timeline", "ops", "op_stats", "read_depth",
                        "connections", "priorities", "cc", "paused_flows", "pfc_timeline"}
    assert doc["summary"]["packets"] == 10
    assert doc["flows"][0]["first_ts"] == "1700000000.000000000"
    assert doc["flows"][0]["dest_qp"] == "0x0000d2"
    assert doc["flows"][1]["rtt_p50_us"] is None


def test_unwritable_csv_place_exits_2_with_one_line_and_writes_nothing(capture, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = run([str(capture), "--csv", str(blocker / "sub")])
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("roceview: error: cannot write CSV files into")
    assert out == ""
    assert blocker.read_text() == "x"


def test_missing_capture_is_bad_input(tmp_path):
    code, out, err = run([str(tmp_path / "nope.pcap")])
    assert code == 2 and err.count("\n") == 1 and out == ""


def test_bad_pmtu_is_bad_input(capture):
    code, _, err = run([str(capture), "--pmtu", "1000"])
    assert code == 2 and "--pmtu" in err


def test_fail_on_exits_3_when_a_finding_of_that_severity_or_worse_exists(capture, monkeypatch):
    import roceview.api

    import roceview.diagnose

    def fake(result, config=None):
        return [dict(severity="warning", kind="packet_loss", summary="loss", flows="f",
                     start_ts=T0, end_ts=T0 + 1, evidence="", advice="")]
    monkeypatch.setattr(roceview.diagnose, "find", fake)
    assert run([str(capture), "--fail-on", "warning"])[0] == 3
    assert run([str(capture), "--fail-on", "critical"])[0] == 0
    assert run([str(capture)])[0] == 0


def test_api_returns_dataframes_with_the_csv_columns(capture):
    import roceview

    res = roceview.analyze(str(capture))
    assert list(res.flows.columns) == QPS_HEADER.split(",")
    assert list(res.findings.columns) == ["severity", "kind", "summary", "flows", "start_ts", "end_ts",
                                          "evidence", "advice", "frames", "frame_count", "explains"]
    assert res.flows["gap_events"].tolist() == [1, 0]
    assert str(res.flows["first_ts"].dtype) == "datetime64[ns, UTC]"
    assert len(res.events) == 7 and len(res.timeline) == 2 and len(res.pfc) == 1
    assert res.packets is None
    assert len(roceview.analyze(str(capture), packets=True).packets) == 10


def test_keep_freed_memory_takes_on_glibc():
    """capture.memory.keep_freed_memory (called by cli.entry) raises glibc's mmap and trim
    thresholds so a chunk's column buffers are reused rather than refaulted: mallopt must
    accept both settings on glibc, and nothing is claimed elsewhere."""
    import platform
    import subprocess
    import sys

    code = "from roceview.capture.memory import keep_freed_memory as k; print(k())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert out.strip() == str(expected)


_PREFAULT_PROBE = r"""
import resource, sys, threading
import numpy as np
from roceview.capture.memory import prefault_heap
done = prefault_heap(64 << 20) if sys.argv[1] == "on" else False
for t in threading.enumerate():
    if t.name == "roceview-prefault":
        t.join()
faults = []
def work():                 # another thread, as the decode threads: 12 arrays of 4 MB, touched
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones(1 << 19) for _ in range(12)]
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
th = threading.Thread(target=work)
th.start(); th.join()
print(done, faults[0])
"""


def _fault_probe(code: str) -> dict:
    """{"on"/"off": (what the probe's call returned, the page faults it counted)}, each in a
    child process (malloc settings are process-wide); glibc only."""
    import platform
    import subprocess
    import sys

    if not (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"):
        pytest.skip("glibc malloc only")
    runs = {}
    for mode in ("on", "off"):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True,
                             check=True).stdout.split()
        runs[mode] = (out[0], int(out[1]))
    return runs


def test_prefault_heap_gives_the_threads_pages_already_faulted_in():
    """analyze faults its heap in on the idle core while numpy imports (capture.memory.
    prefault_heap): arrays allocated afterwards by another thread must reuse those pages
    instead of faulting fresh ones (48 MB: 6 k faults without, measured)."""
    runs = _fault_probe(_PREFAULT_PROBE)
    assert runs["on"][0] == "True" and runs["off"][0] == "False"
    assert runs["off"][1] > 3000, runs                       # the probe does fault when not prefaulted
    assert runs["on"][1] < runs["off"][1] // 10, runs


_TOUCH_PROBE = r"""
import resource, sys
import numpy as np
from roceview.capture.memory import keep_freed_memory, touch_heap
keep_freed_memory()
done = touch_heap(64 << 20) if sys.argv[1] == "on" else False
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
arrays = [np.ones(1 << 19) for _ in range(12)]       # 48 MB on the same thread, touched
print(done, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_touch_heap_leaves_this_threads_next_arrays_faulted_in():
    """The Dask driver faults in its merge's heap while the workers analyze (dask_run.
    _ready_for_merge, capture.memory.touch_heap): arrays it allocates afterwards reuse those
    pages."""
    runs = _fault_probe(_TOUCH_PROBE)
    assert runs["on"][0] == "True" and runs["off"][0] == "False"
    assert runs["off"][1] > 3000, runs
    assert runs["on"][1] < runs["off"][1] // 10, runs


def test_the_gc_is_back_on_for_every_command_and_for_analyze_after_its_first_chunk(tmp_path):
    """cli.entry turns the cyclic GC off for the imports; main() turns it on for commands, and
    analyze (ENABLES_GC) after its first chunk, with the imports frozen. In a child process:
    the GC settings are process-wide."""
    import subprocess
    import sys

    sample = Path(__file__).resolve().parents[2] / "captures" / "clean.pcap"
    code = f"""
import gc, io, contextlib
from roceview import cli
from roceview.commands import analyze, dissect
seen = []
dissect.run = lambda args, env: seen.append(("dissect", gc.isenabled())) or 0
gc.disable(); cli.main(["dissect", {str(sample)!r}])
real = analyze._after_imports
def spy(bar):
    seen.append(("analyze before", gc.isenabled()))
    callback = real(bar)
    def wrapped(n):
        callback(n); seen.append(("analyze after a chunk", gc.isenabled(), gc.get_freeze_count() > 0))
    return wrapped
analyze._after_imports = spy
gc.disable()
with contextlib.redirect_stdout(io.StringIO()):
    cli.main(["analyze", {str(sample)!r}])
print(seen)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str([("dissect", True), ("analyze before", False), ("analyze after a chunk", True, True)])
