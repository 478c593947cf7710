"""Screen 1, Overview: the capture summary, a progress bar while loading, the findings coloured
by severity; Enter on a finding shows its frames in Packets (the roceview.finding filter, shown
in the filter bar), or, for a finding that lists none, its flows or its packets from its start;
`f` opens its flows."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, ProgressBar, Static

from roceview.diagnose.evidence_frames import finding_filter
from roceview.tui.base import RoceScreen
from roceview.tui.text import duration, severity_style

FINDING_COLUMNS = ("severity", "kind", "summary")


class OverviewScreen(RoceScreen):
    MODE = "overview"
    BINDINGS = [Binding("f", "flows", "Flows", show=False)]    # in help (?): the footer keeps q Quit
    TITLE_TEXT = "1 Overview"

    def body(self) -> ComposeResult:
        yield Static("loading…", id="summary")
        yield ProgressBar(total=1.0, show_eta=False, id="progress")
        yield DataTable(cursor_type="row", zebra_stripes=False, id="findings")
        yield Static("", id="finding-detail")

    def on_mount(self) -> None:
        table = self.query_one("#findings", DataTable)
        table.add_column("severity", width=8)
        table.add_column("kind", width=20)
        table.add_column("summary")
        self._records: list[dict] = []

    def show(self, snapshot) -> None:
        self.query_one("#summary", Static).update(summary_text(snapshot))
        bar = self.query_one("#progress", ProgressBar)
        bar.display = not snapshot.done and snapshot.fraction is not None   # a stream: no 0 % forever
        if snapshot.fraction is not None:
            bar.update(progress=snapshot.fraction)
        records = snapshot.result.findings_table.records()
        if records != self._records:
            self._fill(records)

    def _fill(self, records: list[dict]) -> None:
        table = self.query_one("#findings", DataTable)
        at = table.cursor_row
        table.clear()
        self._records = records
        for r in records:
            style = severity_style(r["severity"])
            table.add_row(Text(r["severity"], style=style), Text(r["kind"], style=style), r["summary"])
        if records:
            table.move_cursor(row=min(at, len(records) - 1))
        self._describe(table.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._describe(event.cursor_row)

    def _describe(self, row: int) -> None:
        text = ""
        if 0 <= row < len(self._records):
            r = self._records[row]
            text = f"evidence: {r['evidence']}\nadvice: {r['advice']}"
            if r.get("frames"):
                text = f"frames: {r['frames'].replace(';', ', ')}  (Enter shows them)\n" + text
            if r["flows"]:
                text = f"flows: {r['flows']}  ({'f' if r.get('frames') else 'Enter'} opens them)\n" + text
            elif not r.get("frames"):
                text = "Enter opens its packets\n" + text
        self.query_one("#finding-detail", Static).update(text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if not 0 <= event.cursor_row < len(self._records):
            return
        r = self._records[event.cursor_row]
        shown = finding_filter(r)
        if shown is not None:
            from roceview.tui.base import compile_filter

            self.app.apply_filter(shown, compile_filter(shown)[0])
        elif r["flows"]:
            self.app.show_flows([f for f in r["flows"].split(";") if f])
        else:
            start = int(round(float(r["start_ts"] or 0) * 1e9))
            self.app.show_packets(None, f"from the start of {r['kind']}", self.app.index.first_row_at(start))


    def action_flows(self) -> None:
        """f: the highlighted finding's flows in Queue pairs."""
        row = self.query_one("#findings", DataTable).cursor_row
        if 0 <= row < len(self._records) and self._records[row]["flows"]:
            self.app.show_flows([f for f in self._records[row]["flows"].split(";") if f])


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
    out.append(f"  {s.get('roce_packets', 0):,} RoCE  {s.get('flows', 0):,} flows  "
               f"{duration(seconds)}{pps}  {state}\n")
    out.append(f"gaps {d.get('gap_psns', 0):,} PSNs  retx {d.get('retransmitted_packets', 0):,}  "
               f"NAK seq {d.get('naks_seq', 0):,} rnr {d.get('naks_rnr', 0):,}  CE {d.get('ecn_ce', 0):,}  "
               f"CNP {d.get('cnp_packets', 0):,}  pause {d.get('pause_frames', 0):,}")
    for name, value in snapshot.live_stats.items():
        out.append(f"  {name} {value:,}" if isinstance(value, int) else f"  {name} {value}")
    if snapshot.warnings:
        out.append(f"\n{len(snapshot.warnings)} decode warning(s): {snapshot.warnings[0]}", style="yellow")
    return out


def _rate(per_s: float) -> str:
    """43 packets over 250 s is 0.17 pkt/s, not '0 pkt/s'."""
    return f"{per_s:,.0f}" if per_s >= 10 else f"{per_s:.2g}"
