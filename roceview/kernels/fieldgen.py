"""Generate the fused field-extraction kernel from the header declarations.

    python -m roceview.kernels.fieldgen      # rewrites roceview/kernels/_fields_kernel.py
                                             # and stamps fused.py (run after editing
                                             # layers.py or icrc.py too)

The declarations in `dissectors/` are the single source of truth; this turns every
column-bearing field into a few lines of numba code (byte loads, shift, mask), so all
fields of a chunk are extracted in one pass over the packets. The output is committed
(numba can cache only functions that live in a file) and a test checks it is current.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dissectors import ethernet, ib, ip, macctl, tunnel
from dissectors.fields import Field, Header, column_dtype
from roceview.kernels.consts import L3_GRH, L3_IPV4, L3_IPV6, OUT_FIELDS, PROJECTION_CODE, PROJECTIONS

TARGET = Path(__file__).with_name("_fields_kernel.py")
KIND_IPV4, KIND_IPV6, KIND_GRH = L3_IPV4, L3_IPV6, L3_GRH

@dataclass(frozen=True)
class Where:
    """Where a header starts in packet i: an offset slot o[i, slot] (OUT_FIELDS), only when
    meta says the right l3 kind or proto, or an extended header at its per-opcode offset
    after the BTH. Rendered as a numba expression and as a C expression."""
    slot: str
    l3: int | None = None
    proto: str | None = None
    ext: int | None = None

    def numba(self) -> str:
        k = OUT_FIELDS.index(self.slot)
        if self.ext is not None:
            e = f"ext[{self.ext}, opc]"
            return f"(o[i, {k}] + 12 + {e}) if (opc >= 0 and {e} >= 0) else -1"
        if self.l3 is not None:
            return f"o[i, {k}] if meta[i, 1] == {self.l3} else -1"
        if self.proto is not None:
            return f"o[i, {k}] if meta[i, 0] == PROTO_{self.proto.upper()} else -1"
        return f"o[i, {k}]"

    def c(self) -> str:
        o = f"oi[O_{self.slot.upper()}]"
        if self.ext is not None:
            e = f"ext[{self.ext} * 256 + opc]"
            return f"(opc >= 0 && {e} >= 0) ? {o} + 12 + {e} : -1"
        if self.l3 is not None:
            return f"mi[M_L3] == {self.l3} ? {o} : -1"
        if self.proto is not None:
            return f"mi[M_PROTO] == P_{self.proto.upper()} ? {o} : -1"
        return o


# The header declarations placed at the offsets layers.parse_one (or _ckernel.c) finds.
PLACEMENTS: list[tuple[Header, Where]] = [
    (ethernet.ETHERNET, Where("eth")),
    (ethernet.SLL, Where("sll")),
    (ethernet.SLL2, Where("sll2")),
    (ethernet.VLAN, Where("vlan1")),
    (ethernet.INNER_VLAN, Where("vlan2")),
    (ib.LRH, Where("lrh")),
    (ip.IPV4, Where("l3", l3=KIND_IPV4)),
    (ip.IPV6, Where("l3", l3=KIND_IPV6)),
    (ib.GRH, Where("l3", l3=KIND_GRH)),
    (ip.UDP, Where("udp")),
    (ib.BTH, Where("bth")),
] + [(h, Where("bth", ext=k)) for k, h in enumerate(ib.EXT_HEADERS)] + [
    (macctl.PFC, Where("macctl", proto="pfc")),
    (macctl.PAUSE, Where("macctl", proto="pause")),
]

DTYPES = ("u8", "u16", "u32", "u64")


def _dtype_key(f: Field) -> str:
    dt = column_dtype(f)
    return "u8" if dt.kind == "b" else f"u{dt.itemsize * 8}"


def column_layout(projection: str | None = None) -> dict[str, tuple[str, int, int]]:
    """column -> (matrix, row in that matrix, row in the validity matrix); every declared
    column, or those of a projection (consts.PROJECTIONS)."""
    keep = None if projection is None else set(PROJECTIONS[projection])
    layout: dict[str, tuple[str, int, int]] = {}
    counts = {k: 0 for k in DTYPES}
    for header, _ in PLACEMENTS:
        for f in header.columns:
            if f.column in layout or keep is not None and f.column not in keep:
                continue
            key = _dtype_key(f)
            layout[f.column] = (key, counts[key], len(layout))
            counts[key] += 1
    return layout


def _load(f: Field, byte=None, mask_suffix: str = "") -> str:
    """Expression for the field's value at header offset p: big-endian bytes, shift, mask.
    `byte(k)` is one byte load in the target language (numba by default, C for the header)."""
    n = f.nbytes
    if byte is None:
        cast = "np.uint64" if f.bits > 32 or n > 4 else "np.int64"
        byte = lambda k: f"{cast}(buf[p + {k}])"  # noqa: E731
    parts = [f"({byte(f.offset + j)} << {8 * (n - 1 - j)})" if n - 1 - j else byte(f.offset + j) for j in range(n)]
    expr = " | ".join(parts)
    shift = n * 8 - f.bit - f.bits
    if shift:
        expr = f"({expr}) >> {shift}"
    if f.bits < n * 8:
        expr = f"({expr}) & {hex((1 << f.bits) - 1)}{mask_suffix}"
    return expr


def _header_code(header: Header, where: str, layout) -> list[str]:
    fields = [f for f in header.columns if f.column in layout]
    if not fields and header is not ib.BTH:
        return []
    lines = [f"    # {header.name} ({header.spec})", f"    p = {where}", "    if p >= 0:",
             "        room = ce - p"]
    for f in fields:
        key, row, vrow = layout[f.column]
        lines += [f"        if room >= {f.end}:",
                  f"            {key}[{row}, i] = {_load(f)}",
                  f"            ok[{vrow}, i] = True"]
    return lines


def _function_name(projection: str | None) -> str:
    return "extract_one" if projection is None else f"extract_{projection}"


def _numba_function(projection: str | None) -> str:
    layout = column_layout(projection)
    body = []
    for header, where in PLACEMENTS:
        if header.columns:
            body += _header_code(header, where.numba(), layout)
            if header is ib.BTH:
                body += ["        opc = np.int64(buf[p]) if room >= 1 else -1"]
    what = "Every declared column" if projection is None else f"The {projection} projection's columns"
    return FUNCTION.format(name=_function_name(projection), what=what, body="\n".join(body))


def generate() -> str:
    layout = column_layout()
    functions = [_numba_function(p) for p in PROJECTION_CODE]
    counts = {k: sum(1 for v in layout.values() if v[0] == k) for k in DTYPES}
    import hashlib          # generation time only: decode imports this module for its layout

    digest = hashlib.sha256(repr(layout).encode() + "\n".join(functions).encode()).hexdigest()[:16]
    return TEMPLATE.format(functions="\n\n".join(functions), layout=repr(layout), counts=repr(counts),
                           digest=digest)


TEMPLATE = '''"""GENERATED by roceview/kernels/fieldgen.py from the declarations in dissectors/.
Do not edit: change a declaration and run `python -m roceview.kernels.fieldgen`."""
import numba as nb
import numpy as np

from roceview.kernels.consts import PROTO_CODE

DIGEST = "{digest}"
PROTO_PFC = PROTO_CODE["pfc"]
PROTO_PAUSE = PROTO_CODE["pause"]
# column -> (matrix, row, validity row)
LAYOUT = {layout}
COUNTS = {counts}


{functions}
'''

FUNCTION = '''
@nb.njit(cache=True, nogil=True, boundscheck=False)
def {name}(buf, i, o, meta, ce, ext, u8, u16, u32, u64, ok):
    """{what} of packet i (ce: end of its captured bytes)."""
    opc = -1
{body}'''


C_TARGET = Path(__file__).with_name("_fields_kernel.h")


def _load_c(f: Field) -> str:
    return _load(f, lambda k: f"(uint64_t)buf[p + {k}]", "ULL")


def _header_c(header: Header, where: Where, layout) -> list[str]:
    fields = [f for f in header.columns if f.column in layout]
    if not fields and header is not ib.BTH:
        return []
    lines = [f"    /* {header.name} ({header.spec}) */", f"    p = {where.c()};", "    if (p >= 0) {",
             "        room = ce - p;"]
    for f in fields:
        key, row, vrow = layout[f.column]
        lines += [f"        if (room >= {f.end}) {{",
                  f"            {key}[{row} * n + i] = (uint{key[1:]}_t)({_load_c(f)});",
                  f"            ok[{vrow} * n + i] = 1;",
                  "        }"]
    if header is ib.BTH:
        lines.append("        opc = room >= 1 ? (int64_t)buf[p] : -1;")
    return lines + ["    }"]


def _c_constants() -> list[str]:
    """Every number the C kernel shares with Python, from the one place each is declared."""
    from roceview.kernels.consts import PROTO_CODE
    from roceview.kernels import consts

    named = {f"P_{k.upper()}": v for k, v in PROTO_CODE.items()}
    named |= {f"O_{k.upper()}": i for i, k in enumerate(consts.OUT_FIELDS)}
    named |= {f"M_{k.upper()}": i for i, k in enumerate(consts.META_FIELDS)}
    named |= {"N_OUT": len(consts.OUT_FIELDS), "N_META": len(consts.META_FIELDS)}
    named |= {k: getattr(consts, k) for k in dir(consts) if k.isupper() and isinstance(getattr(consts, k), int)}
    named |= {k: getattr(ethernet, k) for k in dir(ethernet) if k.startswith("ETHERTYPE_")}
    named |= {k: getattr(macctl, k) for k in dir(macctl) if k.startswith("MACCTL_OPCODE_")}
    named |= {"IPPROTO_UDP": ip.IPPROTO_UDP, "IPPROTO_GRE": ip.IPPROTO_GRE, "VXLAN_UDP_PORT": tunnel.VXLAN_UDP_PORT}
    hexa = ("ETHERTYPE_", "MACCTL_OPCODE_")
    return [f"#define {k} {v:#06x}" if k.startswith(hexa) else f"#define {k} {v}" for k, v in sorted(named.items())]


def _c_function(projection: str | None) -> str:
    layout = column_layout(projection)
    body = []
    for header, where in PLACEMENTS:
        if header.columns:
            body += _header_c(header, where, layout)
    what = "Every declared column" if projection is None else f"The {projection} projection's columns"
    return C_FUNCTION.format(name=_function_name(projection), what=what, body="\n".join(body))


def generate_c() -> str:
    return C_TEMPLATE.format(constants="\n".join(_c_constants()),
                             functions="\n\n".join(_c_function(p) for p in PROJECTION_CODE),
                             digest=generate().split('DIGEST = "')[1][:16])


C_TEMPLATE = """/* GENERATED by roceview/kernels/fieldgen.py from the declarations in dissectors/ and the
   constants in roceview/kernels/consts.py. Do not edit: run `python -m roceview.kernels.fieldgen`.
   digest {digest} (same layout as _fields_kernel.py) */
#include <stdint.h>

{constants}

{functions}
"""

C_FUNCTION = """/* {what} of packet i (ce: end of its captured bytes). Matrices are
   (rows, n) C-ordered: column `row` of packet i is at row * n + i. */
static inline void {name}(const uint8_t *buf, int64_t i, int64_t n, const int64_t *oi, const int64_t *mi,
                               int64_t ce, const int64_t *ext, uint8_t *u8, uint16_t *u16, uint32_t *u32,
                               uint64_t *u64, uint8_t *ok)
{{
    int64_t opc = -1, p, room;
{body}
}}"""


FUSED = Path(__file__).with_name("fused.py")
FUSED_DEPENDENCIES = ("_fields_kernel.py", "layers.py", "icrc.py", "walk.py", "consts.py")
_STAMP = "# numba dependency digest: "


def dependency_digest() -> str:
    """numba caches decode_records (fused.py) with everything it calls compiled in, but keys
    the cache by the content of fused.py alone: a stale kernel would survive an edit of
    layers.py, icrc.py or the generated kernel (and a package upgrade). fused.py therefore
    carries a digest of those files; a test checks it is current."""
    import hashlib

    h = hashlib.sha256()
    for name in FUSED_DEPENDENCIES:
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()[:16]


def stamp_fused() -> None:
    lines = [ln for ln in FUSED.read_text().splitlines() if not ln.startswith(_STAMP)]
    lines.append(_STAMP + dependency_digest())
    FUSED.write_text("\n".join(lines) + "\n")


def fused_stamp() -> str:
    return next((ln[len(_STAMP):] for ln in FUSED.read_text().splitlines() if ln.startswith(_STAMP)), "")


def main() -> None:
    TARGET.write_text(generate())
    C_TARGET.write_text(generate_c())
    stamp_fused()
    print(f"wrote {TARGET}, {C_TARGET.name} and stamped {FUSED.name}")


if __name__ == "__main__":
    main()
