"""A burst read at once is walked at once: `roceview live -r -` widens its pipe to 1 MB, so a
writer's burst (or a whole small capture) arrives in one read; the walker then asked for more
before walking it, and that read waited for the writer's next bytes. A writer gone quiet (a
quiet interface, `(cat x.pcap; sleep 60) |`) left every packet read, and saved to -w, unseen:
the TUI said 0 packets, and q wrote CSVs of 0 packets."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from roceview.capture import live_stream as capture
from roceview.capture.source import _widen_pipe

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


@pytest.mark.parametrize("name", ["network-loss.pcap", "pfc-storm.pcap", "pcapng"])
def test_records_already_read_are_walked_before_waiting_for_more(name, tmp_path):
    if name == "pcapng":                       # the pcapng walker refills its own way
        from roceview.capture.writer import write_pcapng
        from roceview.packets.read import iter_chunks

        chunk = next(iter_chunks([str(CAPTURES / "incast.pcap")]))[0]
        name = str(tmp_path / "incast.pcapng")
        write_pcapng(name, [chunk.frame(i) for i in range(chunk.n)], [int(t) for t in chunk.ts])
    path = CAPTURES / name
    data = path.read_bytes()
    assert len(data) < 1 << 20
    read_end, write_end = os.pipe()
    _widen_pipe(capture._Fd(read_end))
    os.write(write_end, data)                  # the writer then stays quiet, the pipe open
    stream = capture.LiveStream(read_end)
    got: list[int] = []
    first = threading.Event()

    def walk():
        for chunk, _ in capture.LiveRecords(stream, name, 1 << 16, lambda message: None):
            got.append(chunk.n)
            first.set()

    reader = threading.Thread(target=walk, daemon=True)
    reader.start()
    seen = first.wait(10)
    os.close(write_end)                        # the end of the stream: the walk ends either way
    reader.join(20)
    os.close(read_end)
    assert seen, "no record was walked while the writer was quiet"
    from roceview.packets.read import iter_chunks

    assert sum(got) == sum(b.n for _, b in iter_chunks([str(path)]))
