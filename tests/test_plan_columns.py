"""Plan-time column checks (no Spark): properties naming a column the query does not produce are
errors with file and line; where the columns cannot be known, nothing is reported.

SQLMesh 0.236.4 rejects only the time_column and partitioned_by cases ("partitioned_by keys ['nope']
are missing"); it applies a bad grain, unique_key or audit column silently. meshbot rejects all five
(a grain only with `strict: true`; otherwise it warns, see test_sqlmesh_projects_compat)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.errors import ConfigError

PARENT = "MODEL (name db.parent, kind FULL, start '2024-01-01');\nSELECT 1 AS id, 'a' AS label, '2024-01-01' AS ds\n"


def _plan(root: Path, body: str, config: str = ""):
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n" + config)
    (root / "models" / "parent.sql").write_text(PARENT)
    (root / "models" / "m.sql").write_text(body)
    context = Context(root)
    return context, lambda: context.plan("prod")


BAD = [
    ("grain", "MODEL (\n  name db.m,\n  kind FULL,\n  grain (id,\n    nope)\n);\nSELECT id FROM db.parent", 5),
    ("grains", "MODEL (\n  name db.m,\n  kind FULL,\n  grains (\n    nope\n  )\n);\nSELECT id FROM db.parent", 5),
    ("time_column", "MODEL (\n  name db.m,\n  kind INCREMENTAL_BY_TIME_RANGE (\n    time_column nope\n  )\n);\n"
                    "SELECT id, ds FROM db.parent", 4),
    ("unique_key", "MODEL (\n  name db.m,\n  kind INCREMENTAL_BY_UNIQUE_KEY (unique_key (id, nope))\n);\n"
                   "SELECT id FROM db.parent", 3),
    ("partitioned_by", "MODEL (\n  name db.m,\n  kind FULL,\n  partitioned_by nope\n);\nSELECT id FROM db.parent", 4),
    ("audit not_null", "MODEL (\n  name db.m,\n  kind FULL,\n  audits (\n    unique_values(columns := (id)),\n"
                       "    not_null(columns := (id, nope))\n  )\n);\nSELECT id FROM db.parent", 6),
    ("star over a known parent", "MODEL (\n  name db.m,\n  kind FULL,\n  grain nope\n);\nSELECT * FROM db.parent", 4),
    ("explicit columns over a CTE star", "MODEL (name db.m, kind FULL, grain nope);\n"
                                         "WITH e AS (SELECT * FROM raw.events) SELECT id FROM e", 1),
]


@pytest.mark.parametrize("label, body, line", BAD, ids=[b[0] for b in BAD])
def test_a_missing_column_is_an_error_naming_file_and_line(tmp_path, label, body, line):
    context, plan = _plan(tmp_path / "p", body, "strict: true\n")   # a grain is only a warning without it
    with pytest.raises(ConfigError) as failure:
        plan()
    assert str(failure.value).startswith(f"{tmp_path / 'p' / 'models' / 'm.sql'}:{line}: ")
    assert "`nope`" in str(failure.value) and "db.m" in str(failure.value)
    assert context.state.get_environment("prod") is None


GOOD = [
    ("columns it produces", "MODEL (name db.m, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), grain (id, ds),\n"
                            "  partitioned_by ds, audits (not_null(columns := (id, label))));\n"
                            "SELECT id, label, ds FROM db.parent"),
    ("star over a known parent", "MODEL (name db.m, kind FULL, grain label);\nSELECT p.* FROM db.parent AS p"),
    ("star over a table of unknown columns", "MODEL (name db.m, kind FULL, grain anything);\nSELECT * FROM raw.events"),
    ("star over a join with an unknown table", "MODEL (name db.m, kind FULL, grain anything);\n"
                                               "SELECT * FROM db.parent JOIN raw.events USING (id)"),
    ("explicit columns over a CTE star of an unknown table",
     "MODEL (name db.m, kind FULL, grain id);\nWITH e AS (SELECT * FROM raw.events) SELECT id FROM e"),
    ("a custom audit's arguments", "MODEL (name db.m, kind FULL, audits (my_check(column := anything)));\n"
                                   "SELECT id FROM db.parent"),
]


@pytest.mark.parametrize("label, body", GOOD, ids=[g[0] for g in GOOD])
def test_known_columns_or_unknowable_ones_raise_nothing(tmp_path, label, body):
    root = tmp_path / "p"
    if "my_check" in body:
        (root / "audits").mkdir(parents=True)
        (root / "audits" / "my_check.sql").write_text(
            "AUDIT (name my_check);\nSELECT * FROM @this_model WHERE @column IS NULL\n")
    _, plan = _plan(root, body)
    assert plan().change_for("db.m") is not None
