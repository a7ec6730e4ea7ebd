"""The warm engine's query socket (bot.spark.query_service): rows come back as `fetchdf` prints them, a query
error as meshbot's own error, anything the socket cannot carry faithfully sends the caller to its own
session. A stand-in session answers (no Spark); tests/test_warm_engine.py queries a real engine through it."""

from __future__ import annotations

import doctest
import json
import socket
import stat
import tempfile
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from bot.errors import EngineError
from bot.spark import query_service
from bot.spark.query_service import SOCKET, query, serve, wire_value


class _Rows:
    """Answers as the watchdog's Connect session would, from fixed rows (or an error)."""

    def __init__(self, rows=None, error: Exception | None = None) -> None:
        self.rows, self.error, self.asked = rows or [], error, []

    def fetch(self, sql, limit):
        self.asked.append((sql, limit))
        if self.error is not None:
            raise self.error
        try:
            return {"rows": [{key: wire_value(value) for key, value in row.items()} for row in self.rows]}
        except query_service._NotFaithful:
            return {"fallback": True}


@pytest.fixture
def short_dir():
    """A folder with a short path: a Unix socket's path is limited to about 100 bytes."""
    with tempfile.TemporaryDirectory(prefix="mq-", dir="/tmp") as folder:
        yield Path(folder)


def test_doctests():
    assert doctest.testmod(query_service).failed == 0


def test_rows_come_back_as_fetchdf_prints_them_and_only_the_owner_may_connect(short_dir):
    touched = []
    rows = [{"n": 1, "ds": date(2024, 1, 2), "at": datetime(2024, 1, 2, 3, 4), "amount": Decimal("1.50"),
             "tags": ["a", None], "props": {"k": 1.5}, "nothing": None}]
    stand_in = _Rows(rows)
    serve(short_dir, "sc://unused", touch=lambda: touched.append(1), session=stand_in)
    mode = (short_dir / SOCKET).stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    got = query(short_dir, "select 1", 5)
    assert stand_in.asked == [("select 1", 5)] and touched == [1]
    expected = [{key: (str(value) if isinstance(value, (date, Decimal)) else value) for key, value in rows[0].items()}]
    assert got == expected
    # what the CLI prints from them is what it prints from the session's own rows
    assert json.dumps(got, default=str) == json.dumps(rows, default=str)
    assert [str(value) for value in got[0].values()] == [str(value) for value in rows[0].values()]


def test_a_query_error_is_meshbots_error_and_other_trouble_sends_the_caller_to_its_own_session(short_dir):
    serve(short_dir, "sc://unused", touch=lambda: None,
          session=_Rows(error=EngineError("running query: [TABLE_OR_VIEW_NOT_FOUND] shop.nope")))
    with pytest.raises(EngineError, match=r"^running query: \[TABLE_OR_VIEW_NOT_FOUND\] shop\.nope$"):
        query(short_dir, "select * from shop.nope", None)

    for name, session in (("map", _Rows([{"m": {1: "a"}}])), ("bug", _Rows(error=RuntimeError("boom")))):
        folder = short_dir / name
        folder.mkdir()
        serve(folder, "sc://unused", touch=lambda: None, session=session)
        assert query(folder, "select 1", None) is None

    silent = short_dir / "silent"
    silent.mkdir()
    assert query(silent, "select 1", None) is None            # no socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(silent / SOCKET))                        # a socket nobody accepts on
    listener.close()
    assert query(silent, "select 1", None) is None
