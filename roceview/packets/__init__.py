"""The packets table: capture records decoded into Batches of numpy columns, and the forms
they take.

- `batch`: one chunk of the table as numpy columns, the pipeline's unit of work;
- `decode`: RecordChunk -> Batch (the kernels, then the rare protocols in Python);
- `read`: the one read pipeline (open the files, merge them in time, decode, batch) that the
  API, the TUI, `live` and both engines use;
- `merge`: several files merged in time order, as mergecap does;
- `table`: Batch -> pandas DataFrame with the documented columns (docs/columns.md);
- `flags`: the per-packet analysis flag bits, `names`: flow, address and MAC text;
- `parquet`, `wire`: the table as a Parquet dataset, and packed for a trip between processes.
"""
