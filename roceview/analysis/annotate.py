"""The packets table with the per-packet analysis columns (flags, missing_psns, rel_frame,
rtt_ns: docs/columns.md), written by the same streaming Analyzer as `analyze`: for
`roceview.read_packets(analysis=True)`, `dissect` and the TUI."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

from roceview.analysis.packet_flags import ANALYSIS_COLUMNS

if TYPE_CHECKING:
    from roceview.packets.batch import Batch


def analyzed(batches: Iterable[Batch], pmtu: int | None = None) -> Iterator[Batch]:
    """The batches with the per-packet analysis columns (analysis/packet_flags.py), in order."""
    return (b for _, b in analyzed_pairs(((None, b) for b in batches), pmtu))


def analyzed_pairs(pairs, pmtu: int | None = None):
    """(chunk, batch) pairs with the analysis columns written onto each batch, in order. The
    analysis may hold batches back until it knows a path MTU and analyze them together: their
    columns are cut back to each batch. Each packet's flags depend only on the packets before
    it; empty batches are dropped."""
    from collections import deque

    from roceview.analysis.analyzer import Analyzer

    an, queue = Analyzer(pmtu=pmtu, packet_flags=True), deque()

    def ready():
        for done in an.take_analyzed():
            at = 0
            while at < done.n:
                chunk, b = queue.popleft()
                if b is not done:
                    for c in ANALYSIS_COLUMNS:
                        b.cols[c] = done.cols[c][at:at + b.n]
                        if c in done.valid:
                            b.valid[c] = done.valid[c][at:at + b.n]
                at += b.n
                yield chunk, b

    for chunk, batch in pairs:
        if batch.n:
            queue.append((chunk, batch))
            an.feed(batch)
            yield from ready()
    an.flush()
    yield from ready()
