"""Per-phase wall time of one bot run (load, spark, tests, plan, apply, diff, comment), and the early
Spark start that overlaps the session's launch with loading the project.

`TimedContext` and `TimedGithub` wrap the engine context and the GitHub port a runner gets: every call
is timed into its phase, everything else is passed through unchanged. The line printed at the end of
a run (`meshbot timings: ...`) and the job summary table come from the same `PhaseTimings`.

>>> timings = PhaseTimings()
>>> timings.add("plan", 1.25); timings.add("plan", 0.5); timings.add("tests", 2.0)
>>> timings.line(total=4.0)
'meshbot timings: load 0.0 s, spark 0.0 s, tests 2.0 s, plan 1.8 s, apply 0.0 s, diff 0.0 s, comment 0.0 s, other 0.2 s, total 4.0 s'
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

PHASES = ("load", "spark", "tests", "plan", "apply", "diff", "comment")

# EngineContext methods -> phase; methods not listed are passed through untimed.
_CONTEXT_PHASES = {"test": "tests", "plan": "plan", "apply": "apply", "preview_diff": "diff",
                   "table_diff": "diff", "invalidate": "apply", "environments": "plan"}
# Calls that read the project: it is parsed first, timed as `load` (others, e.g. invalidate, never parse).
_LOADS_PROJECT = frozenset({"test", "plan", "apply", "preview_diff", "table_diff", "view_name", "audit",
                            "render", "evaluate"})
# Calls that never need Spark: they do not wait for the early start.
_NO_SPARK = frozenset({"plan", "environments", "view_name", "machine_local_storage", "config", "gateway",
                       "project", "models", "path", "gateway_name", "state", "rendered_queries"})


@dataclass
class PhaseTimings:
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    started: float = field(default_factory=time.perf_counter)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def total(self) -> float:
        return time.perf_counter() - self.started

    def rows(self, total: float | None = None) -> list[tuple[str, float]]:
        total = self.total() if total is None else total
        rows = [(name, self.seconds.get(name, 0.0)) for name in PHASES]
        rows.append(("other", max(0.0, total - sum(s for _, s in rows))))
        rows.append(("total", total))
        return rows

    def line(self, total: float | None = None) -> str:
        return "meshbot timings: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.rows(total))


class TimedContext:
    """An engine context whose calls are timed per phase; optionally starts Spark early in a thread.

    Loading the project (parsing, on the first plan or test) is timed as `load`, the session start as
    `spark` (when started early, only the part the run had to wait for), each Spark-using call waits
    for the early start to finish first.
    """

    def __init__(self, context: Any, timings: PhaseTimings) -> None:
        self._context = context
        self._timings = timings
        self._starter: threading.Thread | None = None
        self._start_error: BaseException | None = None

    def start_engine_early(self) -> None:
        """Launch the Spark session in the background (a real Context only); errors surface on first use."""
        if self._starter is not None or "engine" in getattr(self._context, "__dict__", {}) or \
                not hasattr(type(self._context), "engine"):
            return

        def start() -> None:
            try:
                self._context.engine   # noqa: B018 - builds the cached session
            except BaseException as error:   # noqa: BLE001 - re-raised by the first call that needs it
                self._start_error = error

        self._starter = threading.Thread(target=start, name="meshbot-spark-start", daemon=True)
        self._starter.start()

    def _wait_for_engine(self) -> None:
        if self._starter is None:
            return
        with self._timings.phase("spark"):
            self._starter.join()
        self._starter = None
        if self._start_error is not None:
            error, self._start_error = self._start_error, None
            raise error

    def _load(self) -> None:
        """Parse the project once, timed as `load` (a real Context builds it lazily on first use)."""
        if "project" in getattr(self._context, "__dict__", {}) or not hasattr(type(self._context), "project"):
            return
        with self._timings.phase("load"):
            self._context.project   # noqa: B018

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._context, name)
        if not callable(value) or name.startswith("_"):
            return value
        phase = _CONTEXT_PHASES.get(name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if name in _LOADS_PROJECT:
                self._load()
            if name not in _NO_SPARK:
                self._wait_for_engine()
            if phase is None:
                return value(*args, **kwargs)
            with self._timings.phase(phase):
                return value(*args, **kwargs)

        return timed


class TimedGithub:
    """The GitHub port (API client or local folder) with every call timed as `comment`."""

    def __init__(self, github: Any, timings: PhaseTimings) -> None:
        self._github = github
        self._timings = timings

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._github, name)
        if not callable(value) or name.startswith("_"):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self._timings.phase("comment"):
                return value(*args, **kwargs)

        return timed
