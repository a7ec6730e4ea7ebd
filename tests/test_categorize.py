"""Categorization of direct changes: the edit table, seeds and indirect categories."""

from __future__ import annotations

import doctest

import pytest

import bot.plan.categorize as categorize_module
from bot.plan.categorize import categorize, categorize_seed, indirect_category
from bot.project.output_columns import expand_star, projection_names
from bot.snapshot import ChangeCategory

B, NB = ChangeCategory.BREAKING, ChangeCategory.NON_BREAKING
OLD = "SELECT id, amount, status FROM raw.orders WHERE amount > 0"

CASES = [
    ("added column", "SELECT id, amount, status, created_at FROM raw.orders WHERE amount > 0", NB),
    ("added literal column", "SELECT id, amount, status, 1 AS one FROM raw.orders WHERE amount > 0", NB),
    ("added expression column", "SELECT id, amount, status, amount * 2 AS doubled FROM raw.orders WHERE amount > 0", NB),
    ("added window column", "SELECT id, amount, status, ROW_NUMBER() OVER (PARTITION BY status ORDER BY id) AS rn "
                            "FROM raw.orders WHERE amount > 0", NB),
    ("added scalar subquery column", "SELECT id, amount, status, (SELECT MAX(x) FROM raw.limits) AS cap "
                                     "FROM raw.orders WHERE amount > 0", NB),
    ("added CASE column", "SELECT id, amount, status, CASE WHEN amount > 10 THEN 'big' END AS size "
                          "FROM raw.orders WHERE amount > 0", NB),
    ("added two columns", "SELECT id, amount, status, 1 AS a, 2 AS b FROM raw.orders WHERE amount > 0", NB),
    ("removed column", "SELECT id, amount FROM raw.orders WHERE amount > 0", B),
    ("renamed alias", "SELECT id, amount AS total, status FROM raw.orders WHERE amount > 0", B),
    ("reordered columns", "SELECT amount, id, status FROM raw.orders WHERE amount > 0", B),
    ("changed WHERE", "SELECT id, amount, status FROM raw.orders WHERE amount > 1", B),
    ("removed WHERE", "SELECT id, amount, status FROM raw.orders", B),
    ("added WHERE condition", "SELECT id, amount, status FROM raw.orders WHERE amount > 0 AND id > 5", B),
    ("added JOIN", "SELECT id, amount, status FROM raw.orders JOIN raw.users ON orders.uid = users.id "
                   "WHERE amount > 0", B),
    ("added JOIN and its column", "SELECT id, amount, status, users.name FROM raw.orders "
                                  "JOIN raw.users ON orders.uid = users.id WHERE amount > 0", B),
    ("DISTINCT", "SELECT DISTINCT id, amount, status FROM raw.orders WHERE amount > 0", B),
    ("changed column expression", "SELECT id, amount * 100 AS amount, status FROM raw.orders WHERE amount > 0", B),
    ("changed source table", "SELECT id, amount, status FROM raw.orders_v2 WHERE amount > 0", B),
    ("added LIMIT", "SELECT id, amount, status FROM raw.orders WHERE amount > 0 LIMIT 10", B),
    ("added EXPLODE column", "SELECT id, amount, status, EXPLODE(items) AS item FROM raw.orders WHERE amount > 0", B),
    # SQLMesh 0.236.4 takes any added projection but a UDTF as non-breaking, an aggregate included
    ("added aggregate to ungrouped query", "SELECT id, amount, status, COUNT(*) AS n FROM raw.orders WHERE amount > 0", NB),
    ("comment and whitespace only", "SELECT id, -- key\n  amount, status FROM raw.orders /* src */ WHERE amount > 0", None),
]


@pytest.mark.parametrize("label, new, expected", CASES, ids=[c[0] for c in CASES])
def test_direct_change_table(label, new, expected):
    assert categorize(OLD, new) is expected


@pytest.mark.parametrize("old, new, expected", [
    ("SELECT a, SUM(b) AS s FROM t GROUP BY a", "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM t GROUP BY a", NB),
    ("SELECT a, SUM(b) AS s FROM t GROUP BY a", "SELECT a, SUM(b) AS s FROM t GROUP BY a, b", B),
    # SQLMesh 0.236.4 (its plans on DuckDB): added projections under DISTINCT, in each branch of a
    # UNION and in a CTE are non-breaking; one added before ORDER BY 1's column is breaking
    ("SELECT DISTINCT a FROM t", "SELECT DISTINCT a, b FROM t", NB),
    ("SELECT a FROM t UNION ALL SELECT a FROM u", "SELECT a, b FROM t UNION ALL SELECT a, b FROM u", NB),
    ("WITH c AS (SELECT a FROM t) SELECT a FROM c", "WITH c AS (SELECT a, b FROM t) SELECT a FROM c", NB),
    ("SELECT a, b FROM t ORDER BY 1", "SELECT 0 AS z, a, b FROM t ORDER BY 1", B),
    ("SELECT a, b FROM t ORDER BY 1", "SELECT a, b, 0 AS z FROM t ORDER BY 1", NB),
    ("SELECT 1 AS a, 'b' AS b", "SELECT 1 AS e, 1 AS a, 'b' AS b", NB),
    ("SELECT a FROM t", "SELECT a, (SELECT MAX(x) FROM EXPLODE(ARRAY(1, 2)) AS v(x)) AS m FROM t", NB),
    ("SELECT a FROM t", "SELECT a FROM t ORDER BY a", B),
    ("SELECT a FROM t", "NOT VALID SQL ((", B),
])
def test_more_shapes(old, new, expected):
    assert categorize(old, new) is expected


def test_seed_changes():
    assert categorize_seed(["id", "name"], ["id", "name", "email"]) is NB
    assert categorize_seed(["id", "name"], ["id", "name"]) is B
    assert categorize_seed(["id", "name"], ["name", "id", "email"]) is B
    rows_old = [["1", "a"], ["2", "b"]]
    assert categorize_seed(["id", "name"], ["id", "name", "email"], old_rows=rows_old,
                           new_rows=[["1", "a", "x"], ["2", "b", "y"]]) is NB
    assert categorize_seed(["id", "name"], ["id", "name", "email"], old_rows=rows_old,
                           new_rows=[["1", "a", "x"], ["2", "CHANGED", "y"]]) is B


@pytest.mark.parametrize("upstream, expected", [
    ([ChangeCategory.BREAKING], ChangeCategory.INDIRECT_BREAKING),
    ([ChangeCategory.NON_BREAKING], ChangeCategory.INDIRECT_NON_BREAKING),
    ([ChangeCategory.INDIRECT_NON_BREAKING, ChangeCategory.INDIRECT_BREAKING], ChangeCategory.INDIRECT_BREAKING),
    ([ChangeCategory.NON_BREAKING, ChangeCategory.METADATA], ChangeCategory.INDIRECT_NON_BREAKING),
    ([ChangeCategory.METADATA], ChangeCategory.METADATA),
    ([ChangeCategory.FORWARD_ONLY], ChangeCategory.FORWARD_ONLY),
])
def test_indirect_category_most_conservative_wins(upstream, expected):
    assert indirect_category(upstream) is expected


def test_star_expansion_and_projection_names():
    assert expand_star("SELECT * FROM db.t", {"db.t": ["a", "b", "c"]}).count("AS") == 4
    assert expand_star("SELECT * FROM db.t", {}) is None
    assert projection_names("SELECT * FROM t") is None
    assert projection_names("SELECT a, b AS c FROM t") == ["a", "c"]
    assert projection_names("SELECT a, b + 1 FROM t") is None


def test_doctests():
    assert doctest.testmod(categorize_module).failed == 0
