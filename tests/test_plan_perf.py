"""Plan performance guards: a no-change plan of a 300-model project re-parses and re-renders nothing,
builds no query AST from the cache, reads no snapshot row from state and imports neither PySpark nor
PyGithub; edits re-parse/re-render (and read from state) only what they touch."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Runs `meshbot plan --explain` in a fresh interpreter, counting model parses and query renders.
_PROBE = """
import contextlib, io, json, sys
import bot.project.loader as loader
import bot.project.render as render
import bot.project.cache as cache
import bot.project.parallel as parallel
import bot.state.snapshots as snapshots
parallel.MIN_ITEMS = 10**9   # no worker processes: the counts below are kept in this one
counts = {"parsed": 0, "rendered": 0, "asts": 0, "snapshot_rows": 0}
get_snapshots = snapshots.SnapshotState.get
def counting_get(self, ids):
    found = get_snapshots(self, ids)
    counts["snapshot_rows"] += len(found)
    return found
snapshots.SnapshotState.get = counting_get
loads_ast = cache._loads_ast
def counting_loads_ast(*a, **k):
    counts["asts"] += 1
    return loads_ast(*a, **k)
cache._loads_ast = counting_loads_ast
parse, norm = loader.parse_model_file, render.normalized_query_sql
def counting_parse(*a, **k):
    counts["parsed"] += 1
    return parse(*a, **k)
def counting_render(*a, **k):
    counts["rendered"] += 1
    return norm(*a, **k)
loader.parse_model_file, render.normalized_query_sql = counting_parse, counting_render
from bot.cli import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        cli.main(args=["-p", sys.argv[1], "plan", "--explain"], standalone_mode=False)
    except SystemExit:
        pass
counts["modules"] = sorted(({m.split(".")[0] for m in sys.modules} & {"pyspark", "github", "py4j", "jinja2"})
                           | ({"sqlalchemy.dialects.postgresql"} & set(sys.modules)))
counts["output"] = out.getvalue()
print(json.dumps(counts))
"""


pytestmark = pytest.mark.slow   # a generated 300-model project and four planning subprocesses


def _bench_module():
    spec = importlib.util.spec_from_file_location("plan_scale", REPO / "benchmarks" / "plan_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("plan_scale", module)   # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _probe(root: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(root)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def applied_project(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A generated 300-model project whose plan is in the SQLite state (applied without Spark)."""
    bench = _bench_module()
    root = tmp_path_factory.mktemp("perf") / "project"
    files = bench.generate(root, 300)
    bench.apply_state_only(root)
    return root, files


def test_no_change_plan_uses_caches_and_imports_no_spark_github_or_unused_libraries(applied_project):
    """Jinja (no Jinja model here) and SQLAlchemy's PostgreSQL dialect (SQLite state) stay out too (~70 ms)."""
    root, _ = applied_project
    result = _probe(root)
    assert result["parsed"] == 0
    assert result["rendered"] == 0
    assert result["asts"] == 0       # column checks read the cached query facts, not the queries
    assert result["snapshot_rows"] == 0   # unchanged models keep the snapshots prod lists, unread
    assert result["modules"] == []
    assert "Directly Modified" not in result["output"] and "Added" not in result["output"]


def test_edits_reparse_only_changed_files_and_variables_rerender(applied_project):
    root, files = applied_project
    edited = files[-1]   # a leaf model of the last layer
    original = edited.read_text()
    config = root / "config.yaml"
    config_text = config.read_text()
    try:
        edited.write_text(original.replace("SELECT", "SELECT DISTINCT", 1))
        result = _probe(root)
        assert (result["parsed"], result["rendered"]) == (1, 1)
        assert result["snapshot_rows"] == 1   # the edited model's snapshot in prod, for its diff
        assert "Directly Modified" in result["output"]
        assert edited.stem in result["output"]

        # A config variable is part of every render's key: each model is rendered again, and the
        # models whose query reads @VAR('min_amount') are directly modified.
        edited.write_text(original)
        config.write_text(config_text.replace("min_amount: 5", "min_amount: 6"))
        result = _probe(root)
        assert result["rendered"] == 300
        assert "Directly Modified" in result["output"]
    finally:
        edited.write_text(original)
        config.write_text(config_text)
    result = _probe(root)
    assert "Directly Modified" not in result["output"]


class _CatalogRunner:
    """A catalog holding every table created so far (prod's, from the state-only apply): records what a PR
    apply asks of it. No Spark: the guard is about what the evaluator asks for, not how Spark does it."""

    def __init__(self, tables: set[str]) -> None:
        self.tables, self.created, self.views = {t.lower() for t in tables}, [], {}

    def ensure_schemas(self, schemas) -> None: ...
    def table_exists(self, table: str) -> bool:
        return table.lower() in self.tables
    def settle_table(self, table: str) -> bool:
        return self.table_exists(table)
    def create_physical(self, snapshot, model, *, table, table_mapping) -> None:
        self.created.append(table)
        self.tables.add(table.lower())
    def evaluate(self, *args, **kwargs) -> None: ...
    def audit(self, *args, **kwargs): return ()
    def replace_views(self, views) -> None:
        self.views.update(views)
    def drop_views(self, views) -> None: ...


def test_a_one_model_pr_apply_creates_one_table_and_reads_no_unchanged_row(applied_project):
    """A PR environment over a 300-model prod: the edited model's table and view, and no snapshot row of the
    299 models it shares with prod (their tables come from prod's list, and the catalog already has them)."""
    from bot.context import Context
    from bot.github.runners.base import plan_digest
    from bot.plan.definition import PlanOptions
    from bot.plan.evaluator import PlanEvaluator
    import bot.state.snapshots as snapshots

    root, files = applied_project
    edited = files[-1]   # a leaf: no other model reads it
    original = edited.read_text()
    context = Context(root)
    reads = []
    get_rows = snapshots.SnapshotState.get
    try:
        edited.write_text(original.replace("SELECT", "SELECT DISTINCT", 1))
        prod = context.state.get_environment("prod")
        runner = _CatalogRunner({s.table_name for s in prod.snapshots})
        plan = context.plan("pr_perf", options=PlanOptions(skip_backfill=True))
        models = context.models

        def counting_get(self, ids):
            found = get_rows(self, ids)
            reads.extend(found)
            return found
        snapshots.SnapshotState.get = counting_get
        digest, record = plan_digest(plan)   # the PR comment's prod plan record: identifiers only
        PlanEvaluator(state=context.state, runner=runner, models_for=lambda s: models[s.name]).apply(plan)
    finally:
        snapshots.SnapshotState.get = get_rows
        edited.write_text(original)
    [change] = [c for c in plan.changes]
    assert record == f"{change.name}@{change.snapshot.identifier}" and len(digest) == 16
    assert runner.created == [change.snapshot.table_name]
    assert list(runner.views.values()) == [change.snapshot.table_name]
    assert {s.name for s in reads} <= {change.name}, sorted(s.name for s in reads)[:5]
    served = context.state.get_environment("pr_perf")
    assert len(served.snapshots) == len(prod.snapshots) and served.views() == runner.views
    assert {s.name: s.table_name for s in served.snapshots if s.name != change.name} == \
        {s.name: s.table_name for s in prod.snapshots if s.name != change.name}
    context.close()


def test_a_rebuilt_table_is_created_before_a_new_model_reading_it_through_a_listed_view(tmp_path):
    """Table z.q went missing (dropped outside meshbot; its version is reused, nothing recorded) while the
    VIEW model z.p's physical view over it is still listed. A new model a.x reads z.p: its table's columns
    come from analyzing a query that reads z.p, so z.q is created first, though `a.x` sorts before it."""
    from bot.context import Context
    from bot.plan.definition import PlanOptions
    from bot.plan.evaluator import PlanEvaluator
    from project_files import write_files

    config = ("gateways:\n  local:\n    connection:\n      type: spark\n      master: local[1]\n"
              "    state_connection:\n      type: sqlite\n      database: .meshbot/state.db\n"
              "default_gateway: local\nmodel_defaults:\n  dialect: spark\n  start: '2024-01-01'\n")
    root = write_files(tmp_path / "project", {
        "config.yaml": config,
        "models/q.sql": "MODEL (name z.q, kind FULL);\nSELECT 1 AS id\n",
        "models/p.sql": "MODEL (name z.p, kind VIEW);\nSELECT id FROM z.q\n",
    })
    runner = _CatalogRunner(set())

    def apply() -> None:
        context = Context(root)
        plan = context.plan("prod", options=PlanOptions(skip_backfill=True))
        models = context.models
        PlanEvaluator(state=context.state, runner=runner, models_for=lambda s: models[s.name]).apply(plan)
        context.close()

    apply()
    [q_table] = [t for t in runner.created if "z__q" in t]
    runner.tables.discard(q_table.lower())
    runner.created.clear()
    (root / "models" / "x.sql").write_text("MODEL (name a.x, kind FULL);\nSELECT id FROM z.p\n")
    apply()
    assert runner.created[0] == q_table and "a__x" in runner.created[1], runner.created
