"""Schema version 1: create the snapshots, environments, intervals and versions tables."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 1

# Frozen copy of the version-1 shape: later changes belong in later migrations, never here.


def _metadata(schema: str | None) -> sa.MetaData:
    metadata = sa.MetaData(schema=schema)
    name, hash_, plan_id = sa.String(512), sa.String(64), sa.String(128)
    sa.Table(
        "snapshots", metadata,
        sa.Column("name", name, primary_key=True),
        sa.Column("identifier", hash_, primary_key=True),
        sa.Column("version", hash_, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("fingerprint", sa.JSON, nullable=False),
        sa.Column("change_category", sa.String(32)),
        sa.Column("definition", sa.JSON, nullable=False),
        sa.Column("rendered_query", sa.Text, nullable=False),
        sa.Column("parents", sa.JSON, nullable=False),
        sa.Column("forward_only", sa.Boolean, nullable=False),
        sa.Column("physical_schema", name, nullable=False),
        sa.Column("columns", sa.JSON, nullable=False),
        sa.Column("ttl", sa.String(64), nullable=False),
        sa.Column("created_ts", sa.BigInteger, nullable=False),
        sa.Column("updated_ts", sa.BigInteger, nullable=False),
    )
    sa.Table(
        "environments", metadata,
        sa.Column("name", name, primary_key=True),
        sa.Column("snapshots", sa.JSON, nullable=False),
        sa.Column("start", sa.String(64)),
        sa.Column("end", sa.String(64)),
        sa.Column("plan_id", plan_id, nullable=False),
        sa.Column("previous_plan_id", plan_id),
        sa.Column("expiration_ts", sa.BigInteger),
        sa.Column("finalized_ts", sa.BigInteger),
    )
    sa.Table(
        "intervals", metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", name, nullable=False),
        sa.Column("version", hash_, nullable=False),
        sa.Column("start_ts", sa.BigInteger, nullable=False),
        sa.Column("end_ts", sa.BigInteger, nullable=False),
        sa.Column("is_dev", sa.Boolean, nullable=False),
        sa.Column("is_removed", sa.Boolean, nullable=False),
        sa.Column("created_ts", sa.BigInteger, nullable=False),
        sa.Index("ix_intervals_name_version", "name", "version"),
    )
    sa.Table(
        "versions", metadata,
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("meshbot_version", sa.String(64), nullable=False),
    )
    return metadata


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    _metadata(schema).create_all(conn)
