"""The CLI's Context: applies, runs, unit tests and audits also tell the config's notification targets."""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING, Sequence

from bot.context import Context
from bot.errors import BotError
from bot.plan.apply import ApplyResult
from bot.plan.definition import Plan, ProgressCallback
from bot.plan.cron_run import RunResult
from bot.quality.results import AuditReport, TestSuiteResult

if TYPE_CHECKING:   # the sender (and Jinja) load only when something is to be told
    from bot.report.notify import Notifier


class NotifyingContext(Context):
    """Context whose operations report to `notification_targets` (the commands stay as they are)."""

    @cached_property
    def notifier(self) -> "Notifier":
        from bot.report.notify import Notifier, Origin

        return Notifier.from_config(self.config, origin=Origin.from_environ(os.environ))

    def apply(self, plan: Plan, *, progress: ProgressCallback | None = None) -> ApplyResult:
        from bot.report.notify import evaluated_models, plan_models

        models = plan_models(plan)
        self.notifier.send("apply_start", plan.environment, models=models)
        try:
            result = super().apply(plan, progress=progress)
        except BotError as error:
            self.notifier.failed("apply", plan.environment, error, models=models)
            raise
        self.notifier.send("apply_end", plan.environment, models=models or evaluated_models(result.evaluated))
        return result

    def run(self, environment: str = "prod", *, execution_time: str | None = None,
            progress: ProgressCallback | None = None, skip_when_busy: bool = False) -> RunResult:
        from bot.report.notify import evaluated_models

        self.notifier.send("run_start", environment)
        try:
            result = super().run(environment, execution_time=execution_time, progress=progress,
                                 skip_when_busy=skip_when_busy)
        except BotError as error:
            self.notifier.failed("run", environment, error)
            raise
        self.notifier.send("run_end", result.environment, models=evaluated_models(result.evaluated))
        return result

    def test(self, *, patterns: Sequence[str] = (), files: Sequence[str] = ()) -> TestSuiteResult:
        result = super().test(patterns=patterns, files=files)
        if not result.passed:
            self.notifier.send("test_failure", models=sorted({t.model for t in result.failures}),
                               error=result.error())
        return result

    def audit(self, *, models: Sequence[str] = (), environment: str | None = None, start: str | None = None,
              end: str | None = None) -> AuditReport:
        report = super().audit(models=models, environment=environment, start=start, end=end)
        failed = report.blocking_failures
        if failed:
            self.notifier.send("audit_failure", environment or "prod", models=sorted({r.model for r in failed}),
                               error="\n".join(r.describe() for r in failed))
        return report
