"""analyze reports each sender's DCQCN reaction (analysis/cc.py): cc.csv / --json "cc" /
result.cc, one row per CNP received, and qps.csv's DCQCN columns appended after its others; the
same rows as the collector fed the capture alone, whatever the chunking."""
from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

import roceview
from helpers.cli import run
from roceview.analysis.cc import CnpReactions
from roceview.analysis.cc_match import CC_COLUMNS, FLOW_CC_COLUMNS
from roceview.analysis.tables import FLOW_COLUMNS
from roceview.generate import generate, write_capture
from roceview.packets.read import iter_batches

QPS_BEFORE = ("flow", "src_ip", "dst_ip", "dest_qp", "peer_qp", "transport", "first_ts", "last_ts", "packets", "bytes",
              "data_packets", "payload_bytes", "acks", "naks_seq", "naks_rnr", "naks_other", "gap_events", "gap_psns",
              "unrecovered_psns", "retransmitted_packets", "retransmitted_bytes", "ecn_not_ect", "ecn_ce",
              "cnp_packets", "rtt_p50_us", "rtt_p99_us", "goodput_gbps", "connection")


@pytest.fixture(scope="module")
def ignored(tmp_path_factory):
    """dcqcn-ignored (a deaf sender 10.0.0.1, a reacting one 10.0.0.2) long enough that the deaf
    one sends past the judging window (as tests/analysis/test_cc.py makes it)."""
    path = tmp_path_factory.mktemp("cc") / "dcqcn-ignored.pcap"
    write_capture(generate("dcqcn-ignored", seed=0, scale=3), path)
    return path


def _alone(path):
    """The collector fed the capture's batches by itself (its own flow index, no pairing)."""
    cc = CnpReactions()
    for batch in iter_batches([str(path)]):
        cc.feed(batch)
    cc.finish()
    return cc.table()


def _rows(table) -> list[tuple]:
    """The rows as CSV text (NaN = empty), comparable with ==."""
    return [tuple(r) for r in table.text_rows()]


def test_qps_columns_are_appended_after_the_existing_ones():
    assert FLOW_COLUMNS[:len(QPS_BEFORE)] == QPS_BEFORE
    assert FLOW_COLUMNS[len(QPS_BEFORE):] == FLOW_CC_COLUMNS


def test_cc_rows_are_the_collectors_fed_alone(ignored):
    result = roceview.analyze(ignored, diagnose=False)
    assert result.cc_table.columns == CC_COLUMNS
    alone = _alone(ignored)
    assert len(alone) >= 20 and _rows(result.cc_table) == _rows(alone)
    ign = result.cc_table.data["ignored"]
    flows = result.cc_table.data["flow"]
    deaf = [i for i, f in zip(ign, flows) if f.startswith("10.0.0.1>")]
    heard = [i for i, f in zip(ign, flows) if f.startswith("10.0.0.2>")]
    assert deaf.count("true") >= 10 and "false" not in deaf and heard.count("false") >= 10
    frame = result.cc.set_index("cnp_frame")
    assert len(frame) == len(alone) and frame["flow"].str.len().min() > 0


def test_qps_columns_agree_with_the_cc_rows(ignored):
    result = roceview.analyze(ignored, diagnose=False)
    cc, flows = result.cc_table.data, result.flows_table.data
    checked = 0
    for i, name in enumerate(flows["flow"]):
        mine = np.array([f == name for f in cc["flow"]], dtype=bool)
        ign = np.array(cc["ignored"], dtype=object)[mine]
        assert flows["cnps_ignored"][i] == int((ign == "true").sum()), name
        assert flows["cnps_judged"][i] == int(np.isin(ign, ("true", "false")).sum()), name
        assert flows["cnps_received"][i] >= int(mine.sum()), name
        assert flows["cnps_excess"][i] == int((cc["spacing_us"][mine] < 4).sum()), name
        for col, src in (("cnp_reaction_us_p50", "reaction_us"), ("rate_cut_pct_p50", "cut_pct"),
                         ("recovery_us_p50", "recovery_us")):
            v = np.sort(cc[src][mine][np.isfinite(cc[src][mine])])
            want = v[math.ceil(len(v) / 2) - 1] if len(v) else np.nan
            np.testing.assert_equal(flows[col][i], want, err_msg=f"{name} {col}")
        checked += bool(mine.any())
    assert checked == 2                       # both senders, each under its own data flow
    assert sum(flows["cnps_received"]) == int(sum(flows["cnp_packets"]))


def test_without_cnps_cc_csv_is_its_header_and_the_qps_columns_zero_or_blank(tmp_path):
    code, _, err = run("analyze", "captures/network-loss.pcap", "--csv", tmp_path, "--json", tmp_path / "r.json")
    assert code == 0, err
    assert (tmp_path / "cc.csv").read_text() == ",".join(CC_COLUMNS) + "\n"
    rows = list(csv.DictReader(io.StringIO((tmp_path / "qps.csv").read_text())))
    assert rows and list(rows[0])[-len(FLOW_CC_COLUMNS):] == list(FLOW_CC_COLUMNS)
    for row in rows:
        assert [row[c] for c in FLOW_CC_COLUMNS] == ["0", "0", "0", "0", "", "", "", "0"]
    doc = json.loads((tmp_path / "r.json").read_text())
    keys = list(doc)
    assert doc["cc"] == [] and keys.index("cc") == keys.index("priorities") + 1      # tables added after it


def test_csv_and_json_carry_the_cc_rows(ignored, tmp_path):
    code, _, err = run("analyze", ignored, "--csv", tmp_path, "--json", tmp_path / "r.json")
    assert code == 0, err
    result = roceview.analyze(ignored, diagnose=False)
    text = list(csv.reader(io.StringIO((tmp_path / "cc.csv").read_text())))
    assert tuple(text[0]) == CC_COLUMNS and [tuple(r) for r in text[1:]] == _rows(result.cc_table)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["cc"] == result.cc_table.records()
    assert doc["flows"][0]["cnps_received"] == int(result.flows_table.data["cnps_received"][0])


@pytest.mark.parametrize("command", ["analyze", "live"])
def test_help_names_cc_csv(command, capsys):
    code, out, _ = run(command, "--help")
    assert code == 0 and "cc.csv" in out + capsys.readouterr().out


@pytest.mark.parametrize("size", [7, 100])
def test_cc_rows_and_qps_columns_do_not_depend_on_the_chunking(ignored, size):
    whole = roceview.analyze(ignored, diagnose=False)
    part = roceview.analyze(ignored, diagnose=False, chunk_packets=size)
    assert _rows(part.cc_table) == _rows(whole.cc_table)
    assert _rows(part.flows_table) == _rows(whole.flows_table)


def test_random_chunk_sizes_give_the_same_cc_rows_and_qps_columns(ignored):
    """Seeded: chunks of 1 to 400 rows drawn anew for each chunk (the reader's frame numbers
    kept); ROCEVIEW_FUZZ_EXAMPLES runs more (the default keeps CI short)."""
    import os
    import random

    from roceview.analysis import Analyzer

    rng = random.Random(33)
    whole = roceview.analyze(ignored, diagnose=False)
    for _ in range(int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "2"))):
        an = Analyzer()
        for batch in iter_batches([str(ignored)]):
            i = 0
            while i < batch.n:
                size = rng.randint(1, 400)
                an.feed(batch.select(np.arange(i, min(batch.n, i + size))))
                i += size
        part = an.finish()
        assert _rows(part.cc_table) == _rows(whole.cc_table)
        assert _rows(part.flows_table) == _rows(whole.flows_table)
