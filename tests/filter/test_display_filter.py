"""Roceview.filter: Wireshark display-filter syntax, its errors, and the vectorised evaluation
against a naive per-row evaluation (hypothesis).

DisplayFilter.select when no row of a batch matches: `analyze --filter`
of a filter that matches nothing in a batch (`infiniband.lrh` on a RoCEv2 capture) raised
"cannot reshape array of size 0 into shape (0,newaxis)" from the (n, 16) address columns."""
from __future__ import annotations

import io
import ipaddress
import operator
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import REAL, SAMPLES, capture_files
from roceview.packets.batch import Batch
from roceview.cli import Environment, main
from roceview.errors import BadInput
from roceview.filter import FilterError, compile_filter
from roceview.filter import field_names as F
from roceview.filter.evaluate import occurrences


CLEAN = SAMPLES / "clean.pcap"


def _batch(path) -> Batch:
    from roceview.packets.read import iter_batches

    return Batch.concat(list(iter_batches([str(path)], prefetch=False)))


def _frames(text: str, b: Batch) -> list[int]:
    return b.cols["frame"][compile_filter(text).mask(b)].tolist()


# ------------------------------------------------------------------ syntax and errors

@pytest.mark.parametrize("text, message", [
    ("infiniband.bth.dstqp == 1", 'filter: unknown field "infiniband.bth.dstqp" at column 1 '
                                  "(did you mean infiniband.bth.destqp?)"),
    ("udp && ip.scr == 1.2.3.4", 'filter: unknown field "ip.scr" at column 8 (did you mean ip.src?)'),
    ("ip.src == 10.0.0.300", 'filter: "10.0.0.300" is not an IPv4 address or network (ip.src) at column 11'),
    ("ip.src ==", 'filter: expected a value after "==", found the end of the filter at column 10'),
    ("(udp || ip", 'filter: expected ")" (to close the "(" at column 1), found the end of the filter at column 11'),
    ("udp.port in {1 2}", 'filter: expected "," or "}" in the set opened at column 13, found "2" at column 16'),
    ("udp)", 'filter: unexpected ")" (expected and/or or the end of the filter) at column 4'),
    ("ip.src = 1.2.3.4", 'filter: unexpected character "=" at column 8 (did you mean "=="?)'),
    ("udp.port == abc", 'filter: "abc" is not a number (udp.port is an integer field) at column 13'),
    ("eth.src == 1:2", 'filter: "1:2" is not a MAC address (eth.src) at column 12'),
    ("ipv6.src == 10.0.0.1", 'filter: "10.0.0.1" is an IPv4 address, ipv6.src is IPv6 at column 13'),
    ("infiniband == 3", "filter: infiniband is a protocol: test it for presence only, without a comparison at column 15"),
    ("", "filter: empty filter at column 1"),
    ("eth.src contains 08", 'filter: "contains" is not supported (comparisons, "in" and presence are) at column 9'),
])
def test_a_bad_filter_is_one_line_naming_the_column(text, message):
    with pytest.raises(FilterError) as err:
        compile_filter(text)
    assert str(err.value) == message
    assert isinstance(err.value, BadInput)


def test_the_cli_prints_the_same_line_and_exits_2():
    err = io.StringIO()
    code = main(["dissect", str(CLEAN), "-Y", "infiniband.bth.dstqp == 1"], Environment(stdout=io.StringIO(), stderr=err))
    assert code == 2
    assert err.getvalue() == ('roceview: error: filter: unknown field "infiniband.bth.dstqp" at column 1 '
                              "(did you mean infiniband.bth.destqp?)\n")
    err = io.StringIO()
    assert main(["analyze", str(CLEAN), "--filter", "ip.src =="], Environment(stdout=io.StringIO(), stderr=err)) == 2
    assert err.getvalue().startswith("roceview: error: filter: expected a value")


@pytest.mark.parametrize("argv, message", [
    (["-T", "fields"], "-T fields needs at least one -e FIELD"),
    (["-e", "frame.number"], "-e and -E need -T fields"),
    (["-T", "fields", "-e", "ip.sr"], '-e: unknown field "ip.sr" (did you mean ip.src?)'),
    (["-T", "fields", "-e", "psn", "-E", "quote=x"], "-E quote=x: quote must be d, s or n"),
])
def test_bad_field_options_are_one_line(argv, message):
    err = io.StringIO()
    assert main(["dissect", str(CLEAN), *argv], Environment(stdout=io.StringIO(), stderr=err)) == 2
    assert err.getvalue() == f"roceview: error: {message}\n"


def test_flags_the_analysis_sets_need_its_flags_column():
    b = _batch(CLEAN)
    with pytest.raises(FilterError, match="roceview.gap needs the analysis flags: dissect -Y"):
        compile_filter("roceview.gap").mask(b)
    from roceview.packets.flags import Flag

    b.cols["flags"] = np.where(b.cols["frame"] % 3 == 0, int(Flag.GAP | Flag.NAK), 0).astype(np.uint32)
    assert _frames("roceview.gap && roceview.nak", b) == [f for f in b.cols["frame"].tolist() if f % 3 == 0]
    assert _frames("roceview.retransmission", b) == []


def test_icrc_bad_reads_the_icrc_verdict():
    path = REAL / "magnate3_rocev2_uc-send_bad-icrc.pcap"
    if not path.exists():
        pytest.skip("real capture absent")
    b = _batch(path)
    bad = b.mask("icrc_ok") & ~b.cols["icrc_ok"]
    assert bad.any()
    assert _frames("roceview.icrc_bad", b) == b.cols["frame"][bad].tolist()
    assert _frames("!roceview.icrc_bad", b) == b.cols["frame"][~bad].tolist()


def test_fields_lists_the_columns_a_filter_reads():
    f = compile_filter("ip.src == 10.0.0.0/8 && udp.port in {4791} || opcode_name == \"CNP\"")
    assert f.fields == {"_src_addr", "ip_frag", "udp_sport", "udp_dport", "opcode"}


def test_operators_and_literals_on_a_sample():
    b = _batch(CLEAN)
    every = b.cols["frame"].tolist()
    assert _frames("frame.number in {1, 3..5, 0x10}", b) == [1, 3, 4, 5, 16]
    assert _frames("frame.number eq 010", b) == [8]                # Wireshark: a leading 0 is octal
    assert _frames("frame.number gt 3 and frame.number le 5", b) == [4, 5]
    assert _frames("not frame.number >= 3", b) == [1, 2]
    assert _frames("frame.number not in {2..1000000}", b) == [1]
    assert _frames("frame.number > -1", b) == []                   # tshark: a signed -1 orders against no unsigned field
    assert _frames("frame.number != -1", b) == every
    assert _frames("frame.number in {-1..5}", b) == []
    assert _frames("psn > -1", b) == _frames("psn", b)               # a column's own name: as a number
    assert _frames("frame.number <= 4294967295", b) == every        # FT_UINT32's maximum (larger: refused)
    assert _frames("psn < 18446744073709551615", b) == _frames("psn", b)   # a column's own: up to 64 bits
    assert _frames("proto == roce_v2", b) == _frames('proto == "roce_v2"', b) == _frames("udp.dstport == 4791", b)
    assert _frames('opcode_name in {"CNP", "RC_ACKNOWLEDGE"}', b) == _frames("infiniband.bth.opcode in {0x81, 17}", b)
    assert _frames("transport == RC", b) == _frames("infiniband.bth.opcode <= 0x1f", b)
    assert _frames("ip.addr == 10.0.0.0/8", b) == _frames("ip", b)


def test_native_columns_and_aliases_agree():
    b = _batch(CLEAN)
    for alias, own in [("infiniband.bth.psn > 100", "psn > 100"), ("infiniband.bth.a == 1", "ackreq == true"),
                       ("infiniband.bth.destqp == 0x11", "dest_qp == 17"), ("vlan.priority == 3", "pcp == 3")]:
        assert _frames(alias, b) == _frames(own, b), alias


# ------------------------------------------------------------------ property: vectorised == per row

def _corpus() -> Batch:
    """Rows of every kind: the samples, and the real captures where present (IPv6, native IB,
    PAUSE, bad ICRC), a few hundred of each file."""
    files = capture_files(SAMPLES)[:4] + capture_files(REAL)
    return Batch.concat([_batch(f).select(slice(0, 200)) for f in files])


FIELDS = ["frame.number", "udp.port", "ip.addr", "ip.src", "eth.addr", "vlan.id", "opcode_name", "transport",
          "infiniband.bth.a", "infiniband", "roceview.icrc_bad", "ipv6.src", "src_ip", "infiniband.grh.sgid",
          "infiniband.bth.psn", "macc.pause_time", "aeth_kind"]


def _row_values(b: Batch) -> dict:
    """field -> per row, the list of its occurrences' Python values (present ones only)."""
    out = {}
    for name in FIELDS:
        field = F.lookup(name, 1)
        per_row = [[] for _ in range(b.n)]
        for values, present in occurrences(b, field):
            for i in np.flatnonzero(present).tolist():
                per_row[i].append(_python(field, values[i]))
        out[name] = per_row
    return out


def _python(field, v):
    if field.kind == F.STR:
        return field.vocab[int(v)] or ""          # a code without a name matches no literal
    if field.kind in (F.IPV4, F.IPV6, F.ADDR):
        return int.from_bytes(bytes(v), "big")
    return int(v)


def _literal_text(field, v) -> str:
    if field.kind == F.STR:
        return f'"{v}"'
    if field.kind == F.MAC:
        return ":".join(f"{x:02x}" for x in v.to_bytes(6, "big"))
    if field.kind in (F.IPV4, F.IPV6, F.ADDR):
        if field.kind != F.IPV6 and v >> 32 == 0xFFFF:
            return str(ipaddress.IPv4Address(v & 0xFFFFFFFF))
        return str(ipaddress.IPv6Address(v))
    return str(v) if v % 2 else hex(v)


B = None
ROWS = None


def _data():
    global B, ROWS
    if B is None:
        B = _corpus()
        ROWS = _row_values(B)
    return B, ROWS


@st.composite
def leaf(draw):
    _, rows = _data()
    name = draw(st.sampled_from(FIELDS))
    field = F.lookup(name, 1)
    seen = sorted({v for occ in rows[name] for v in occ} - {""}) or [0]
    if field.kind in (F.NONE, F.FLAG):
        return ("has", name)
    value = draw(st.sampled_from(seen))
    op = draw(st.sampled_from(["has", "==", "!=", "<", ">=", "===", "!==", "in", "not in"]
                              if field.kind != F.STR else ["has", "==", "!=", "in", "not in"]))
    if op in ("in", "not in"):
        other = draw(st.sampled_from(seen))
        lo, hi = sorted([value, other])
        return (op, name, ((value, None), (lo, hi) if field.kind != F.STR else (other, None)))
    if op in ("==", "!=") and field.kind in (F.IPV4, F.ADDR) and value >> 32 == 0xFFFF and draw(st.booleans()):
        return (op, name, value, draw(st.sampled_from([24, 16])))        # a CIDR network
    return (op, name, value)


def trees():
    return st.recursive(leaf(), lambda kids: st.one_of(
        st.tuples(st.just("not"), kids),
        st.tuples(st.sampled_from(["and", "or"]), kids, kids)), max_leaves=6)


def render(t) -> str:
    if t[0] == "not":
        return f"!({render(t[1])})"
    if t[0] in ("and", "or"):
        return f"({render(t[1])}) {'&&' if t[0] == 'and' else 'or'} ({render(t[2])})"
    field = F.lookup(t[1], 1)
    if t[0] == "has":
        return t[1]
    if t[0] in ("in", "not in"):
        items = ", ".join(_literal_text(field, a) + ("" if b is None else ".." + _literal_text(field, b))
                          for a, b in t[2])
        return f"{t[1]} {t[0]} {{{items}}}"
    text = _literal_text(field, t[2]) + (f"/{t[3]}" if len(t) > 3 else "")
    return f"{t[1]} {t[0]} {text}"


_OPS = {"==": operator.eq, "<": operator.lt, ">=": operator.ge}


def naive(t, rows, i) -> bool:
    """The Wireshark rules, one row at a time, in plain Python."""
    if t[0] == "not":
        return not naive(t[1], rows, i)
    if t[0] in ("and", "or"):
        a, b = naive(t[1], rows, i), naive(t[2], rows, i)
        return a and b if t[0] == "and" else a or b
    occ = rows[t[1]][i]
    if t[0] == "has":
        return bool(occ)
    if t[0] in ("in", "not in"):
        hit = any(v == a if b is None else a <= v <= b for v in occ for a, b in t[2])
        return hit if t[0] == "in" else not hit
    if len(t) > 3:                                # CIDR on an IPv4 address (::ffff:a.b.c.d)
        shift = 32 - t[3]
        eq = [v >> shift == t[2] >> shift for v in occ]
    else:
        eq = [v == t[2] for v in occ]
    if t[0] == "==":
        return any(eq)
    if t[0] == "!=":
        return bool(occ) and not any(eq)
    if t[0] == "===":
        return bool(occ) and all(eq)
    if t[0] == "!==":
        return not all(eq)
    return any(_OPS[t[0]](v, t[2]) for v in occ)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(trees())
def test_vectorised_evaluation_equals_a_naive_per_row_evaluation(tree):
    b, rows = _data()
    text = render(tree)
    got = compile_filter(text).mask(b)
    want = np.array([naive(tree, rows, i) for i in range(b.n)], bool)
    assert np.array_equal(got, want), (text, np.flatnonzero(got != want)[:5])


# ------------------------------------------------------------------ dissect and analyze

def _run(*argv) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert main(list(argv), Environment(stdout=out, stderr=err)) == 0, err.getvalue()
    return out.getvalue()


def test_dissect_filter_keeps_frame_numbers_and_times():
    every = _run("dissect", str(CLEAN)).splitlines()
    picked = _run("dissect", str(CLEAN), "-Y", "frame.number in {3, 7}").splitlines()
    assert picked == [every[2], every[6]]
    assert _run("dissect", str(CLEAN), "-c", "5", "-Y", "frame.number > 5") == ""     # -c counts packets read


def test_dissect_fields_header_separator_quote():
    out = _run("dissect", str(CLEAN), "-c", "2", "-T", "fields", "-e", "frame.number", "-e", "ip.addr",
               "-e", "opcode_name", "-E", "header=y", "-E", "separator=;", "-E", "quote=d", "-E", "aggregator=/s")
    head, first, second = out.splitlines()
    assert head == "frame.number;ip.addr;opcode_name"
    assert first.startswith('"1";"') and first.count(";") == 2 and " " in first.split(";")[1]


def test_dissect_hex_dump_as_tshark():
    from roceview.render.detail import hex_dump

    frame = bytes(range(0x41, 0x41 + 20))
    assert hex_dump(frame) == ("0000  41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50   ABCDEFGHIJKLMNOP\n"
                               "0010  51 52 53 54" + " " * 39 + "QRST\n")
    out = _run("dissect", str(CLEAN), "-c", "1", "-x")
    line, blank, first = out.splitlines()[:3]
    assert line.lstrip().startswith("1 ") and blank == "" and first.startswith("0000  ")
    tree = _run("dissect", str(CLEAN), "-c", "1", "-V", "-x", "-Y", "frame.number == 1")
    assert "\n0000  " in tree and tree.startswith("Frame")


def test_analyze_filter_analyses_only_matching_packets():
    import roceview

    whole = roceview.analyze(str(CLEAN), diagnose=False)
    qp = int(whole.flows["dest_qp"].iloc[0]) if "dest_qp" in whole.flows else None
    if qp is None:
        pytest.skip("no dest_qp column in flows")
    one = roceview.analyze(str(CLEAN), diagnose=False, display_filter=f"infiniband.bth.destqp == {qp}")
    assert set(one.flows["dest_qp"].astype(int)) == {qp}
    assert one.flows["packets"].sum() == whole.flows.loc[whole.flows["dest_qp"] == qp, "packets"].sum()


def test_a_filter_outside_the_analysis_projection_decodes_every_column():
    from roceview.packets.read import projection_for

    assert projection_for("analysis", compile_filter("infiniband.bth.psn > 3 && eth.src == 0:0:0:0:0:1".replace(
        "0:0:0:0:0:1", "00:00:00:00:00:01")).fields) == "analysis"
    assert projection_for("analysis", compile_filter("ip.src == 1.2.3.4 && frame.len > 9").fields) == "analysis"
    assert projection_for("analysis", compile_filter("udp.port == 4791").fields) is None


def test_docs_list_every_wireshark_field_and_flag():
    from roceview.filter.field_names import WIRESHARK_NAMES
    from roceview.packets.flags import FLAG_FIELDS

    from conftest import REPO

    docs = (REPO / "docs" / "columns.md").read_text()
    missing = [n for n in WIRESHARK_NAMES + tuple(f"roceview.{f.name}" for f in FLAG_FIELDS) if f"`{n}`" not in docs]
    assert not missing


def test_select_by_take_equals_batch_select():
    b, _ = _data()
    # some rows of every corpus, the samples' alone too (a clone without ../shared): all of theirs are 10/8
    f = compile_filter("ip.addr == 10.0.0.0/8 && frame.number < 50 || infiniband.grh.sgid")
    keep = f.mask(b)
    assert 0 < keep.sum() < b.n
    got, want = f.select(b), b.select(keep)
    assert got.n == want.n and got.cols.keys() == want.cols.keys() and got.valid.keys() == want.valid.keys()
    for k in want.cols:
        assert np.array_equal(got.cols[k], want.cols[k]) and got.cols[k].dtype == want.cols[k].dtype, k
    for k in want.valid:
        assert np.array_equal(got.valid[k], want.valid[k]), k
    assert f.select(b.select(keep)).n == keep.sum()              # all rows match: the same batch


def test_iter_batches_yields_only_matching_rows():
    from roceview.packets.read import iter_batches

    f = compile_filter("infiniband.bth.opcode == 17")
    frames = np.concatenate([x.cols["frame"] for x in iter_batches([str(CLEAN)], display_filter=f)])
    assert frames.tolist() == _frames("infiniband.bth.opcode == 17", _batch(CLEAN))


def test_the_filter_imports_no_ui():
    """The TUI's `/` bar calls roceview.filter: it must not import rich or textual itself."""
    from helpers import house

    paths = sorted((house.REPO / "roceview/filter").glob("*.py")) + [house.REPO / "roceview/packets/flags.py"]
    assert len(paths) >= 5
    graph = house.graph()
    for path in paths:
        name = house.module_name(path)
        assert not {i.imported.split(".")[0] for i in graph if i.importer == name} & {"rich", "textual"}, path




def test_selecting_no_row_gives_an_empty_batch_of_the_same_shapes():
    from roceview.packets.read import iter_batches

    b = Batch.concat(list(iter_batches([str(CLEAN)], prefetch=False)))
    empty = compile_filter("frame.number > 1000000").select(b)
    assert empty.n == 0 and empty.cols.keys() == b.cols.keys()
    for k, v in b.cols.items():
        assert empty.cols[k].shape == (0,) + v.shape[1:] and empty.cols[k].dtype == v.dtype, k
    assert np.array_equal(empty.cols["_src_addr"], b.select(np.zeros(b.n, bool)).cols["_src_addr"])


def test_analyze_filter_matching_nothing_is_an_empty_report_not_a_traceback():
    out, err = io.StringIO(), io.StringIO()
    assert main(["analyze", str(CLEAN), "--filter", "infiniband.lrh"], Environment(stdout=out, stderr=err)) == 0, \
        err.getvalue()
    assert "0 packets" in out.getvalue()
