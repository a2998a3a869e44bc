"""Host-side stall finder for the training loop (run.stall_dump_s): if a step is still running after a timeout,
write every thread's Python stack to a file, in faulthandler's format.

Why not faulthandler.dump_traceback_later: its watchdog walks the other threads' states without the GIL, and a
thread exiting meanwhile (the datasets split generator and the tokenizer start and stop threads at a run's first
step) frees a state under it: a clean-clone CI run died with SIGSEGV in tests/test_pretrain.py's 1 ms stall dump
(2026-12-01; 4 of 4 isolated reruns passed). This timer thread takes the GIL and reads sys._current_frames(), so
a stack it prints is whole; the price is that a step stuck in C code that holds the GIL is dumped only when it lets
go of it.
"""

from __future__ import annotations

import datetime
import sys
import threading
import traceback
from typing import TextIO


class StallWatch:
    """arm(step) before a step, disarm() after it; a step still running `timeout_s` after arm gets one dump."""

    def __init__(self, timeout_s: float, file: TextIO):
        self.timeout_s, self.file = timeout_s, file
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()  # a dump in progress finishes before disarm returns

    def arm(self, step: int) -> None:
        self.disarm()
        self.file.write(f"step {step} started\n")
        self.file.flush()
        self._timer = threading.Timer(self.timeout_s, self._dump)
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with self._lock:
                self._timer = None

    def _dump(self) -> None:
        with self._lock:
            if threading.current_thread() is not self._timer:  # disarmed (or re-armed) while this one fired
                return
            me = threading.get_ident()
            lines = [f"Timeout ({datetime.timedelta(seconds=self.timeout_s)})!\n"]
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                lines.append(f"\nThread 0x{ident:016x} (most recent call first):\n")
                for entry in reversed(traceback.extract_stack(frame)):
                    lines.append(f'  File "{entry.filename}", line {entry.lineno} in {entry.name}\n')
            self.file.write("".join(lines))
            self.file.flush()
