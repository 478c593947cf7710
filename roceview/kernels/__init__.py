"""The compiled and generated decode code, the lowest stage of the pipeline.

The C kernels (`_ckernel.c`: record walks, header offsets, every declared field, ICRC; the
analysis's flow index `_flowindex.c`; the CSV cell text `_celltext.c`) are built at install into
one extension, `roceview.kernels._ckernel`; `backend` loads it, or the numba fallback (`walk`,
`layers`, `fused`, `icrc`). `fieldgen` generates the field extraction (`_fields_kernel.py`,
`_fields_kernel.h`) from the header declarations in `dissectors/`. Nothing here imports from
another roceview stage.
"""
