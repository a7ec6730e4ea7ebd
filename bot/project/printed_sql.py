"""A model's query and statements printed once as SQL text, kept with the model (parse cache and snapshots)."""

from __future__ import annotations

from typing import Sequence

from bot.project.model import Model

# to_sql of query/pre/post: the parse cache's models carry it instead of ASTs, and storing a snapshot needs no AST
SQL_ATTRIBUTE = "_meshbot_ast_sql"


def cached_sql(model: Model) -> tuple[str | None, Sequence[str], Sequence[str]] | None:
    """(query, pre_statements, post_statements) as to_sql text for a cached model, or one whose text
    was printed before (remember_sql); None otherwise."""
    return model.__dict__.get(SQL_ATTRIBUTE)


def remember_sql(model: Model, sql: tuple[str | None, list[str], list[str]]) -> None:
    """Keep a model's printed SQL with it: a serial cold load prints each model twice otherwise (its
    cache entry, then its snapshot definition), as a parse worker's model already carries its text.
    Models are frozen and their ASTs are not changed after loading, so the text stays true."""
    model.__dict__.setdefault(SQL_ATTRIBUTE, sql)
