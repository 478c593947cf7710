"""Review of issue 16 item 3: report wording where the counts are small."""
from __future__ import annotations

import io

from analysis_helpers import T0, write_rows_pcap
from roceview.cli import Environment, main


def _report(path) -> str:
    out = io.StringIO()
    assert main(["analyze", str(path)], Environment(stdin=io.StringIO(), stdout=out, stderr=io.StringIO())) == 0
    return out.getvalue()


def test_no_flows_is_not_ranked_worst_first(tmp_path):
    """A PAUSE-only capture said 'Queue pairs (0 flows, worst first)' over 'no RoCE traffic'."""
    rows = [dict(ts=T0 + i * 1000, proto="pause", quanta=q) for i, q in enumerate((0xFFFF, 0))]
    write_rows_pcap(tmp_path / "p.pcap", rows)
    text = _report(tmp_path / "p.pcap")
    assert "Queue pairs\n  no RoCE traffic" in text, text
    assert "0 flows, worst first" not in text
