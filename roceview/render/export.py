"""CSV and JSON export of an AnalysisResult (no pandas: written from the numpy columns).

`--csv DIR` writes qps.csv, pfc.csv, findings.csv, events.csv and timeline.csv. The files are
first written into a temporary directory next to DIR and moved into place only when all of them
are complete, so an error leaves nothing half written.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from roceview.errors import WriteError

CSV_FILES = (("qps.csv", "flows_table"), ("pfc.csv", "pfc_table"), ("findings.csv", "findings_table"),
             ("events.csv", "events_table"), ("timeline.csv", "timeline_table"))


def table_csv(table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(table.text_rows())
    return out.getvalue()


def write_csv_dir(result, directory) -> list[Path]:
    directory = Path(directory)
    created = not directory.exists()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".roceview-csv.", dir=directory))
    except OSError as exc:
        _remove_if_empty(directory, created)
        raise WriteError(f"cannot write CSV files into {directory}: {exc.strerror or exc}") from None
    try:
        for name, attr in CSV_FILES:
            (tmp / name).write_text(table_csv(getattr(result, attr)), encoding="utf-8")
        written = []
        for name, _ in CSV_FILES:
            os.replace(tmp / name, directory / name)
            written.append(directory / name)
        return written
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_if_empty(directory, created)
        raise WriteError(f"cannot write CSV files into {directory}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_if_empty(directory: Path, created: bool) -> None:
    if created:
        try:
            directory.rmdir()
        except OSError:
            pass


def result_document(result) -> dict:
    return {"summary": result.summary,
            "flows": result.flows_table.records(), "pfc": result.pfc_table.records(),
            "findings": result.findings_table.records(), "events": result.events_table.records(),
            "timeline": result.timeline_table.records()}


def write_json(result, path) -> None:
    from roceview.capture.writer import atomic_output

    text = json.dumps(result_document(result), indent=1, allow_nan=False)
    if str(path) == "-":
        raise WriteError("--json needs a file name")
    try:
        with atomic_output(path, "w") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from None
