"""Every writer (--csv files, --json, generate -o, generate --truth,
convert -o) on a symlink, on /dev/null, on a FIFO read by another process and on a directory;
`--json -` into `python -m json.tool`; `--csv DIR` names the files it wrote.

Atomic replace only for regular files and new paths: a symlink is followed (its target
replaced, the link kept), a device or FIFO is written directly and never replaced, a
directory is one error line and exit 2.

Edge cases of issue 16 item 1, outputs: an output naming one of the inputs replaced the capture
(`analyze x.pcap --json x.pcap` left x.pcap holding the JSON, exit 0), and two outputs naming
one file kept only the last (`generate -o x --truth x`); both are refused before anything is
read. `live -w` wrote straight into the path: an existing file was emptied even when the
capture then failed to start, and a Ctrl-C before the capture began left a file behind."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
import pytest
import shutil
from helpers.cli import run


REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "captures" / "clean.pcap"


def roceview(*argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roceview", *map(str, argv)], cwd=REPO, capture_output=True,
                          timeout=300, **kw)


# name -> (argv for an output path P, suffix the path needs, what to compare: the output file)
WRITERS = {
    "json": (lambda p: ["analyze", CAPTURE, "--json", p], ".json"),
    "csv": (lambda p: ["analyze", CAPTURE, "--csv", p.parent], "qps.csv"),
    "generate": (lambda p: ["generate", "clean", "-o", p], ".pcap"),
    # the capture beside the truth: never to the real /dev/null (a regressed writer replaced it)
    "truth": (lambda p: ["generate", "clean", "-o", p.with_name(p.name + ".pcap"), "--truth", p], ".json"),
    "convert": (lambda p: ["convert", CAPTURE, "-o", p], ".parquet"),
}


def _path(folder: Path, suffix: str, stem: str = "out") -> Path:
    """The output path a writer writes to: qps.csv inside a folder for --csv."""
    if suffix == "qps.csv":
        folder = folder / stem
        folder.mkdir(exist_ok=True)
        return folder / "qps.csv"
    return folder / f"{stem}{suffix}"


def _skip_without_pyarrow(name: str) -> None:
    if name == "convert":
        pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Each writer's bytes written to a plain new file."""
    folder = tmp_path_factory.mktemp("reference")
    cache = {}

    def get(name: str) -> bytes:
        if name not in cache:
            argv, suffix = WRITERS[name]
            path = _path(folder, suffix, name)
            proc = roceview(*argv(path))
            assert proc.returncode == 0, proc.stderr
            cache[name] = path.read_bytes()
        return cache[name]

    return get


def _leftovers(*folders: Path) -> list[str]:
    return [p.name for f in folders for p in f.iterdir() if p.name.endswith(".part") or p.name.startswith(".")]


@pytest.mark.parametrize("name", WRITERS)
def test_a_symlink_is_followed_its_target_replaced_and_the_link_kept(name, tmp_path, reference):
    _skip_without_pyarrow(name)
    argv, suffix = WRITERS[name]
    target_dir = tmp_path / "target"
    target_dir.mkdir()
    target = target_dir / "real.bin"
    target.write_bytes(b"old")
    link = _path(tmp_path, suffix)
    link.symlink_to(target)
    proc = roceview(*argv(link))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == reference(name)
    assert _leftovers(target_dir, link.parent) == []


def _null_device(folder: Path) -> Path:
    """A character device like /dev/null (1, 3) made in `folder`: a writer that still renamed
    over devices replaces this one, never the system's /dev/null (it did, run as root)."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    path = folder / "null"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


@pytest.mark.parametrize("name", WRITERS)
@pytest.mark.parametrize("via", ["direct", "symlink"])
def test_a_null_device_is_written_not_replaced(name, via, tmp_path):
    _skip_without_pyarrow(name)
    argv, suffix = WRITERS[name]
    device = _null_device(tmp_path)
    if via == "direct":
        if suffix == "qps.csv":
            pytest.skip("--csv takes a folder: a device is reached through a link in it")
        path = device                   # no suffix: convert writes it as given
    else:
        path = _path(tmp_path, suffix)
        path.symlink_to(device)
    before = os.stat(device)
    proc = roceview(*argv(path))
    assert proc.returncode == 0, proc.stderr
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino and after.st_rdev == before.st_rdev
    assert via == "direct" or stat.S_ISLNK(os.lstat(path).st_mode)     # the link, not replaced
    assert _leftovers(tmp_path) == []


def test_a_stand_in_dev_null_stays_a_device(tmp_path):
    """The real /dev/null is never given to a writer here: a regression would replace it (run as
    root, an earlier version did); a device with its numbers made in tmp_path shows the same."""
    stand_in = _null_device(tmp_path)
    proc = roceview("analyze", CAPTURE, "--json", stand_in)
    assert proc.returncode == 0 and stat.S_ISCHR(os.stat(stand_in).st_mode), proc.stderr


@pytest.mark.parametrize("name", WRITERS)
def test_a_fifo_is_written_directly_and_its_reader_gets_everything(name, tmp_path, reference):
    _skip_without_pyarrow(name)
    argv, suffix = WRITERS[name]
    fifo = _path(tmp_path, suffix, "fifo")
    os.mkfifo(fifo)
    got = tmp_path / "got.bin"
    reader = subprocess.Popen([sys.executable, "-c",
                               "import shutil, sys\n"
                               "with open(sys.argv[1], 'rb') as i, open(sys.argv[2], 'wb') as o:\n"
                               "    shutil.copyfileobj(i, o)", str(fifo), str(got)])
    proc = roceview(*argv(fifo))
    try:
        reader.wait(timeout=30)         # the writer is done: the reader sees the end at once
    except subprocess.TimeoutExpired:
        reader.kill()
        reader.wait()
        pytest.fail("the FIFO's reader never got to the end: the FIFO was not written")
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got.read_bytes() == reference(name)
    if name == "json":
        json.loads(got.read_bytes())


@pytest.mark.parametrize("name", WRITERS)
def test_a_unix_socket_is_connected_to_and_gets_everything(name, reference):
    import shutil
    import socket
    import tempfile
    import threading

    _skip_without_pyarrow(name)
    argv, suffix = WRITERS[name]
    folder = Path(tempfile.mkdtemp(prefix="c16a", dir="/tmp"))      # a socket path has <= 107 bytes
    try:
        path = _path(folder, suffix, "s")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(1)
        server.settimeout(120)
        got = []

        def serve():
            conn, _ = server.accept()
            while data := conn.recv(65536):
                got.append(data)
            conn.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        proc = roceview(*argv(path))
        thread.join(30 if proc.returncode == 0 else 1)   # the writer is done: its data is all sent
        server.close()
        assert proc.returncode == 0, proc.stderr
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert b"".join(got) == reference(name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("name", ["json", "generate", "truth", "convert"])
def test_a_directory_given_as_the_output_file_is_one_error_line(name, tmp_path):
    _skip_without_pyarrow(name)
    argv, suffix = WRITERS[name]
    folder = tmp_path / f"dir{suffix}"
    folder.mkdir()
    (folder / "keep").write_text("x")
    proc = roceview(*argv(folder))
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.count("\n") == 1 and "is a directory" in err and "Traceback" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["keep"]


def test_json_dash_pipes_into_json_tool_and_the_report_goes_to_stderr():
    cmd = (f"{sys.executable} -m roceview analyze {CAPTURE} --json - 2>report.txt "
           f"| {sys.executable} -m json.tool")
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, capture_output=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
        report = (Path(work) / "report.txt").read_text()
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"]["packets"] > 0 and set(doc) >= {"flows", "findings", "timeline"}
    assert "PFC / PAUSE" in report and "Traceback" not in report


def test_csv_dir_names_the_files_it_wrote_on_one_stderr_line(tmp_path):
    proc = roceview("analyze", CAPTURE, "--csv", tmp_path / "out")
    assert proc.returncode == 0
    lines = proc.stderr.decode().splitlines()
    assert lines == [f"roceview: wrote qps.csv, pfc.csv, findings.csv, events.csv, timeline.csv, ops.csv, connections.csv, "
                     f"priorities.csv, cc.csv, paused_flows.csv in {tmp_path / 'out'}"]


def test_stdout_by_its_proc_name_is_written_through_the_same_open_file():
    """/proc/self/fd/1 (what /dev/stdout links to; testing /dev/stdout itself would let a
    broken writer replace the system's) is '-': the JSON alone down the pipe, the report on
    stderr (tests/commands/test_json_stdout.py: a redirected stdout too)."""
    proc = roceview("analyze", CAPTURE, "--json", "/proc/self/fd/1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.decode())["summary"]["packets"] > 0
    assert "PFC / PAUSE" in proc.stderr.decode()


def test_replacing_a_regular_file_keeps_its_mode(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    out.chmod(0o640)
    assert roceview("analyze", CAPTURE, "--json", out).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and json.loads(out.read_text())


def test_a_failed_csv_write_removes_the_folders_it_created(tmp_path):
    from roceview.errors import WriteError
    from roceview.render import export

    class Result:
        pass

    result = Result()
    for _, attr in export.CSV_FILES:
        setattr(result, attr, None)
    out = tmp_path / "a" / "b"
    original = export.table_csv_chunks

    def failing(table):
        raise OSError(28, "No space left on device")

    export.table_csv_chunks = failing
    try:
        with pytest.raises(WriteError, match="No space left"):
            export.write_csv_dir(result, out)
    finally:
        export.table_csv_chunks = original
    assert list(tmp_path.iterdir()) == []




@pytest.mark.parametrize("argv", [["analyze", "{x}", "--json", "{link}"], ["analyze", "{x}", "--json", "{x}"],
                                  ["live", "--no-tui", "-r", "{x}", "-w", "{x}"],
                                  ["live", "--no-tui", "-r", "{x}", "--json", "{link}"]])
def test_an_output_that_is_an_input_is_refused_and_the_capture_kept(tmp_path, argv):
    x = tmp_path / "x.pcap"
    shutil.copy(CAPTURE, x)
    (tmp_path / "link").symlink_to("x.pcap")
    code, _, err = run(*[a.format(x=x, link=tmp_path / "link") for a in argv])
    assert code == 2 and "is also an input" in err and err.count("\n") == 1, err
    assert x.read_bytes() == CAPTURE.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "x.pcap"]


def test_two_outputs_naming_one_file_are_refused(tmp_path):
    out = tmp_path / "g.pcap"
    code, _, err = run("generate", "incast", "-o", out, "--truth", tmp_path / "." / "g.pcap")
    assert code == 2 and "name the same file" in err, err
    assert list(tmp_path.iterdir()) == []


def test_outputs_may_name_a_device_twice(tmp_path):
    os.mknod(tmp_path / "null", 0o666 | 0o020000, os.makedev(1, 3))   # a stand-in /dev/null
    code, _, err = run("generate", "incast", "-o", tmp_path / "null", "--truth", tmp_path / "null")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]
    assert (tmp_path / "null").is_char_device()


def test_a_replaced_file_keeps_its_owner_and_mode(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: only root can give a file to another user")
    out = tmp_path / "r.json"
    out.write_text("old")
    os.chown(out, 4321, 4322)
    os.chmod(out, 0o640)
    code, _, err = run("analyze", CAPTURE, "--json", out)
    assert code == 0, err
    st = out.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (4321, 4322, 0o640)
    assert out.read_text().startswith("{")


@pytest.mark.parametrize("argv", [["analyze", CAPTURE, "--json", ""], ["analyze", CAPTURE, "--csv", ""],
                                  ["convert", CAPTURE, "-o", ""], ["generate", "incast", "-o", "x.pcap", "--truth", ""]])
def test_an_empty_output_name_is_refused(argv, tmp_path, monkeypatch):
    """--json '' was silently ignored (exit 0, no JSON); convert -o '' said 'cannot write : Is a directory'."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(*argv)
    assert code == 2 and "needs a file name" in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
