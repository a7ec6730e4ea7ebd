"""Spark start-up as one line on stderr: `Starting Spark (...) ... ready in N s`."""

from __future__ import annotations

import sys
import time


class StartLine:
    """Spark start-up as one line on stderr (stdout may be JSON): `Starting Spark (...) ...` when it
    begins, ` ready in N s` (or ` failed after N s`) on the same line when it ends. Nothing when
    `begin` is never called (a warm engine already running is attached to silently)."""

    def __init__(self, text: str, *, begun: bool = False) -> None:
        self.text = text
        self.began: float | None = None
        if begun:
            self.begin()

    def begin(self) -> None:
        self.began = time.monotonic()
        print(f"{self.text} ...", end="", file=sys.stderr, flush=True)

    def __enter__(self) -> "StartLine":
        return self

    def __exit__(self, kind, error, trace) -> None:
        if self.began is not None:
            outcome = "failed after" if kind is not None else "ready in"
            print(f" {outcome} {time.monotonic() - self.began:.1f} s", file=sys.stderr, flush=True)
