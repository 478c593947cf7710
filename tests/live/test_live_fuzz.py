"""Fuzzing `roceview live -r - -w FILE` (seeded, bounded): a feeder writes a capture through a
pipe whole, cut at a random byte, with random bytes changed or put in front, or only part of
its file header, in random write sizes, then ends the stream or stalls with it open; live is
stopped by the stream's end, SIGINT, SIGINT twice, SIGTERM or SIGHUP at a random moment
(during roceview's start-up too). Every try must end before its deadline (a hang fails), print no
traceback, exit with a status its stop explains (an error: one line, no -w file), leave no
`.part` file, keep stdout for the JSON or the capture alone when asked, and leave a -w file
that ends at a whole record: roceview's readers and tshark (where installed) read it without
"cut short" or "ends in the middle".

ROCEVIEW_FUZZ_EXAMPLES sets the number of tries (CI: 6), ROCEVIEW_FUZZ_SEED the seed."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from live_feed import REPO, Fed, check_whole

from roceview.capture.readers import read_records

TRIES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "6"))
SEED = int(os.environ.get("ROCEVIEW_FUZZ_SEED", "30"))
STOPS = {"eof": (), "SIGINT": (signal.SIGINT,), "SIGINT twice": (signal.SIGINT, signal.SIGINT),
         "SIGTERM": (signal.SIGTERM,), "SIGHUP": (signal.SIGHUP,)}
EXITS = {"eof": {0, 2}, "SIGINT": {0, 2, 130}, "SIGINT twice": {0, 2, 130}, "SIGTERM": {0, 2, 143},
         "SIGHUP": {0, 2, 129}}
SHAPES = ("whole", "cut", "cut", "cut", "header", "changed", "prefixed")
HEADER = {"pcap": 24, "pcapng": 28}       # a valid stream shorter than this is refused at its end


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, bytes]:
    pcapng = tmp_path_factory.mktemp("fuzz") / "loss.pcapng"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "network-loss-receiver-side", "-o", str(pcapng)],
                   cwd=REPO, check=True, capture_output=True)
    return {"pcap": (REPO / "captures" / "clean.pcap").read_bytes(), "pcapng": pcapng.read_bytes()}


def shaped(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    shape = rng.choice(SHAPES)
    if shape == "cut":
        return shape, data[:rng.randrange(1, len(data))]
    if shape == "header":
        return shape, data[:rng.randrange(1, 40)]
    if shape == "changed":
        changed = bytearray(data)
        for _ in range(rng.randrange(1, 6)):
            changed[rng.randrange(len(changed))] = rng.randrange(256)
        return shape, bytes(changed)
    if shape == "prefixed":
        return shape, rng.randbytes(rng.randrange(1, 64)) + data
    return shape, data


def one_try(rng: random.Random, stop: str, sources: dict[str, bytes], tmp_path) -> str:
    kind = rng.choice(("pcap", "pcapng"))
    shape, data = shaped(rng, sources[kind])
    stall = rng.random() < (0.3 if stop == "eof" else 0.8)       # a signal mostly meets a stream left open
    out = rng.choice(("file", "file", "stdout", "json"))
    saved = tmp_path / "saved.cap"
    argv = ["-w", "-" if out == "stdout" else saved] + (["--json", "-"] if out == "json" else [])
    argv += ["--count", str(rng.randrange(1, 400))] if rng.random() < 0.2 else []
    what = f"{shape} {len(data)} bytes, {'stall' if stall else 'eof'}, {stop}, {out}, {argv[2:]}"
    fed = Fed(tmp_path, data, *argv, stall=stall, step=rng.choice((7, 97, 1500, 4096, 65536)), cwd=tmp_path)
    fed.wait_for_handlers()                 # the interpreter's own start-up is not roceview's
    time.sleep(rng.uniform(0.0, 1.2))       # roceview's start-up (imports, opening -w) is hit too
    fed.signal(*STOPS[stop], gap_s=rng.choice((0.0, 0.05, 1.2)))
    if stop == "eof" and stall:
        time.sleep(rng.uniform(0.0, 0.5))
        fed.end_stream()
    code, stdout, err = fed.finish(deadline_s=60 if stall or stop != "eof" else 120)
    check(code, stdout, err, stop, out, saved, data, shape, what)
    assert not (tmp_path / "-").exists(), what                # -w - is stdout, not a file named '-'
    if shape != "changed" and shape != "prefixed":
        valid_stream(code, stdout, err, stop, stall, out, data[:HEADER[kind]], len(data) >= HEADER[kind], what)
    return what


def valid_stream(code, stdout, err, stop, stall, out, header, whole_header, what) -> None:
    """A valid stream, whole or cut: refused only when it ended inside its file header; with
    -w -, once ended or stopped normally, stdout holds at least its file header."""
    assert code != 2 or not whole_header and (not stall or stop == "eof"), (what, err)      # it had ended
    if out == "stdout" and code == 0 and whole_header:
        assert stdout.startswith(header), what


def check(code, stdout, err, stop, out, saved, data, shape, what) -> None:
    assert "Traceback" not in err and "Exception" not in err, (what, err)
    assert code in EXITS[stop], (what, code, err)
    lines = [line for line in err.splitlines() if not line.startswith("live ")]
    if code == 2:
        errors = [line for line in lines if line.startswith("roceview: error:")]
        assert len(errors) == 1, (what, err)
        assert not saved.exists(), what
    assert [p.name for p in saved.parent.iterdir() if p.name.endswith(".part")] == [], what
    if out == "json" and code == 0:
        json.loads(stdout)
    if out == "stdout" and stdout:
        saved.write_bytes(stdout)
    elif out == "stdout":
        return
    if saved.exists():
        if shape in ("whole", "cut", "header"):
            check_whole(saved, data)
        else:
            damaged_whole(saved, what)
        saved.unlink()


def damaged_whole(saved, what) -> None:
    """A stream with changed bytes may be damaged inside a record the file keeps; still no
    record is cut short."""
    warnings: list[str] = []
    for _ in read_records(str(saved), 1 << 16, warnings.append):
        pass
    assert not any("middle" in w or "cut short" in w for w in warnings), (what, warnings)
    tshark = shutil.which("tshark")
    if tshark is not None:
        proc = subprocess.run([tshark, "-r", str(saved)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "LC_ALL": "C"})
        assert "cut short" not in proc.stderr, (what, proc.stderr)


def test_live_streams_stopped_every_way_leave_whole_files(sources, tmp_path):
    rng = random.Random(SEED)
    done = []
    for k in range(TRIES):
        case = tmp_path / f"try{k}"
        case.mkdir()
        done.append(one_try(rng, list(STOPS)[k % len(STOPS)], sources, case))     # each stop in turn
        print(f"try {k}: {done[-1]}")
    print(f"live fuzz: {len(done)} tries, 0 failures (seed {SEED})")
