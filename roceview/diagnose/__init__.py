"""The diagnoser: findings (severity, kind, summary, evidence, advice) from an AnalysisResult.

    from roceview.diagnose import diagnose, FactCollector, load_config
    frame = diagnose(result)                       # pandas DataFrame, FINDINGS columns + `key`
    records = find(result, load_config("x.toml"))  # the same as a list of dicts (no pandas)

Packet-level facts (priorities, ECN codepoints, MACs, ICRC, truncation, READ response breaks)
come from `result.facts` (a FactCollector fed the same batches as the Analyzer), else by reading
the capture files again (config `reread_capture`; not possible for stdin). Kinds and
their rules: docs/findings.md. No rich/textual imports here.
"""
from __future__ import annotations

from roceview.diagnose.capture import capture_findings
from roceview.diagnose.cc import cc_findings
from roceview.diagnose.cm import cm_findings
from roceview.diagnose.config import DEFAULTS, Config, load_config
from roceview.diagnose.context import Context
from roceview.diagnose.ecn import ecn_findings
from roceview.diagnose.facts import CaptureFacts, FactCollector, facts_from_files
from roceview.diagnose.evidence_frames import attach_frames
from roceview.diagnose.explain import fill_advice, order_by_cause
from roceview.diagnose.finding import COLUMNS, finalize
from roceview.diagnose.loss import loss_findings
from roceview.diagnose.pfc import pfc_findings
from roceview.diagnose.pfc_order import pfc_order_findings
from roceview.diagnose.pfc_timeline import pfc_timeline
from roceview.diagnose.pfc_victims import pfc_victim_findings
from roceview.diagnose.pfc_violation import pfc_violation_findings
from roceview.diagnose.priority import priority_findings
from roceview.diagnose.read_depth import read_depth_findings

RULES = (loss_findings, pfc_findings, pfc_order_findings, pfc_violation_findings, pfc_victim_findings,
         priority_findings, ecn_findings, capture_findings)

__all__ = ["diagnose", "find", "FactCollector", "CaptureFacts", "Config", "DEFAULTS", "load_config",
           "COLUMNS", "facts_for"]


def facts_for(result, config: Config = DEFAULTS) -> CaptureFacts | None:
    facts = getattr(result, "facts", None)
    if facts is None and config.reread_capture:
        files = result.summary.get("files") or []
        facts = facts_from_files(files) if files else None
    return facts


def find(result, config: Config | None = None, facts: CaptureFacts | None = None) -> list[dict]:
    """Findings as dicts (COLUMNS; start_ts/end_ts int ns), worst first, deduplicated by `key`."""
    config = config or DEFAULTS
    ctx = Context(result, config, facts if facts is not None else facts_for(result, config))
    records = []
    for rule in RULES:
        records += rule(ctx)
    records += read_depth_findings(ctx, result)       # reads the result's READ depth and CM connections
    records += cm_findings(ctx, result)               # the CM connections' rejects, resends, slow set-ups
    records += cc_findings(ctx, result)               # the senders' reaction to CNPs (cc.csv)
    result.pfc_timeline_table = pfc_timeline(ctx)     # the series the TUI's PFC timeline and the JSON show
    records = finalize(records, (ctx.start_ns, ctx.end_ns) if result.summary.get("first_ts") else None)
    attach_frames(records, ctx)
    fill_advice(records, ctx)
    return order_by_cause(records)


def diagnose(result, config: Config | None = None, facts: CaptureFacts | None = None):
    """Findings as a pandas DataFrame with COLUMNS (start_ts/end_ts int64 ns)."""
    import pandas as pd

    records = find(result, config, facts)
    frame = pd.DataFrame(records, columns=list(COLUMNS))
    for ts in ("start_ts", "end_ts"):
        frame[ts] = frame[ts].astype("int64")
    return frame

