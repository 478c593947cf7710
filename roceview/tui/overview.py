"""Screen 1, Overview: the capture summary, a progress bar while loading, the findings coloured
by severity, and the highlighted finding's whole summary, flows, frames, evidence and advice in a
pane that scrolls (Tab reaches it); Enter on a finding shows its frames in Packets (the
roceview.finding filter, shown in the filter bar), or, for a finding that lists none, its flows
or its packets from its start; `f` opens its flows."""
from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, ProgressBar, Static

from roceview.diagnose.evidence_frames import finding_filter
from roceview.tui.base import RoceScreen
from roceview.tui.text import duration, severity_style
from roceview.units import plural

FINDING_COLUMNS = ("severity", "kind", "summary")
SEVERITY_WIDTH, KIND_WIDTH = 8, 20
CELL_PADDING = 2                  # DataTable pads every cell with a space on each side


class OverviewScreen(RoceScreen):
    MODE = "overview"
    BINDINGS = [Binding("f", "flows", "Flows", show=False)]    # in help (?): the footer keeps q Quit
    TITLE_TEXT = "1 Overview"

    def body(self) -> ComposeResult:
        yield Static("loading…", id="summary")
        yield ProgressBar(total=1.0, show_eta=False, id="progress")
        yield DataTable(cursor_type="row", zebra_stripes=False, id="findings")
        # the whole finding, however long its advice: a pane that scrolls, reached with Tab
        with VerticalScroll(id="finding-pane"):
            yield Static("", id="finding-detail")

    def on_mount(self) -> None:
        self._records: list[dict] = []
        self._width = 0
        self._columns()

    def _columns(self) -> None:
        table = self.query_one("#findings", DataTable)
        table.add_column("severity", width=SEVERITY_WIDTH)
        table.add_column("kind", width=KIND_WIDTH)
        table.add_column("summary", width=self._summary_width())

    def _table_width(self) -> int:
        """The findings' width less a vertical scrollbar's, there or not: many findings add
        one, and rows filled before it came would not fit beside it."""
        table = self.query_one("#findings", DataTable)
        return table.content_region.width - table.styles.scrollbar_size_vertical

    def _summary_width(self) -> int | None:
        """The summary column fills the table's width (the pane below shows it whole): no
        horizontal scrollbar taking a row. None (as wide as its text) before the first layout."""
        rest = self._table_width() - SEVERITY_WIDTH - KIND_WIDTH - 3 * CELL_PADDING
        return rest if rest >= 10 else None

    def on_resize(self, event: events.Resize) -> None:
        super().on_resize(event)
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        """After a layout: the summary column again for the table's new width."""
        width = self._table_width()
        if width != self._width:
            self._width = width
            self._fill(self._records, columns=True)

    def show(self, snapshot) -> None:
        self.query_one("#summary", Static).update(summary_text(snapshot))
        bar = self.query_one("#progress", ProgressBar)
        bar.display = not snapshot.done and snapshot.fraction is not None   # a stream: no 0 % forever
        if snapshot.fraction is not None:
            bar.update(progress=snapshot.fraction)
        records = snapshot.result.findings_table.records()
        if records != self._records:
            self._fill(records)
        if not records and snapshot.done:        # the report's words, not a blank screen
            from roceview.render.report import no_findings

            self._show_text(Text("no findings: " + "; ".join(no_findings(snapshot.result.summary))))

    def _fill(self, records: list[dict], columns: bool = False) -> None:
        table = self.query_one("#findings", DataTable)
        at = table.cursor_row
        table.clear(columns=columns)
        if columns:
            self._columns()
        self._records = records
        width = self._summary_width()
        for r in records:
            style = severity_style(r["severity"])
            table.add_row(Text(r["severity"], style=style), Text(r["kind"], style=style),
                          Text(clip(r["summary"], width)))     # Text: a '[' is not markup
        if records:
            table.move_cursor(row=min(at, len(records) - 1))
        self._describe(table.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self._describe(event.cursor_row):
            self.query_one("#finding-pane", VerticalScroll).scroll_home(animate=False)

    def _describe(self, row: int) -> bool:
        """The pane shows finding `row`; True when that changed what it shows."""
        record = self._records[row] if 0 <= row < len(self._records) else None
        if not self._show_text(detail_text(record) if record else Text()):
            return False
        self.query_one("#finding-pane", VerticalScroll).border_title = keys_hint(record) if record else ""
        return True

    def _show_text(self, text: Text) -> bool:
        """The pane shows `text`; True when that changed it."""
        if text == getattr(self, "_detail", None):
            return False
        self._detail = text
        self.query_one("#finding-detail", Static).update(text)
        return True

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if not 0 <= event.cursor_row < len(self._records):
            return
        r = self._records[event.cursor_row]
        shown = finding_filter(r)
        if shown is not None:
            from roceview.tui.base import compile_filter

            self.app.apply_filter(shown, compile_filter(shown)[0])
        elif r["flows"]:
            self.app.show_flows(_flows(r))
        else:
            start = int(round(float(r["start_ts"] or 0) * 1e9))
            self.app.show_packets(None, f"from the start of {r['kind']}", self.app.index.first_row_at(start))

    def action_flows(self) -> None:
        """f: the highlighted finding's flows in Queue pairs."""
        row = self.query_one("#findings", DataTable).cursor_row
        if 0 <= row < len(self._records) and self._records[row]["flows"]:
            self.app.show_flows(_flows(self._records[row]))


def _flows(record: dict) -> list[str]:
    return [f for f in record["flows"].split(";") if f]


def clip(text: str, width: int | None) -> str:
    """`text` in `width` cells, cut at a space with '…' (a table row: the pane shows it whole);
    a text without a space early enough is cut where it must."""
    if width is None or len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width)
    return (text[:cut] if cut >= width // 2 else text[: width - 1]).rstrip(" ,;:") + "…"


def detail_text(r: dict) -> Text:
    """A finding whole: its summary, flows, frames, evidence and advice. Lists are joined with
    ', ' so that lines wrap between a flow's or a frame's name, never inside one."""
    out = Text()
    out.append(r["summary"], style="bold")
    flows = _flows(r)
    frames = [f for f in (r.get("frames") or "").split(";") if f]
    if flows:
        _field(out, "flows", ", ".join(flows))
    if frames:
        more = int(r.get("frame_count") or len(frames)) - len(frames)
        _field(out, "frames", ", ".join(frames) + (f" (+{more:,} more)" if more > 0 else ""))
    _field(out, "evidence", r["evidence"])
    _field(out, "advice", r["advice"])
    return out


def _field(out: Text, label: str, value: str) -> None:
    out.append(f"\n{label}: ", style="bold")
    out.append(value)


def keys_hint(r: dict) -> str:
    """The pane's title: what Enter and f do for this finding, and Tab to scroll the pane (in
    the title, not the text: a hint wrapped between lines of the finding read as part of it)."""
    frames, flows = bool(r.get("frames")), bool(_flows(r))
    enter = "its frames" if frames else "its flows" if flows else "its packets from its start"
    return " · ".join([f"Enter: {enter}"] + (["f: its flows"] if frames and flows else []) + ["Tab: scroll"])


def summary_text(snapshot) -> Text:
    s = snapshot.result.summary
    d = s.get("detected", {})
    seconds = s.get("duration_ns", 0) / 1e9
    # one rate: the traffic's (packets over the capture's span); how fast roceview reads is
    # the progress bar's business, and beside it a second pkt/s read as a second traffic rate
    read = f" {snapshot.fraction:.0%}" if snapshot.fraction is not None else ""
    state = "loaded" if snapshot.done else f"loading…{read}"
    if snapshot.error:
        state = f"stopped: {snapshot.error}"
    out = Text()
    out.append(f"{snapshot.packets:,} packets", style="bold")
    pps = f"  {_rate(snapshot.packets / seconds)} pkt/s" if seconds > 0 else ""
    out.append(f"  {s.get('roce_packets', 0):,} RoCE  {plural(s.get('flows', 0), 'flow')}  "
               f"{duration(seconds)}{pps}  {state}\n")
    out.append(f"gaps {d.get('gap_psns', 0):,} PSNs  retx {d.get('retransmitted_packets', 0):,}  "
               f"NAK seq {d.get('naks_seq', 0):,} rnr {d.get('naks_rnr', 0):,}  CE {d.get('ecn_ce', 0):,}  "
               f"CNP {d.get('cnp_packets', 0):,}  pause {d.get('pause_frames', 0):,}")
    for name, value in snapshot.live_stats.items():
        out.append(f"  {name} {value:,}" if isinstance(value, int) else f"  {name} {value}")
    if snapshot.warnings:
        out.append(f"\n{plural(len(snapshot.warnings), 'decode warning')}: {snapshot.warnings[0]}", style="yellow")
    return out


def _rate(per_s: float) -> str:
    """43 packets over 250 s is 0.17 pkt/s, not '0 pkt/s'."""
    return f"{per_s:,.0f}" if per_s >= 10 else f"{per_s:.2g}"
