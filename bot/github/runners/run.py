"""Scheduled runs: process what each model's cron made due in prod (and the merge environment), reported
in the job summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bot.errors import BotError
from bot.github.runners.base import BotRun, drift_report, error_text, find_drift
from bot.github.runners.notify import notifier_for
from bot.report.markdown import render
from bot.report.notify import Notifier, evaluated_models


@dataclass(frozen=True)
class ModelRun:
    name: str
    batches: int
    start: str          # first interval's start, UTC
    end: str            # last interval's end, UTC


@dataclass(frozen=True)
class EnvironmentRun:
    name: str
    outcome: str        # processed, nothing due, skipped (never deployed), busy or failed (run.md.j2 says it)
    error: str = ""     # why it failed
    busy: str = ""      # who held the environment, for a scheduled run that did not wait
    models: tuple[ModelRun, ...] = ()
    batches: int = 0
    reused: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome != "failed"


@dataclass(frozen=True)
class RunReport:
    gateway: str | None
    environments: tuple[EnvironmentRun, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(env.ok for env in self.environments)

    @property
    def busy(self) -> tuple[EnvironmentRun, ...]:
        return tuple(env for env in self.environments if env.outcome == "busy")


def run_environments(run: BotRun) -> int:
    """`meshbot run` for prod and, when merges deploy elsewhere (staging), that environment too; each one
    independently. Exit 1 when any of them failed."""
    names = list(dict.fromkeys(["prod", run.settings.merge_environment]))
    # A schedule fires again within the hour; a deploy it would wait for can take longer than that
    scheduled = run.event.name == "schedule"
    existing = set(run.context.environment_names())
    notifier = notifier_for(run)
    report = RunReport(gateway=run.settings.gateway,
                       environments=tuple(_run_one(run, name, existing, notifier, skip_when_busy=scheduled)
                                          for name in names))
    run.outputs.set("run_status", "success" if report.ok else "failure")
    run.outputs.summary(render("run.md.j2", report))
    drift = find_drift(run, "prod", run.context.model_versions()) if "prod" in existing else None
    if drift is not None:   # the checkout is the default branch's head: what its next deploy would serve
        run.outputs.summary(drift_report(drift))
        notifier.send("drift_detected", "prod", models=tuple(m.name for m in drift.models),
                      error=render("drift.txt.j2", drift))
    return 0 if report.ok else 1


def _run_one(run: BotRun, name: str, existing: set[str], notifier: Notifier, *,
             skip_when_busy: bool) -> EnvironmentRun:
    if name not in existing:
        return EnvironmentRun(name, "skipped")
    began = time.perf_counter()
    notifier.send("run_start", name)
    try:
        result = run.context.run(name, skip_when_busy=skip_when_busy)
    except BotError as error:
        notifier.failed("run", name, error)
        return EnvironmentRun(name, "failed", error=error_text(error), seconds=time.perf_counter() - began)
    notifier.send("run_end", name, models=evaluated_models(result.evaluated))
    if result.busy:
        return EnvironmentRun(name, "busy", busy=result.busy, seconds=time.perf_counter() - began)
    by_model: dict[str, list[tuple[int, int]]] = {}
    for model, start, end in result.evaluated:
        by_model.setdefault(model, []).append((start, end))
    models = tuple(ModelRun(model, len(spans), _utc(min(s for s, _ in spans)), _utc(max(e for _, e in spans)))
                   for model, spans in sorted(by_model.items()))
    return EnvironmentRun(name, "nothing due" if result.nothing_due else "processed", models=models,
                          batches=len(result.evaluated), reused=len(result.reused),
                          seconds=time.perf_counter() - began)


def _utc(ms: int) -> str:
    """Epoch milliseconds as `2024-01-07 00:00` (UTC).

    >>> _utc(1704585600000)
    '2024-01-07 00:00'
    """
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000))
