"""The columns a packet filter may name that no packet decodes to by itself, as `dissect` adds
them: the finding kinds a frame is evidence for (`roceview.finding`) and the RDMA operation a
packet belongs to (`roceview.op.*`), each known only from the whole capture."""
from __future__ import annotations


def finding_kinds(app, display_filter):
    """roceview.finding: the findings' evidence frames as the last snapshot has them (the
    findings of what is loaded so far); None when the filter does not name the field."""
    from roceview.packets.flags import FINDING_COLUMN

    snapshot = app.snapshot
    if FINDING_COLUMN not in getattr(display_filter, "fields", ()) or snapshot is None:
        return None
    from roceview.diagnose.evidence_frames import kinds_by_frame

    return kinds_by_frame(snapshot.result)


class Operations:
    """roceview.op.*: every operation's row, from a pass over the capture files as dissect's
    first pass makes it (analysis/op_marks.py), kept for the files it was made of."""

    def __init__(self):
        self.files, self.index = None, None

    def operations(self, app, display_filter):
        """The operation index to annotate decoded rows with; None when the filter names no
        operation field. A live capture has no files to read again: it says so."""
        from roceview.filter.field_names import OP_COLUMNS

        if not (set(getattr(display_filter, "fields", ())) & OP_COLUMNS):
            return None
        files = tuple(app.index.files)
        if not files:
            raise ValueError("roceview.op fields need the operations of the whole capture: a capture file, "
                             "not a live one")
        if self.files != files:
            from roceview.analysis.op_marks import operation_index

            self.files, self.index = files, operation_index(list(files))
        return self.index
