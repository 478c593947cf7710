"""A live source read on a thread of its own, so the loader hears of silence.

The loader posts a snapshot only after feeding a batch (at most every SNAPSHOT_EVERY s): the
last batch of a burst, and the findings (every FINDINGS_EVERY s), stayed unshown until the next
packet arrived, on a quiet interface never (pfc_storm missing from the live overview of
pfc-storm.pcap sent over a veth, while `analyze` of the same packets has it). Reading here, the
loader gets None after each `idle` seconds without a batch, and brings its snapshot up to date.
"""
from __future__ import annotations

import queue
import threading
from typing import Iterable, Iterator

_END = object()


class _Raised:
    def __init__(self, exc: BaseException):
        self.exc = exc


def with_silences(source: Iterable, idle: float, stop: threading.Event) -> Iterator:
    """The source's items, and None after each `idle` seconds with none; its exceptions raised
    here. `stop` set: the reading thread gives up handing items on (the source itself is
    stopped by whoever set it)."""
    q: queue.Queue = queue.Queue(maxsize=4)

    def hand(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in source:
                if not hand(item):
                    return
        except BaseException as exc:   # noqa: BLE001  raised again on the loader's thread
            hand(_Raised(exc))
            return
        hand(_END)

    threading.Thread(target=produce, name="roceview-live-source", daemon=True).start()
    while True:
        try:
            item = q.get(timeout=idle)
        except queue.Empty:
            if stop.is_set():
                return
            yield None
            continue
        if item is _END:
            return
        if isinstance(item, _Raised):
            raise item.exc
        yield item
