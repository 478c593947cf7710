"""A finding record and the final list: dedupe by key, order worst first."""
from __future__ import annotations


def _sha1(data: bytes):
    """hashlib.sha1 without hashlib: importing it loads OpenSSL (_hashlib, ~5-7 ms of every
    run that has a finding); CPython's own _sha1 gives the same digest."""
    try:
        from _sha1 import sha1
    except ImportError:
        from hashlib import sha1
    return sha1(data)


SEVERITIES = ("critical", "warning", "info")
RANK = {"info": 0, "warning": 1, "critical": 2}
COLUMNS = ("severity", "kind", "summary", "flows", "start_ts", "end_ts", "evidence", "advice", "key", "frames",
           "frame_count", "explains")


def finding(severity: str, kind: str, summary: str, flows=(), start_ts: int = 0, end_ts: int = 0,
            evidence=(), advice=(), key: str | None = None) -> dict:
    """One finding. `evidence` and `advice` are lists of sentences (joined with '; ' / ' ').
    The dedupe `key` defaults to kind + flows + evidence: identical evidence is reported once."""
    assert severity in SEVERITIES, severity
    flows = ";".join(sorted(set(flows))) if not isinstance(flows, str) else flows
    evidence = "; ".join(evidence) if not isinstance(evidence, str) else evidence
    advice = " ".join(advice) if not isinstance(advice, str) else advice
    if key is None:
        key = _sha1(f"{kind}|{flows}|{evidence}".encode()).hexdigest()[:16]
    return {"severity": severity, "kind": kind, "summary": summary, "flows": flows,
            "start_ts": int(start_ts), "end_ts": int(end_ts), "evidence": evidence,
            "advice": advice, "key": key}


def finalize(records: list[dict], span: tuple[int, int] | None = None) -> list[dict]:
    """Deduplicated, worst first; start_ts/end_ts kept inside `span` (the capture's first and
    last packet): a rule's window (an incast's 1 ms) may reach past them, nothing was seen there."""
    seen: set[str] = set()
    out = []
    for r in records:
        if r["key"] in seen:
            continue
        seen.add(r["key"])
        if span is not None and span[1] >= span[0]:
            r["start_ts"], r["end_ts"] = (min(max(r[k], span[0]), span[1]) for k in ("start_ts", "end_ts"))
        out.append(r)
    out.sort(key=lambda r: (-RANK[r["severity"]], r["kind"], r["start_ts"], r["flows"]))
    return out


def psn_list(values, limit: int = 5) -> str:
    n = len(values)                  # a list or an array of any length: only `limit` are read
    text = ", ".join(str(int(v)) for v in values[:limit])
    return text + (f" (+{n - limit:,} more)" if n > limit else "")


def given_frames(pairs, shown: int = 10) -> list[dict]:
    """Findings of rules that know their own frames (not events'): each (record, frames) gets
    `frames_given` (the first, the last and `shown` more listed; all counted), the records returned."""
    out = []
    for record, frames in pairs:
        record["frames_given"] = (sorted({frames[0], frames[-1], *frames[:shown]}) if frames else [], len(frames))
        out.append(record)
    return out


def frames_by_key(pairs) -> dict[tuple, list[int]]:
    """Every frame of each (record, frames) by (kind, flows, evidence), as the findings table keeps
    a finding: what `roceview.finding` selects for it (diagnose/evidence_frames.py)."""
    return {(r["kind"], r["flows"], r["evidence"]): frames for r, frames in pairs}
