"""Window functions Spark runs only over an ordered window: rewritten where every order gives one answer, else refused."""

from __future__ import annotations

import re
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from bot.errors import ConfigError
from bot.project.model import Model
from bot.project.sqltext import line_at

# Without ORDER BY every row of a partition is a peer of every other, so these have one answer whatever
# the order (DuckDB 1.x: RANK and DENSE_RANK 1, PERCENT_RANK 0.0, CUME_DIST 1.0). Spark refuses them
# unordered (WINDOW_FUNCTION_FRAME_NOT_ORDERED) but gives those values over `ORDER BY NULL`.
_ALL_PEERS = (exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist)
# These depend on the order the rows come in: DuckDB's answer is the order it happened to scan them.
_ORDER_DEPENDENT: dict[type[exp.Expression], str] = {
    exp.RowNumber: "ROW_NUMBER", exp.Ntile: "NTILE", exp.Lag: "LAG", exp.Lead: "LEAD", exp.NthValue: "NTH_VALUE"}
_ALL_NAMES = {exp.Rank: "RANK", exp.DenseRank: "DENSE_RANK", exp.PercentRank: "PERCENT_RANK",
              exp.CumeDist: "CUME_DIST", **_ORDER_DEPENDENT}
_MENTION = re.compile(r"\b(?:ROW_NUMBER|RANK|DENSE_RANK|PERCENT_RANK|CUME_DIST|NTILE|LAG|LEAD|NTH_VALUE)\s*\(",
                      re.I)


def _function(window: exp.Window) -> exp.Expression:
    inner = window.this
    while isinstance(inner, (exp.IgnoreNulls, exp.RespectNulls)):
        inner = inner.this
    return inner


def _ordered(window: exp.Window) -> bool:
    """Whether the window has an ORDER BY, its own or its named window's (`OVER w`, `WINDOW w AS (...)`)."""
    if window.args.get("order") is not None:
        return True
    name = window.args.get("alias")
    select = window.find_ancestor(exp.Select)
    if name is None or select is None:
        return False
    for named in select.args.get("windows") or ():
        if named.this is not None and named.this.name.lower() == name.name.lower():
            return _ordered(named)
    return False


def order_all_peers(tree: exp.Expression) -> None:
    """Give RANK, DENSE_RANK, PERCENT_RANK and CUME_DIST over an inline window without ORDER BY the order
    `ORDER BY NULL`: Spark accepts it and, every row being a peer, returns what DuckDB returns."""
    for window in list(tree.find_all(exp.Window)):
        if isinstance(_function(window), _ALL_PEERS) and window.args.get("alias") is None \
                and window.args.get("order") is None:
            window.set("order", exp.Order(expressions=[exp.Ordered(this=exp.Null())]))


def check_ordered_windows(models: Mapping[str, Model], rendered: Mapping[str, str]) -> None:
    """A ConfigError (file, line, model, the construct) for the first window function Spark refuses
    unordered whose answer depends on the row order (ROW_NUMBER, NTILE, LAG, LEAD, NTH_VALUE), or a
    RANK-like one over a named window without ORDER BY. Only queries that mention one are parsed."""
    for name in sorted(rendered):
        sql, model = rendered[name], models.get(name)
        if model is None or not sql or not _MENTION.search(sql):
            continue
        try:
            tree = sqlglot.parse_one(sql, read="spark")
        except SqlglotError:
            continue
        for window in tree.find_all(exp.Window):
            function = _function(window)
            if type(function) not in _ALL_NAMES or _ordered(window):
                continue
            word = _ALL_NAMES[type(function)]
            over = f"OVER {window.args['alias'].name}" if window.args.get("alias") is not None else \
                f"OVER ({'PARTITION BY ...' if window.args.get('partition_by') else ''})"
            why = ("every row is a peer without ORDER BY, so `ORDER BY NULL` gives what DuckDB gives"
                   if isinstance(function, _ALL_PEERS) else
                   "its result depends on the order of the rows, which is undefined on DuckDB too")
            raise ConfigError(
                f"model `{name}`: `{word}(...) {over}` has no ORDER BY, and Spark refuses {word} over an "
                f"unordered window (WINDOW_FUNCTION_FRAME_NOT_ORDERED); {why}: add ORDER BY to the window, "
                f"e.g. `{word}({'' if word == 'ROW_NUMBER' else '...'}) OVER (ORDER BY id)` with columns "
                "that order the rows",
                path=model.path, line=_line_of(model, word))


def _line_of(model: Model, word: str) -> int:
    """The line of the first `word(` after the query's start in the model's file, else the model's line."""
    try:
        text = model.path.read_text(encoding="utf-8") if model.path.suffix == ".sql" else ""
    except (OSError, UnicodeDecodeError):
        return model.line
    found = text.find(model.query_text) if model.query_text else -1
    match = re.compile(rf"\b{word}\s*\(", re.I).search(text, max(found, 0))
    return line_at(text, match.start()) if match else model.line
