"""Stop at the next step on SIGINT/SIGTERM: the handler only sets a flag, the loop checks it every step and
all ranks agree via dist.any(), so every rank stops at the same step and rank 0 leaves a checkpoint."""
from __future__ import annotations

import contextlib
import signal
import threading


class StopFlag:
    """Set by SIGINT/SIGTERM."""

    def __init__(self):
        self.requested = False
        self.signal: str | None = None

    def handler(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: the way out if a step hangs
        self.requested, self.signal = True, signal.Signals(signum).name


@contextlib.contextmanager
def caught():
    """`with caught() as flag:` SIGINT/SIGTERM set `flag` instead of interrupting (main thread only; the old
    handlers come back at the end). The training loop and the `nmtkit train --np` driver both stop this way."""
    flag = StopFlag()
    old = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, flag.handler)
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def stop_on_signals(stack: contextlib.ExitStack) -> StopFlag:
    """caught() for the length of `stack`."""
    return stack.enter_context(caught())
