"""The app's stylesheet (in a module, not a .tcss file: no package-data entry to keep)."""

CSS = """
.screen-title { background: $primary; color: $text; text-style: bold; padding: 0 1; height: 1; }
#summary { height: auto; padding: 0 1; }
#progress { height: 1; padding: 0 1; }
#findings { height: auto; max-height: 45%; }
#finding-pane { height: 1fr; min-height: 3; border-top: solid $primary-darken-2; border-title-color: $text-muted; }
#finding-pane:focus { border-top: solid $accent; border-title-color: $text; }
#finding-detail { height: auto; padding: 0 1; }
#qp-status, #packets-status, #pfc-status { height: 1; padding: 0 1; color: $text-muted; }
#qps { height: 1fr; }
#qps-header { height: 1; background: $boost; }
#qp-top { height: auto; max-height: 18; }
#qp-counters { width: 44; height: auto; max-height: 18; }
#qp-sparks { width: 1fr; height: auto; padding: 0 1; }
#qp-sparks Sparkline { height: 2; }
#qp-ladder { height: auto; padding: 0 1; }
#qp-legend { height: 1; padding: 0 1; color: $text-muted; }
#qp-events { height: auto; max-height: 12; }
#packet-detail { height: 45%; border-top: solid $primary; }
#packet-tree { width: 1fr; }
#packet-hex { width: 43; padding: 0 1; }
#pfc { height: auto; max-height: 50%; }
#pfc-timeline { height: auto; padding: 0 1; }
FilterBar { dock: bottom; height: auto; margin-bottom: 1; }
#filter-message { color: $error; padding: 0 1; height: auto; }
HelpScreen { align: center middle; }
#help-text { width: auto; max-width: 78; height: auto; border: round $primary; padding: 1 2; background: $surface; }
"""
