from roceview.cli import entry

entry()
