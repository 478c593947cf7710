"""A chunk of the packets table as plain numpy columns (the pipeline's unit of work).

Every column of the packets table (see docs/columns.md) is a numpy array of length `n`;
`valid[name]` is a bool array marking rows where the value exists (a missing entry in
`valid` means the column is valid on every row). Analysis code works on these arrays
directly; `to_dataframe()` turns a batch into the public pandas form with nullable
dtypes and categorical strings.

Raw helper columns (not in the public table, prefixed `_`):
  `_src_addr`, `_dst_addr`: (n, 16) uint8 addresses (IPv4 as ::ffff:a.b.c.d, GIDs as is)
  `_src_mac`, `_dst_mac`: uint64 (48-bit MAC in the low bits)
  `_proto`: uint8 code into PROTO_NAMES; `_opcode`: uint8 (valid where BTH present)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roceview.kernels.consts import PROTO_CODE, PROTO_NAMES  # noqa: F401  (the codes the kernels write)


@dataclass
class Batch:
    n: int
    cols: dict[str, np.ndarray] = field(default_factory=dict)
    valid: dict[str, np.ndarray] = field(default_factory=dict)

    def col(self, name: str) -> np.ndarray:
        return self.cols[name]

    def mask(self, name: str) -> np.ndarray:
        m = self.valid.get(name)
        return np.ones(self.n, dtype=bool) if m is None else m

    def select(self, rows: np.ndarray) -> "Batch":
        """Rows by boolean mask or index array."""
        cols = {k: v[rows] for k, v in self.cols.items()}
        valid = {k: v[rows] for k, v in self.valid.items()}
        n = len(next(iter(cols.values()))) if cols else 0
        return Batch(n, cols, valid)

    @staticmethod
    def concat(batches: list["Batch"]) -> "Batch":
        batches = [b for b in batches if b.n]
        if not batches:
            return Batch(0)
        names = batches[0].cols.keys()
        cols = {k: np.concatenate([b.cols[k] for b in batches]) for k in names}
        vnames = set().union(*(b.valid.keys() for b in batches))
        valid = {k: np.concatenate([b.mask(k) for b in batches]) for k in vnames}
        return Batch(sum(b.n for b in batches), cols, valid)
