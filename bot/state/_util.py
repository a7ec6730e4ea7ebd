"""Small helpers shared by the state repositories: chunking and write transactions."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence, TypeVar

import sqlalchemy as sa

T = TypeVar("T")

CHUNK = 500   # rows per IN list: well below SQLite's and PostgreSQL's bound-parameter limits


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Split a sequence into consecutive slices of at most `size` items.

    >>> [list(c) for c in chunks([1, 2, 3, 4, 5], 2)]
    [[1, 2], [3, 4], [5]]
    """
    for index in range(0, len(items), size):
        yield items[index:index + size]


@contextmanager
def write_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A committed-or-rolled-back transaction; on SQLite it takes the write lock at BEGIN."""
    with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn, conn.begin():
        yield conn
