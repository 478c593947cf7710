"""Code the tests share: hand-built traffic, the CLI in process, the TUI under Pilot, the import graph."""
