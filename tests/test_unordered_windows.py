"""Window functions without ORDER BY (issue 44). Spark 4 refuses ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK,
CUME_DIST, NTILE, LAG, LEAD and NTH_VALUE over an unordered window (WINDOW_FUNCTION_FRAME_NOT_ORDERED); DuckDB
runs them all. Where every order gives one answer (RANK-like functions: every row is a peer) meshbot orders the
window by NULL and gives SQLMesh's rows; where the answer is the order DuckDB scanned the rows in (ROW_NUMBER,
NTILE, LAG, LEAD, NTH_VALUE), the plan is refused with the file, line, model and construct, before Spark starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.context import Context
from bot.errors import ConfigError
from project_files import DUCKDB_DIALECT_CONFIG, write_files

CONFIG = DUCKDB_DIALECT_CONFIG
SRC = "MODEL (name s.src, kind FULL);\nSELECT * FROM (VALUES (1, 'a'), (2, 'b'), (3, 'a')) AS t(id, g)\n"
RANKS = """MODEL (name s.ranks, kind FULL);
SELECT id,
  RANK() OVER () AS r,
  DENSE_RANK() OVER (PARTITION BY g) AS dr,
  PERCENT_RANK() OVER () AS pr,
  CUME_DIST() OVER (PARTITION BY g) AS cd,
  COUNT(*) OVER () AS n
FROM s.src
"""


def test_rank_like_functions_without_order_by_give_sqlmesh_s_rows(tmp_path, clean_catalog):
    root = write_files(tmp_path / "p", {"config.yaml": CONFIG, "models/src.sql": SRC, "models/ranks.sql": RANKS})
    context = Context(root)
    try:
        context.apply(context.plan("prod"))
        # SQLMesh 0.236.4 on DuckDB, `sqlmesh fetchdf "select * from s.ranks order by id"`
        assert context.fetchdf("SELECT * FROM s.ranks ORDER BY id") == [
            {"id": i, "r": 1, "dr": 1, "pr": 0.0, "cd": 1.0, "n": 3} for i in (1, 2, 3)]
    finally:
        context.close()


@pytest.mark.parametrize("call, word", [
    ("ROW_NUMBER() OVER ()", "ROW_NUMBER"),
    ("ROW_NUMBER() OVER (PARTITION BY g)", "ROW_NUMBER"),
    ("NTILE(2) OVER ()", "NTILE"),
    ("LAG(id) OVER (PARTITION BY g)", "LAG"),
    ("LEAD(id, 1) OVER ()", "LEAD"),
    ("NTH_VALUE(id, 2) OVER ()", "NTH_VALUE"),
    ("RANK() OVER w", "RANK"),
])
def test_an_order_dependent_window_function_without_order_by_is_refused_at_plan_time(tmp_path, call, word):
    query = f"MODEL (name s.numbered, kind FULL);\n\nSELECT id,\n  {call} AS x\nFROM s.src\n"
    if call.endswith(" w"):
        query += "WINDOW w AS (PARTITION BY g)\n"
    root = write_files(tmp_path / "p", {"config.yaml": CONFIG, "models/src.sql": SRC, "models/numbered.sql": query})
    done = CliRunner().invoke(cli, ["-p", str(root), "plan", "--auto-apply", "--no-prompts"], catch_exceptions=False)
    assert done.exit_code == 1, done.output
    assert f"{root / 'models' / 'numbered.sql'}:4: model `s.numbered`: `{word}(...) OVER" in done.output
    assert "has no ORDER BY" in done.output and "add ORDER BY to the window" in done.output
    assert not (root / ".meshbot" / "state.db").exists() or Context(root).state.get_environment("prod") is None


def test_ordered_windows_and_aggregates_over_unordered_ones_plan(tmp_path):
    query = """MODEL (name s.numbered, kind FULL);
SELECT id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY id) AS rn, LAG(id) OVER w AS prev, SUM(id) OVER () AS total
FROM s.src
WINDOW w AS (ORDER BY id)
"""
    root = write_files(tmp_path / "p", {"config.yaml": CONFIG, "models/src.sql": SRC, "models/numbered.sql": query})
    plan = Context(root).plan("prod")
    assert "s.numbered" in plan.snapshots


def test_the_refusal_points_at_the_line_of_the_unordered_call(tmp_path):
    query = "MODEL (name s.numbered, kind FULL);\nSELECT id, LEAD(id) OVER (ORDER BY id) AS nxt,\n LAG(id) OVER () AS prev FROM s.src\n"
    root = write_files(tmp_path / "p", {"config.yaml": CONFIG, "models/src.sql": SRC, "models/numbered.sql": query})
    with pytest.raises(ConfigError) as info:
        Context(root).plan("prod")
    assert str(info.value).startswith(f"{root / 'models' / 'numbered.sql'}:3: model `s.numbered`: `LAG(...) OVER ()`")
