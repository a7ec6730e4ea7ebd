"""Long work speaks: a running batch sends a heartbeat (model, interval, elapsed), a finished batch's line
carries its duration, the CLI's phases print start and end lines outside a terminal, and a failing unit
test is printed once. Real SQLite state; no Spark (a runner that waits stands in for a long Spark job)."""

from __future__ import annotations

import io
import re
import threading

from click.testing import CliRunner

from bot.cli.app import cli
from bot.context import Context
from bot.plan.batch import BatchWriter
from bot.plan.definition import StillRunning
from bot.plan.workspace import Workspace
from bot.project.example import write_example
from bot.quality.results import TestResult, TestSuiteResult
from bot.report.console import TerminalReporter, progress_lines
from bot.snapshot import Fingerprint, Snapshot

DAY = 86_400_000


class _WaitsForHeartbeats:
    """A batch that runs until it has been reported as still running twice."""

    def __init__(self) -> None:
        self.beats = threading.Semaphore(0)

    def evaluate(self, snapshot, model, *, table, interval, table_mapping, execution_time) -> None:
        for _ in range(2):
            assert self.beats.acquire(timeout=30), "no heartbeat while the batch ran"

    def audit(self, snapshot, model, *, table, interval, execution_time, table_mapping=None):
        return ()


def test_a_running_batch_sends_heartbeats_and_its_line_gives_its_duration(sqlite_state):
    runner = _WaitsForHeartbeats()
    lines: list[str] = []
    show = progress_lines(lines.append)

    def notice(line: str) -> None:   # as the evaluator passes the writer's notices on
        show(line, 0, 1)
        if isinstance(line, StillRunning):
            runner.beats.release()

    writer = BatchWriter(state=sqlite_state, runner=runner, notice=notice, heartbeat_s=0.01)
    snapshot = Snapshot(name="db.events", fingerprint=Fingerprint("v1", "m"), version="v1",
                        kind="INCREMENTAL_BY_TIME_RANGE", definition={}, rendered_query="")
    writer.run(snapshot=snapshot, model=None, table="t", batch=(0, DAY), mapping={}, execution_time=0)
    show("db.events [1970-01-01 - 1970-01-01]", 1, 1)   # the evaluator's line for the finished batch

    beats = [line for line in lines if "still running" in line]
    assert len(beats) >= 2
    assert re.fullmatch(r"\[0/1\] db\.events \[1970-01-01 00:00, 1970-01-02 00:00\) still running \(\d+ s\)",
                        beats[0])
    assert re.fullmatch(r"\[1/1\] db\.events \[1970-01-01 - 1970-01-01\]  \d+\.\d\ds", lines[-1])
    assert not any(line.startswith("[0/1] db.events [1970-01-01 00:00, 1970-01-02 00:00)") and "still" not in line
                   for line in lines)   # a batch's start is no line of its own
    # the batch is recorded once its heartbeats stopped
    assert sqlite_state.get_intervals([("db.events", "v1")])[("db.events", "v1")].intervals


def test_phases_print_start_and_end_lines_outside_a_terminal_only():
    err = io.StringIO()
    reporter = TerminalReporter(out=io.StringIO(), err=err)
    with reporter.phase("Planning `dev`"):
        pass
    start, end = err.getvalue().splitlines()
    assert start == "Planning `dev` ..." and re.fullmatch(r"Planning `dev`: done in \d+\.\d s", end)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet = io.StringIO()
    with TerminalReporter(out=Terminal(), err=quiet).phase("Planning `dev`"):
        pass
    with TerminalReporter(out=io.StringIO(), err=quiet, json_mode=True).phase("Planning `dev`"):
        pass
    assert quiet.getvalue() == ""


def test_a_failing_unit_test_is_printed_once_by_plan_and_test(tmp_path, monkeypatch):
    root = tmp_path / "shop"
    write_example(root)
    message = ("test_customer_revenue (tests/test_customer_revenue.yaml:1) on model shop.customer_revenue: "
               "query: 1 expected row(s) missing")
    failed = TestSuiteResult(results=(
        TestResult(name="test_customer_revenue", file=root / "tests/test_customer_revenue.yaml",
                   model="shop.customer_revenue", passed=False, message=message),), seconds=0.1)
    monkeypatch.setattr(Context, "test", lambda self, **_: failed)
    monkeypatch.setattr(Workspace, "_new_engine", lambda self, **_: (_ for _ in ()).throw(AssertionError("Spark")))

    for args in (["plan", "dev", "--auto-apply"], ["test"]):
        result = CliRunner().invoke(cli, ["-p", str(root), *args])
        assert result.exit_code == 1, result.output
        assert result.output.count("1 expected row(s) missing") == 1, result.output
        assert result.output.count("test_customer_revenue (") == 1, result.output
        assert f"FAIL {message}" in result.output
    planned = CliRunner().invoke(cli, ["-p", str(root), "plan", "dev", "--auto-apply"])
    assert "Error: 1 of 1 unit test(s) failed (shown above); fix them, or plan with --skip-tests" in planned.output
    assert "Loading the project ..." in planned.output and "Running the unit tests: done in " in planned.output
