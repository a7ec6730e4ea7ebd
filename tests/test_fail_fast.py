"""What can be decided without Spark is decided before Spark starts: each of these commands answers from the
project's files and the state alone, and a test fails if any of them builds a Spark engine.

The state is what a plan stores (snapshots, a promoted environment, recorded intervals), written here without
Spark: bot.plan builds plans without it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli.app import cli
from bot.context import Context
from bot.plan.definition import PlanOptions
from bot.plan.workspace import Workspace
from bot.project.example import write_example
from bot.state.protocol import Environment, EnvironmentSnapshot


@pytest.fixture
def no_spark(monkeypatch):
    def refuse(self, **_):
        raise AssertionError("Spark was started")
    monkeypatch.setattr(Workspace, "_new_engine", refuse)


def _deployed(root: Path) -> Context:
    """The example as a prod plan leaves it: snapshots stored, prod promoted and finalized, every interval
    the plan backfills recorded."""
    write_example(root)
    context = Context(root)
    plan = context.plan("prod")
    state = context.state
    state.push_snapshots(plan.new_snapshots)
    for backfill in plan.backfills:
        snapshot = plan.snapshots[backfill.snapshot_id.name]
        for interval in backfill.intervals:
            state.add_interval(snapshot.name, snapshot.version, interval)
    listed = tuple(EnvironmentSnapshot(name=s.name, identifier=s.identifier, version=s.version, kind=s.kind,
                                       table_name=s.table_name) for s in plan.snapshots.values())
    state.promote(Environment(name="prod", snapshots=listed, plan_id=plan.plan_id), expected_plan_id=None)
    state.finalize("prod", plan.plan_id)
    return context


def _meshbot(root: Path, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args])


def test_a_run_with_nothing_due_says_so_without_spark(tmp_path, no_spark):
    root = tmp_path / "shop"
    _deployed(root)
    result = _meshbot(root, "run", "--execution-time", "2024-01-08")
    assert result.exit_code == 0, result.output
    assert "Nothing due in `prod` at 2024-01-08" in result.output


def test_a_run_that_has_work_starts_spark(tmp_path, no_spark):
    """The other side of the check: with a day of `shop.orders` missing, the run goes to Spark for it."""
    root = tmp_path / "shop"
    context = _deployed(root)
    orders = context.state.get_environment("prod").by_name()["shop.orders"]
    day = 86_400_000
    end = context.state.get_intervals([(orders.name, orders.version)])[(orders.name, orders.version)].intervals[-1][1]
    context.state.remove_intervals(orders.name, orders.version, (end - day, end))
    result = _meshbot(root, "run", "--execution-time", "2024-01-08")
    assert result.exit_code != 0
    assert "Spark was started" in result.output


def test_unknown_environments_are_named_with_those_that_exist_without_spark(tmp_path, no_spark):
    root = tmp_path / "shop"
    _deployed(root)
    for args in (["table_diff", "prod:nope", "shop.orders"], ["run", "nope"], ["invalidate", "nope"],
                 ["rollback", "nope"]):
        result = _meshbot(root, *args)
        assert result.exit_code == 1, (args, result.output)
        assert "environment `nope` does not exist (environments: prod)" in result.output, (args, result.output)


def test_a_rollback_to_a_plan_never_served_is_refused_without_spark(tmp_path, no_spark):
    root = tmp_path / "shop"
    _deployed(root)
    result = _meshbot(root, "rollback", "prod")
    assert result.exit_code == 1
    assert "is the first it served, so there is no previous plan" in result.output
    result = _meshbot(root, "rollback", "prod", "--to", "abc123")
    assert result.exit_code == 1
    assert "to plan abc123: it is not in the environment's history" in result.output


def test_a_column_no_parent_has_stops_the_plan_with_file_line_and_column_before_spark(tmp_path, no_spark):
    root = tmp_path / "shop"
    context = _deployed(root)
    path = root / "models" / "customer_revenue.sql"
    text = path.read_text()
    path.write_text(text.replace("SUM(o.amount) AS revenue", "SUM(o.amont) AS revenue"))
    line = next(n for n, row in enumerate(path.read_text().splitlines(), 1) if "o.amont" in row)
    column = path.read_text().splitlines()[line - 1].index("amont") + 1
    before = context.state.get_environment("prod")

    result = _meshbot(root, "plan", "dev", "--auto-apply")
    assert result.exit_code == 1
    assert f"models/customer_revenue.sql:{line}:{column}: error [ambiguousorinvalidcolumn] model " \
           "shop.customer_revenue: Unknown column: amont" in result.output
    assert "nothing was run" in result.output
    after = Context(root)
    assert after.state.get_environment_names() == ["prod"]
    assert after.state.get_environment("prod") == before


def test_a_project_whose_linter_is_on_is_checked_by_its_own_rules(tmp_path, no_spark):
    """`ignored_rules` turns the check off, as in SQLMesh; then Spark is where the query fails."""
    root = tmp_path / "shop"
    _deployed(root)
    config = root / "config.yaml"
    config.write_text(config.read_text() + "linter:\n  enabled: true\n  ignored_rules: [ambiguousorinvalidcolumn]\n")
    path = root / "models" / "customer_revenue.sql"
    path.write_text(path.read_text().replace("SUM(o.amount) AS revenue", "SUM(o.amont) AS revenue"))
    plan = Context(root).plan("dev", options=PlanOptions(skip_tests=True))
    assert [c.name for c in plan.changes if c.snapshot is not None and c.name.endswith("customer_revenue")]


def test_a_column_of_an_embedded_parent_resolves_through_it(tmp_path, no_spark):
    """An EMBEDDED model is inlined: the query reads its parents' tables, whose columns are what count."""
    root = tmp_path / "shop"
    write_example(root)
    (root / "models" / "big_orders.sql").write_text(
        "MODEL (name shop.big_orders, kind EMBEDDED);\nSELECT order_id, amount FROM shop.orders WHERE amount > 10\n")
    (root / "models" / "big_order_count.sql").write_text(
        "MODEL (name shop.big_order_count, kind FULL);\nSELECT COUNT(order_id) AS n FROM shop.big_orders\n")
    plan = Context(root).plan("prod")
    assert "shop.big_order_count" in {s.name for s in plan.new_snapshots}


def test_a_column_check_that_passed_is_kept_until_what_the_model_reads_changes(tmp_path, no_spark, monkeypatch):
    """A plan does not check again a model whose rendered query and parents' columns are those it passed with
    (.meshbot/cache/columns.json); a parent that drops a column its child reads is caught though the child's
    file is untouched."""
    root = tmp_path / "shop"
    write_example(root)
    Context(root).plan("prod")
    import bot.quality.lint.preflight as preflight

    checked: list[str] = []
    rule = preflight.RULES[preflight.PREFLIGHT_RULE]
    monkeypatch.setitem(preflight.RULES, preflight.PREFLIGHT_RULE,
                        lambda source, facts: checked.append(source.model.name) or rule(source, facts))
    Context(root).plan("prod")
    assert checked == []

    path = root / "models" / "orders.sql"
    path.write_text(path.read_text().replace("amount,", "amount AS total,", 1))
    result = _meshbot(root, "plan", "prod")
    assert result.exit_code == 1
    assert "model shop.customer_revenue: Unknown column: amount" in result.output   # its own file is as it was
    assert "shop.orders" in checked and "shop.customer_revenue" in checked


def test_plan_attaches_to_a_running_engine_early_only_once_the_project_is_loaded(tmp_path, monkeypatch, no_spark):
    """`plan --auto-apply` attaches on a thread while it plans, never while the project loads: loading imports
    the project's Python files and reads sys.modules, which an import on another thread changes (a public
    project's Python model failed to load with "dictionary changed size during iteration")."""
    root = tmp_path / "shop"
    write_example(root)
    calls = []
    monkeypatch.setattr(Workspace, "attach_early", lambda self: calls.append("project" in self.__dict__))
    _meshbot(root, "plan", "--explain")
    _meshbot(root, "plan", "--json")
    assert calls == []   # changes nothing: no engine wanted
    _meshbot(root, "plan", "--auto-apply")   # stops at the Spark the test refuses; attached after loading
    assert calls == [True]
