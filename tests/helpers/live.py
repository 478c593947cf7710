"""What the live-capture tests share: the capture they stream, its packet count, and the CSV
files `analyze` writes for it (what `live` must write too)."""
from __future__ import annotations

from pathlib import Path

from roceview.api import analyze
from roceview.capture.readers import read_records
from roceview.render.export import CSV_FILES, write_csv_dir

LOSS = Path(__file__).resolve().parents[2] / "captures" / "network-loss-receiver-side.pcap"


def reference_csv(capture: Path, directory: Path) -> Path:
    write_csv_dir(analyze(str(capture), warn=lambda m: None), directory)
    return directory


def same_csvs(a: Path, b: Path) -> None:
    for name, _ in CSV_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def packet_count(path: Path) -> int:
    return sum(chunk.n for chunk in read_records(str(path), 1 << 16, lambda m: None))
