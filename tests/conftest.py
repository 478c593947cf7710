"""Shared, generic test fixtures.

* ``REAL``: the real-world capture corpus in ``../shared/captures/real`` (next to the
  repository; see its MANIFEST.md). Tests that use it skip cleanly where it is absent.
* ``SAMPLES``: the project's own sample captures in ``captures/``.
* ``real_capture`` / ``sample_capture``: a test taking one of these arguments runs once
  per capture file found (glob at collection time), or is skipped with a clear reason.
* ``ROCEVIEW_REQUIRE_CORPUS=1`` (as ``.ci/run`` sets): the session stops at once when ``REAL`` is
  absent, instead of every test of it skipping: CI must not pass by skipping the real captures,
  while a fresh clone without ``../shared`` passes with those tests skipped.
* ``zone``: TZ for tshark and for this process (parametrize it indirectly with zone names).
* ``tshark``: path of the tshark binary; skips when tshark is missing, unless
  ``ROCEVIEW_REQUIRE_TSHARK=1`` (as ``.ci/run`` sets), where it fails instead.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "captures" / "real"
SAMPLES = REPO / "captures"
CAPTURE_PATTERNS = ("*.pcap", "*.pcapng", "*.pcap.gz", "*.pcapng.gz")

# pytest-xdist's workers (the suite runs with -n auto) start with COLUMNS=80 in their environment; the
# report's width follows COLUMNS, so a test that sets no width would see 80 there and the pipe width
# (render/screen.py PIPE_WIDTH) in a plain run. Tests set a width themselves where it matters.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


def capture_files(directory: Path) -> list[Path]:
    """Capture files directly in `directory`, sorted by name ([] if it does not exist)."""
    if not directory.is_dir():
        return []
    found = {p for pattern in CAPTURE_PATTERNS for p in directory.glob(pattern) if p.is_file()}
    return sorted(found)


def _parametrize_captures(metafunc, argname: str, directory: Path) -> None:
    files = capture_files(directory)
    if files:
        metafunc.parametrize(argname, files, ids=[f.name for f in files])
    else:
        metafunc.parametrize(argname, [pytest.param(None, marks=pytest.mark.skip(
            reason=f"no captures in {directory}"))], ids=["none"])


def pytest_sessionstart(session):
    if os.environ.get("ROCEVIEW_REQUIRE_CORPUS") == "1" and not capture_files(REAL):
        raise pytest.UsageError(f"ROCEVIEW_REQUIRE_CORPUS=1 but the real captures are absent: no capture in {REAL}")


def pytest_generate_tests(metafunc):
    if "real_capture" in metafunc.fixturenames:
        _parametrize_captures(metafunc, "real_capture", REAL)
    if "sample_capture" in metafunc.fixturenames:
        _parametrize_captures(metafunc, "sample_capture", SAMPLES)


@pytest.fixture(scope="session")
def tshark() -> str:
    path = shutil.which("tshark")
    if path is None:
        message = "tshark is not installed"
        if os.environ.get("ROCEVIEW_REQUIRE_TSHARK") == "1":
            pytest.fail(f"{message} but ROCEVIEW_REQUIRE_TSHARK=1", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture
def zone(request, monkeypatch):
    """TZ for tshark and for this process (time.localtime reads it at tzset)."""
    import time

    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()
