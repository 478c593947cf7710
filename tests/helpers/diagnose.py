"""Run the analysis engine and the diagnoser's FactCollector over a capture, return findings."""
from __future__ import annotations

from roceview.analysis import Analyzer
from roceview.diagnose import FactCollector, find
from roceview.packets.read import iter_batches

SEVERE = ("warning", "critical")


def findings_of(path, config=None, link_speed: float = 100.0, chunk: int = 1 << 18) -> list[dict]:
    analyzer, facts = Analyzer(link_speed_gbps=link_speed), FactCollector()
    for batch in iter_batches([str(path)], chunk_packets=chunk, warn=lambda m: None):
        analyzer.feed(batch)
        facts.feed(batch)
    result = analyzer.finish(files=[str(path)])
    return find(result, config, facts=facts.finish())


def kinds(findings, severities=("info", "warning", "critical")) -> set[str]:
    return {f["kind"] for f in findings if f["severity"] in severities}


def show(findings) -> str:
    return "\n".join(f"{f['severity']} {f['kind']}: {f['summary']}" for f in findings)
