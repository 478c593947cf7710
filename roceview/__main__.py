# Ctrl-C from the first line roceview runs: exit 130, no traceback (roceview/interrupt.py).
# Until interrupt.install() replaces it, a bare handler exits 130: nothing to clean up yet, and
# a signal between roceview.interrupt's import and its install would be Python's KeyboardInterrupt.
import os as _os
import signal as _signal

if _signal.getsignal(_signal.SIGINT) is not _signal.SIG_IGN:   # an ignored SIGINT stays ignored (`cmd &`)
    _signal.signal(_signal.SIGINT, lambda *_: _os._exit(130))

from roceview import interrupt  # noqa: E402

interrupt.install()

from roceview.cli import entry  # noqa: E402  (after the handler: the imports can be interrupted)

if __name__ == "__main__":
    entry()
