"""Operations commands through the real CLI (click's CliRunner): exit codes, messages and effects."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.project.config import StateConnection
from bot.state.migrations import latest_version
from ops_project import write_ops_project


def _invoke(root, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args], catch_exceptions=False)


def test_dag_writes_self_contained_html_and_svg(tmp_path):
    root = write_ops_project(tmp_path / "ops")
    html = _invoke(root, "dag", str(tmp_path / "out" / "dag.html"))
    assert html.exit_code == 0, html.output
    assert "DAG of 2 model(s) written to" in html.output
    page = (tmp_path / "out" / "dag.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "ops.hourly" in page and "ops.daily" in page
    assert 'data-kind="INCREMENTAL_BY_TIME_RANGE"' in page and 'data-kind="FULL"' in page
    assert page.count('class="edge"') == 1
    assert "<script src" not in page and "https://" not in page and "<link" not in page
    assert page.count('"last": null') == 2   # no state yet: the page says "not built yet" for each model
    assert not (root / ".meshbot" / "state.db").exists()   # and drawing it created none

    svg = _invoke(root, "dag", str(tmp_path / "dag.svg"))
    assert svg.exit_code == 0
    picture = (tmp_path / "dag.svg").read_text()
    assert picture.startswith("<svg") and "<html" not in picture and "ops.daily" in picture


def test_refusals_need_no_spark(tmp_path):
    root = write_ops_project(tmp_path / "ops")
    prod = _invoke(root, "invalidate", "prod")
    assert prod.exit_code == 1 and "Error: `prod` cannot be invalidated" in prod.output
    missing = _invoke(root, "invalidate", "nope")
    assert missing.exit_code == 1 and "environment `nope` does not exist" in missing.output
    run = _invoke(root, "run", "dev")
    assert run.exit_code == 1 and "environment `dev` does not exist" in run.output
    destroy = _invoke(root, "destroy")
    assert destroy.exit_code == 2 and "destroy needs confirmation" in destroy.output
    migrate = _invoke(root, "migrate")
    assert migrate.exit_code == 0
    assert migrate.output.strip() == f"State already at schema version {latest_version()}."


def _tables(root) -> set[str]:
    with sqlite3.connect(root / ".meshbot" / "state.db") as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_run_evaluate_janitor_and_destroy(tmp_path, clean_catalog):
    spark = clean_catalog
    root = write_ops_project(tmp_path / "ops")
    plan = _invoke(root, "plan", "--auto-apply", "--execution-time", "2024-01-02 03:30:00")
    assert plan.exit_code == 0, plan.output

    run = _invoke(root, "run", "--execution-time", "2024-01-02 06:10:00")
    assert run.exit_code == 0, run.output
    assert "[1/1] ops.hourly [2024-01-02 03:00:00 - 2024-01-02 05:59:59]" in run.output
    assert "Run of `prod` finished: 1 batch(es) of 1 model(s) evaluated." in run.output
    again = _invoke(root, "run", "prod", "--execution-time", "2024-01-02 06:10:00")
    assert again.exit_code == 0
    assert "Nothing due in `prod` at 2024-01-02T06:10:00+00:00." in again.output

    evaluated = _invoke(root, "evaluate", "ops.hourly", "--start", "2024-01-05", "--end", "2024-01-05",
                        "--json")
    assert evaluated.exit_code == 0, evaluated.output
    rows = json.loads(evaluated.output)
    assert sorted(row["h"] for row in rows) == list(range(24))
    assert all(str(row["ts"]).startswith("2024-01-05") for row in rows)
    limited = _invoke(root, "evaluate", "ops.daily", "--start", "2024-01-05", "--end", "2024-01-05",
                      "--limit", "1", "--json")
    assert json.loads(limited.output) == [{"hours": 30, "last_ts": "2024-01-02 05:00:00"}]
    assert spark.sql("SELECT COUNT(*) FROM ops.hourly").collect()[0][0] == 30   # nothing written
    unknown = _invoke(root, "evaluate", "ops.nope", "--start", "2024-01-05", "--end", "2024-01-05")
    assert unknown.exit_code == 1 and "unknown model `ops.nope`" in unknown.output

    janitor = _invoke(root, "janitor")
    assert janitor.exit_code == 0 and "Janitor: nothing to clean." in janitor.output

    # destroy waits for a plan in flight (another process's environment lease), then drops everything
    from bot.plan.claims import Claims, environment_key
    from bot.state.connect import connect_state

    writer_state = connect_state(StateConnection(type="sqlite", database=str(root / ".meshbot/state.db")),
                                 project_root=root)
    writer = Claims(writer_state)
    writer.acquire(environment_key("prod"), "plan of `prod` (a teammate's)")
    releaser = threading.Timer(2.0, lambda: writer.release(environment_key("prod")))
    releaser.start()
    started = time.monotonic()
    destroy = _invoke(root, "destroy", "--yes")
    releaser.join()
    writer_state.close()
    assert destroy.exit_code == 0, destroy.output
    assert time.monotonic() - started >= 2.0
    assert "waiting for the plan of `prod` (a teammate's)" in destroy.output
    assert "Dropped view ops.hourly" in destroy.output and "Dropped schema sqlmesh__ops" in destroy.output
    databases = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    assert not {"ops", "sqlmesh__ops"} & databases
    assert not {"snapshots", "environments", "intervals"} & _tables(root)


@pytest.mark.parametrize("args", [("evaluate", "ops.hourly", "--start", "2024-01-01")])
def test_evaluate_needs_both_ends(tmp_path, args):
    result = _invoke(write_ops_project(tmp_path / "ops"), *args)
    assert result.exit_code == 2 and "--end" in result.output


class _Tty:
    """A text stream that says it is a terminal, as a user's shell would."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_progress_is_a_rich_bar_in_a_terminal_and_lines_otherwise():
    import io

    from bot.report.console import TerminalReporter

    tty = _Tty()
    with TerminalReporter(out=tty).progress("Running") as update:
        update("ops.hourly [2024-01-02 03:00:00 - 2024-01-02 05:59:59]", 1, 2)
        update("ops.daily [2024-01-02 - 2024-01-02]", 2, 2)
    drawn = "".join(tty.parts)
    assert "Running: ops.daily" in drawn and "2/2" in drawn and "━" in drawn

    plain = io.StringIO()
    with TerminalReporter(out=plain).progress("Running") as update:
        update("ops.hourly [x]", 1, 2)
        update("ops.daily [y]", 2, 2)
    assert plain.getvalue() == "[1/2] ops.hourly [x]\n[2/2] ops.daily [y]\n"
