# Ctrl-C from the first line roceview runs: exit 130, no traceback (roceview/interrupt.py).
from roceview import interrupt

interrupt.install()

from roceview.cli import entry  # noqa: E402  (after the handler: the imports can be interrupted)

if __name__ == "__main__":
    entry()
