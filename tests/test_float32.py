"""float32 arithmetic in DuckDB-dialect models (issue 44): DuckDB computes a REAL/FLOAT with a DECIMAL, and a
REAL quotient, in float32, where Spark would widen to DOUBLE (bot/project/floats.py). The rows are those SQLMesh
0.236.4 wrote on DuckDB for the same two models (`SELECT * FROM s.f ORDER BY ALL`)."""

from __future__ import annotations

import re

from bot.context import Context
from project_files import DUCKDB_DIALECT_CONFIG, write_files

CONFIG = DUCKDB_DIALECT_CONFIG
FILES = {
    "config.yaml": CONFIG,
    "models/src.sql": "MODEL (name s.src, kind FULL);\nSELECT * FROM (VALUES (1, 1.1), (2, 2.2), (3, 3.3)) AS t(id, x)\n",
    "models/f.sql": """MODEL (name s.f, kind FULL);
SELECT id,
  CAST(x AS REAL) AS r,
  CAST(x AS REAL) * 1.1 AS m,
  CAST(x AS FLOAT) + 0.1 AS a,
  CAST(x AS FLOAT4) * 2 AS i,
  CAST(x AS REAL) / 3 AS d,
  1.5 - CAST(x AS REAL) AS l,
  CAST(x AS REAL) * CAST(1.1 AS DOUBLE) AS k,
  CAST(x AS REAL) + 1 AS p
FROM s.src
""",
    "models/agg.sql": """MODEL (name s.agg, kind FULL);
SELECT SUM(CAST(x AS REAL)) AS s, AVG(CAST(x AS REAL)) AS av, SUM(CAST(x AS REAL) * 1.1) AS s2, MAX(CAST(x AS REAL) / 3) AS mx
FROM s.src
""",
}
COLUMNS = ("id", "r", "m", "a", "i", "d", "l", "k", "p")
SQLMESH_F = [
    (1, 1.100000023841858, 1.2100000381469727, 1.2000000476837158, 2.200000047683716, 0.36666667461395264,
     0.3999999761581421, 1.2100000262260437, 2.0999999046325684),
    (2, 2.200000047683716, 2.4200000762939453, 2.299999952316284, 4.400000095367432, 0.7333333492279053,
     -0.7000000476837158, 2.4200000524520875, 3.200000047683716),
    (3, 3.299999952316284, 3.630000114440918, 3.3999998569488525, 6.599999904632568, 1.100000023841858,
     -1.7999999523162842, 3.6299999475479128, 4.300000190734863),
]
SQLMESH_AGG = [{"s": 6.600000023841858, "av": 2.200000007947286, "s2": 7.260000228881836, "mx": 1.100000023841858}]


def test_real_arithmetic_gives_sqlmesh_s_float32_digits(tmp_path, clean_catalog):
    root = write_files(tmp_path / "p", FILES)
    context = Context(root)
    try:
        context.apply(context.plan("prod"))
        assert context.fetchdf("SELECT * FROM s.f ORDER BY id") == [dict(zip(COLUMNS, row)) for row in SQLMESH_F]
        assert context.fetchdf("SELECT * FROM s.agg") == SQLMESH_AGG
    finally:
        context.close()


def test_only_operations_duckdb_computes_in_float32_are_rewritten(tmp_path):
    root = write_files(tmp_path / "p", FILES)
    rendered = Context(root).render("s.f")
    assert "CAST(`x` AS FLOAT) * CAST(1.1 AS FLOAT) AS `m`" in rendered
    assert "CAST(CAST(`x` AS FLOAT) / CAST(3 AS FLOAT) AS FLOAT) AS `d`" in rendered
    assert "CAST(`x` AS FLOAT) * CAST(2 AS FLOAT) AS `i`" in rendered       # ANSI Spark would widen to DOUBLE
    assert "CAST(`x` AS FLOAT) * CAST(1.1 AS DOUBLE) AS `k`" in rendered     # DOUBLE on both engines
    postgres = write_files(tmp_path / "pg", {**FILES, "config.yaml": CONFIG.replace("dialect: duckdb", "dialect: postgres")})
    # PostgreSQL widens real * numeric to double precision, as Spark does: nothing to rewrite
    assert "CAST(`x` AS FLOAT) * 1.1 AS `m`" in Context(postgres).render("s.f")


WIDTHS = {   # dialect: (the model's casts, what each is on that engine)
    "duckdb": ("FLOAT, REAL, FLOAT4, FLOAT8, DOUBLE, FLOAT(53)", "FLOAT FLOAT FLOAT DOUBLE DOUBLE DOUBLE"),
    "postgres": ("FLOAT, REAL, FLOAT4, FLOAT8, DOUBLE PRECISION, FLOAT(24), FLOAT(25)",
                 "DOUBLE FLOAT FLOAT DOUBLE DOUBLE FLOAT DOUBLE"),
    "snowflake": ("FLOAT, REAL, FLOAT4, FLOAT8, DOUBLE", "DOUBLE DOUBLE DOUBLE DOUBLE DOUBLE"),
    "bigquery": ("FLOAT64, FLOAT", "DOUBLE DOUBLE"),
}


def test_each_dialect_gives_its_floating_types_their_own_width(tmp_path):
    """DuckDB's FLOAT is 32-bit (typeof on DuckDB 1.5: FLOAT for FLOAT, REAL, FLOAT4, FLOAT(24); DOUBLE for
    FLOAT8, FLOAT(53)); PostgreSQL's FLOAT is 64-bit and its REAL 32-bit, FLOAT(p) is 32-bit up to p = 24;
    Snowflake's and BigQuery's every float is 64-bit. Casts and declared columns alike."""
    for dialect, (types, widths) in WIDTHS.items():
        casts = ", ".join(f"CAST(x AS {t}) AS c{i}" for i, t in enumerate(types.split(", ")))
        columns = ", ".join(f"c{i} {t}" for i, t in enumerate(types.split(", ")))
        root = write_files(tmp_path / dialect, {
            "config.yaml": CONFIG.replace("dialect: duckdb", f"dialect: {dialect}"),
            "models/w.sql": f"MODEL (name s.w, kind FULL, columns ({columns}));\nSELECT {casts} FROM s.src\n",
            "models/src.sql": "MODEL (name s.src, kind FULL);\nSELECT 1.5 AS x\n"})
        context = Context(root)
        rendered = context.render("s.w")
        assert (dialect, " ".join(re.findall(r"CAST\(`x` AS (\w+)\)", rendered))) == (dialect, widths)
        assert (dialect, " ".join(t for _, t in context.models["s.w"].columns)) == (dialect, widths)
