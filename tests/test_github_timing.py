"""The per-phase timing line and job-summary table of a bot run, and the early Spark start (no Spark here:
a FakeEngine, and a context whose `engine` is a stand-in)."""

from __future__ import annotations

import json
import re
import threading
from functools import cached_property

from bot.github.action import Invocation, main
from bot.github.timing import PHASES, PhaseTimings, TimedContext
from bot.plan.definition import BatchStarted, StillRunning
from bot.report.media import WorkflowCommand
from github_support import FakeEngine, payload


def _run_pr_opened(tmp_path, engine) -> tuple[int, list[str], str]:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload("pull_request/opened.payload.json")))
    out = tmp_path / "out"
    lines: list[str] = []
    code = main(Invocation(event_name="pull_request", event_path=str(path), output_dir=str(out)), env={},
                context_factory=lambda p, g: engine, out=lines.append)
    return code, lines, (out / "summary.md").read_text()


def test_a_pr_run_prints_one_timing_line_and_a_summary_table(tmp_path):
    engine = FakeEngine()
    code, lines, summary = _run_pr_opened(tmp_path, engine)
    assert code == 0
    assert engine.plans and engine.applied            # the FakeEngine still got every call
    timing = [line for line in lines if line.startswith("meshbot timings: ")]
    assert len(timing) == 1
    assert [part.split()[0] for part in timing[0].removeprefix("meshbot timings: ").split(", ")] == \
        [*PHASES, "other", "total"]
    assert "<summary>meshbot timings</summary>" in summary
    for phase in PHASES:
        assert f"| {phase} | " in summary
    assert "| **total** | " in summary


def test_a_run_without_engine_work_prints_no_timing_line(tmp_path):
    raw = payload("pull_request/opened.payload.json")
    raw["pull_request"]["head"]["repo"] = None      # a vanished head repository: nothing to build
    path = tmp_path / "event.json"
    path.write_text(json.dumps(raw))
    lines: list[str] = []
    main(Invocation(event_name="pull_request", event_path=str(path), output_dir=str(tmp_path / "out")), env={},
         context_factory=lambda p, g: FakeEngine(), out=lines.append)
    assert not any(line.startswith("meshbot timings") for line in lines)


class _SlowStartContext:
    """Builds `project` and `engine` like bot.context.Context (cached), recording the threads used."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    @cached_property
    def project(self) -> str:
        self.calls.append("project")
        return "project"

    @cached_property
    def engine(self) -> str:
        self.calls.append(f"engine in {threading.current_thread().name}")
        self.release.wait(5)
        return "engine"

    def load(self) -> None:
        self.project  # noqa: B018

    def start_engine(self) -> None:
        self.engine  # noqa: B018

    def plan(self, environment: str, *, options: object = None) -> str:
        self.calls.append(f"plan {environment}")
        return "plan"

    def test(self, *, patterns: object = (), files: object = ()) -> str:
        self.calls.append(f"test with {self.engine}")
        return "tests"


def test_early_start_builds_the_engine_in_the_background_and_waits_only_where_spark_is_needed():
    context, timings = _SlowStartContext(), PhaseTimings()
    timed = TimedContext(context, timings)
    timed.start_engine()
    assert timed.plan("pr_1") == "plan"              # planning does not wait for Spark
    context.release.set()
    assert timed.test() == "tests"                   # waits for the early start, then uses its engine
    assert "project" in context.calls and "engine in meshbot-spark-start" in context.calls
    assert context.calls[-1] == "test with engine"
    assert context.calls.count("engine in meshbot-spark-start") == 1
    assert timings.seconds["load"] >= 0 and timings.seconds["plan"] > 0 and timings.seconds["tests"] > 0


def test_an_early_start_failure_is_raised_by_the_first_call_that_needs_spark():
    class Broken(_SlowStartContext):
        @cached_property
        def engine(self) -> str:
            raise RuntimeError("no java")

    timed = TimedContext(Broken(), PhaseTimings())
    timed.start_engine()
    assert timed.plan("prod") == "plan"
    try:
        timed.test()
    except RuntimeError as error:
        assert str(error) == "no java"
    else:
        raise AssertionError("the start failure was swallowed")


def test_each_phase_is_folded_in_a_group_with_its_time_and_an_apply_reports_its_batches():
    class Applies(_SlowStartContext):
        def apply(self, plan: object, *, progress=None) -> str:
            progress(BatchStarted("shop.orders [2024-01-01 - 2024-01-02]"), 0, 1)
            progress(StillRunning("shop.orders [2024-01-01 - 2024-01-02] still running (30 s)"), 0, 1)
            progress("shop.orders [2024-01-01 - 2024-01-02]", 1, 1)
            return "applied"

    lines: list[str] = []
    context = Applies()
    context.release.set()
    timed = TimedContext(context, PhaseTimings(), out=lines.append)
    assert timed.plan("pr_1") == "plan" and timed.apply("plan") == "applied"
    groups = [line for line in lines if line.startswith("::")]
    assert groups == ["::group::meshbot: load the project", "::endgroup::", "::group::meshbot: plan", "::endgroup::",
                      "::group::meshbot: apply", "::endgroup::"]
    assert all(isinstance(line, WorkflowCommand) for line in groups)
    assert re.fullmatch(r"plan: done in \d+\.\d s", lines[lines.index("::group::meshbot: plan") + 1])
    applied = lines[lines.index("::group::meshbot: apply") + 1:-2]
    assert applied[0] == "[0/1] shop.orders [2024-01-01 - 2024-01-02] still running (30 s)"
    assert re.fullmatch(r"\[1/1\] shop\.orders \[2024-01-01 - 2024-01-02\]  \d+\.\d\ds", applied[1])
    assert re.fullmatch(r"apply: done in \d+\.\d s", lines[-2])
