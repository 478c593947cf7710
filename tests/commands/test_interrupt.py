"""Ctrl-C (SIGINT) at any moment of `convert`, `analyze --csv` and
`generate` leaves no partial or temporary file (nor the --csv folder it created) and exits 130
with nothing on stderr: no traceback, no "Exception ignored", no numpy import advice. The
moments run from start-up (once roceview/__main__.py has imported roceview.interrupt, seen
through `-X importtime`) through reading to writing; a run the signal reaches only after it
finished must have written complete outputs.

A Ctrl-C while `convert --partition-by flow` fills its hidden
`.NAME.partial` dataset folder left that folder (and its Parquet files) behind, exit 130;
it is removed now (roceview.interrupt's "tree" registration)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
import pytest
import os


REPO = Path(__file__).resolve().parents[2]
MOMENTS_S = (0.0, 0.01, 0.03, 0.06, 0.1, 0.2, 0.35, 0.5, 0.8, 1.2)
CSV = ("qps.csv", "pfc.csv", "findings.csv", "events.csv", "timeline.csv")
BAD_WORDS = ("Traceback", "Exception ignored", "KeyboardInterrupt", "Error", "error")


def write_big_capture(path: Path, packets: int) -> Path:
    """`packets` RoCEv2 RC SEND_ONLY frames of one queue pair, consecutive PSNs, 100 ns apart,
    tiled and patched with numpy (ICRC not computed: not needed): a second or more to analyze."""
    import struct

    import numpy as np

    from roceview.capture.writer import pcap_header

    bth = struct.pack(">BBHB", 0x04, 0x40, 0xFFFF, 0) + (0x11).to_bytes(3, "big") + b"\x80" + bytes(3)
    payload = bth + bytes(64) + bytes(4)
    udp = struct.pack(">HHHH", 49152, 4791, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 2, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])) + udp
    frame = np.frombuffer(bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip, np.uint8)
    records = np.zeros((packets, 16 + len(frame)), np.uint8)     # one fixed size: a 2-D array
    records[:, 16:] = frame
    psn = np.arange(packets, dtype=np.uint32) & 0xFFFFFF
    for k, shift in enumerate((16, 8, 0)):          # BTH PSN: bytes 9-11 of the BTH at offset 42
        records[:, 16 + 51 + k] = (psn >> shift) & 0xFF
    ts = 1_700_000_000_000_000_000 + 100 * np.arange(packets, dtype=np.int64)
    head = records[:, :16].view("<u4")
    head[:, 0], head[:, 1], head[:, 2:] = ts // 10**9, ts % 10**9, len(frame)   # sec, ns, caplen, wire
    with open(path, "wb") as fh:
        fh.write(pcap_header())
        fh.write(records.tobytes())
    return path


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory) -> Path:
    return write_big_capture(tmp_path_factory.mktemp("big") / "big.pcap", 3_000_000)


def interrupted(argv: list, delay_s: float, cwd: Path) -> tuple[int, str]:
    """Run `python -X importtime -m roceview ARGV`, send SIGINT `delay_s` after roceview's
    handler is in place; (exit code, stderr without the import-time lines)."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "roceview", *map(str, argv)],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=_env())
    lines, ready = [], threading.Event()

    def drain():
        imported = False
        for line in proc.stderr:
            lines.append(line)
            # roceview.interrupt's line is printed when its import ends, a moment *before*
            # __main__ calls install(): on a loaded machine a signal sent then met Python's own
            # handler (a KeyboardInterrupt traceback, exit -2). The next import-time line (an
            # import of roceview.cli, which follows install()) proves the handler is in place.
            if imported and line.startswith("import time:"):
                ready.set()
            imported = imported or (line.startswith("import time:")
                                    and line.rstrip().endswith(" roceview.interrupt"))
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    ready.wait(120)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(120)
    reader.join(30)
    return code, "".join(line for line in lines if not line.startswith("import time:"))


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


def _no_leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".part" in p.name or p.name.startswith("."))


def test_sigint_during_analyze_csv_leaves_nothing_and_exits_130(big_capture, tmp_path):
    codes = []
    for k, delay in enumerate(MOMENTS_S):
        work = tmp_path / f"run{k}"
        work.mkdir()
        code, err = interrupted(["analyze", big_capture, "--csv", work / "out", "--json", work / "r.json"],
                                delay, work)
        codes.append(code)
        assert code in (0, 130), (delay, code, err)
        assert not any(w in err for w in BAD_WORDS), (delay, err)
        assert code == 0 or err in ("", f"roceview: wrote {', '.join(CSV)} in {work / 'out'}\n"), (delay, err)
        if code == 130:      # outputs already complete may stay, nothing else
            if (work / "out").exists():
                assert sorted(p.name for p in (work / "out").iterdir()) == sorted(CSV)
            if (work / "r.json").exists():
                json.loads((work / "r.json").read_text())
        else:
            assert (work / "out" / "timeline.csv").exists() and (work / "r.json").exists()
        assert _no_leftovers(work) == [] and (not (work / "out").exists() or _no_leftovers(work / "out") == [])
    assert codes.count(130) >= len(MOMENTS_S) // 2, codes


def test_sigint_during_convert_leaves_nothing_and_exits_130(big_capture, tmp_path):
    pytest.importorskip("pyarrow")
    codes = []
    for k, delay in enumerate(MOMENTS_S):
        work = tmp_path / f"run{k}"
        work.mkdir()
        code, err = interrupted(["convert", big_capture, "-o", work / "p.parquet"], delay, work)
        codes.append(code)
        assert code in (0, 130), (delay, code, err)
        if code == 130:
            assert err == "", (delay, err)
            assert sorted(p.name for p in work.iterdir()) == [], delay
        else:
            assert (work / "p.parquet").stat().st_size > 0
    assert codes.count(130) >= len(MOMENTS_S) // 2, codes


def test_sigint_during_generate_leaves_nothing_and_exits_130(tmp_path):
    for k, delay in enumerate((0.0, 0.05, 0.2)):
        work = tmp_path / f"run{k}"
        work.mkdir()
        code, err = interrupted(["generate", "incast", "--scale", "200", "-o", work / "g.pcap",
                                 "--truth", work / "t.json"], delay, work)
        assert code in (0, 130), (delay, code, err)
        if code == 130:
            assert err == "" and sorted(p.name for p in work.iterdir()) in ([], ["g.pcap"]), (delay, err)


WRITE_AND_INTERRUPT = r"""
import os, signal, sys
from roceview import interrupt
from roceview.capture.writer import atomic_output
from roceview.render import export

interrupt.install()
made = []

def make(k):
    def part():
        made.append(k)
        if len(made) == int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGINT)      # Ctrl-C while this file is being written
        return b"x" * 100000
    return part

class Result: pass
result = Result()
for _, attr in export.CSV_FILES:
    setattr(result, attr, attr)
export.table_csv_chunks = lambda name: make(name)()
if sys.argv[3] == "csv":
    export.write_csv_dir(result, sys.argv[1])
else:
    with atomic_output(sys.argv[1]) as fh:
        fh.write(make(0)())
        fh.write(b"more")
print("not interrupted")
"""


@pytest.mark.parametrize("nth", [1, 3, 5])
def test_sigint_while_the_csv_files_are_written_removes_them_and_the_folder(tmp_path, nth):
    out = tmp_path / "new" / "out"
    proc = subprocess.run([sys.executable, "-c", WRITE_AND_INTERRUPT, str(out), str(nth), "csv"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=_env())
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "")
    assert list(tmp_path.iterdir()) == []     # `new` and `new/out` were created: both removed


def test_sigint_while_one_file_is_written_removes_its_temporary_file(tmp_path):
    proc = subprocess.run([sys.executable, "-c", WRITE_AND_INTERRUPT, str(tmp_path / "f.bin"), "1", "file"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=_env())
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_csv_folder_is_kept_with_its_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    proc = subprocess.run([sys.executable, "-c", WRITE_AND_INTERRUPT, str(out), "2", "csv"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 130
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]




def test_sigint_while_a_partitioned_dataset_is_written_leaves_nothing(tmp_path):
    pytest.importorskip("pyarrow")
    big = write_big_capture(tmp_path / "big.pcap", 1_000_000)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "roceview", "convert", big, "--partition-by", "flow",
                             "-o", work / "ds"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    partial = work / ".ds.partial"
    while proc.poll() is None and not partial.exists():
        time.sleep(0.002)                   # the dataset is being written from now on
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:                # finished before the signal arrived: a complete dataset
        assert (work / "ds").is_dir() and not partial.exists()
        pytest.skip("the conversion ended before the Ctrl-C")
    assert (proc.returncode, err) == (130, "")
    assert list(work.iterdir()) == []


def _convert(big: Path, out: Path, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "roceview", "convert", big, "-o", out], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, **popen)


def _wait_for_part(proc, folder: Path) -> None:
    while proc.poll() is None and not any(".part" in p.name for p in folder.iterdir()):
        time.sleep(0.002)                   # the output's temporary file exists from now on


def test_sigterm_removes_the_temporary_file_and_exits_143(tmp_path):
    """`timeout 60 roceview convert ...` sends SIGTERM: it left `.p.parquet.XXXX.part`."""
    pytest.importorskip("pyarrow")
    big = write_big_capture(tmp_path / "big.pcap", 1_000_000)
    work = tmp_path / "work"
    work.mkdir()
    proc = _convert(big, work / "p.parquet")
    _wait_for_part(proc, work)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the conversion ended before the signal")
    assert (proc.returncode, err) == (143, "")
    assert list(work.iterdir()) == []


def test_a_sigint_the_parent_ignores_stays_ignored(tmp_path):
    """A shell script's `roceview ... &` runs with SIGINT ignored (CPython then installs no
    handler of its own); roceview installed its handler over it, so a Ctrl-C meant for the
    script's foreground job ended the background conversion."""
    pytest.importorskip("pyarrow")
    big = write_big_capture(tmp_path / "big.pcap", 300_000)
    work = tmp_path / "work"
    work.mkdir()
    proc = _convert(big, work / "p.parquet", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    _wait_for_part(proc, work)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert [p.name for p in work.iterdir()] == ["p.parquet"]
