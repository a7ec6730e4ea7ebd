"""SQLAlchemy Core definitions of the state tables at the current schema version."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

NAME = sa.String(512)
HASH = sa.String(64)
PLAN_ID = sa.String(128)


@dataclass(frozen=True)
class Tables:
    """The state tables, bound to one MetaData (and so to one PostgreSQL schema)."""

    metadata: sa.MetaData
    snapshots: sa.Table
    environments: sa.Table
    intervals: sa.Table
    versions: sa.Table
    leases: sa.Table
    pending_drops: sa.Table
    environment_history: sa.Table


def build_tables(schema: str | None = None) -> Tables:
    """Current-version table objects; `schema` places them in a PostgreSQL schema.

    Migrations create and alter the real tables; tests check that the result matches these.
    """
    metadata = sa.MetaData(schema=schema)
    return Tables(metadata, *(table(metadata) for table in (
        _snapshots, _environments, _intervals, _versions, _leases, _pending_drops, _environment_history)))


def _snapshots(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        "snapshots", metadata,
        sa.Column("name", NAME, primary_key=True),
        sa.Column("identifier", HASH, primary_key=True),
        sa.Column("version", HASH, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("fingerprint", sa.JSON, nullable=False),
        sa.Column("change_category", sa.String(32)),
        sa.Column("definition", sa.JSON, nullable=False),
        sa.Column("rendered_query", sa.Text, nullable=False),
        sa.Column("parents", sa.JSON, nullable=False),
        sa.Column("forward_only", sa.Boolean, nullable=False),
        sa.Column("physical_schema", NAME, nullable=False),
        sa.Column("columns", sa.JSON, nullable=False),
        sa.Column("ttl", sa.String(64), nullable=False),
        sa.Column("created_ts", sa.BigInteger, nullable=False),
        sa.Column("updated_ts", sa.BigInteger, nullable=False),
        sa.Index("ix_snapshots_name_version", "name", "version"),   # added by v0002
    )


def _environments(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        "environments", metadata,
        sa.Column("name", NAME, primary_key=True),
        sa.Column("snapshots", sa.JSON, nullable=False),
        sa.Column("start", sa.String(64)),
        sa.Column("end", sa.String(64)),
        sa.Column("plan_id", PLAN_ID, nullable=False),
        sa.Column("previous_plan_id", PLAN_ID),
        sa.Column("expiration_ts", sa.BigInteger),
        sa.Column("finalized_ts", sa.BigInteger),
        sa.Column("suffix_target", sa.String(16), nullable=False, server_default="schema"),  # v0002
        sa.Column("previous_snapshots", sa.JSON),                                             # v0003
    )


def _intervals(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        "intervals", metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", NAME, nullable=False),
        sa.Column("version", HASH, nullable=False),
        sa.Column("start_ts", sa.BigInteger, nullable=False),
        sa.Column("end_ts", sa.BigInteger, nullable=False),
        sa.Column("is_dev", sa.Boolean, nullable=False),
        sa.Column("is_removed", sa.Boolean, nullable=False),
        sa.Column("created_ts", sa.BigInteger, nullable=False),
        sa.Column("elapsed_ms", sa.BigInteger),               # v0007: the batch's wall time; NULL before
        sa.Column("executor_ms", sa.BigInteger),              # v0008: its Spark task time; NULL before, on Connect
        sa.Column("bytes_read", sa.BigInteger),               # v0008: what its tasks read; likewise
        sa.Index("ix_intervals_name_version", "name", "version"),
    )


def _versions(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        "versions", metadata,
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("meshbot_version", sa.String(64), nullable=False),
        sa.Column("state_id", sa.String(32)),                                                 # v0004
        sa.Column("fingerprint_scheme", sa.Integer),          # v0009: bot.fingerprint.FINGERPRINT_SCHEME; NULL: 1
    )


def _leases(metadata: sa.MetaData) -> sa.Table:  # v0004
    return sa.Table(
        "leases", metadata,
        sa.Column("key", sa.String(640), primary_key=True),   # `version:<model>:<version>`, `environment:<name>`
        sa.Column("owner", sa.String(256)),                   # host:pid:token of the holder; NULL when free
        sa.Column("purpose", sa.String(512)),                 # what the (last) holder is doing, for messages
        sa.Column("acquired_ts", sa.BigInteger, nullable=False),
        sa.Column("expires_ts", sa.BigInteger, nullable=False),
        sa.Column("last_owner", sa.String(256)),              # kept after release
    )


def _pending_drops(metadata: sa.MetaData) -> sa.Table:  # v0005
    return sa.Table(
        "pending_drops", metadata,
        sa.Column("object", NAME, primary_key=True),          # the physical table or view to drop
        sa.Column("kind", sa.String(16), nullable=False),     # `table` or `view`
        sa.Column("model", NAME, nullable=False),             # the snapshot name and version it belonged to:
        sa.Column("version", HASH, nullable=False),           # a version pushed again is kept
        sa.Column("created_ts", sa.BigInteger, nullable=False),
    )


def _environment_history(metadata: sa.MetaData) -> sa.Table:  # v0006
    return sa.Table(
        "environment_history", metadata,
        sa.Column("name", NAME, primary_key=True),            # the environment
        sa.Column("plan_id", PLAN_ID, primary_key=True),      # a plan (apply or rollback) it served
        sa.Column("snapshots", sa.JSON, nullable=False),      # as the environments table stores them
        sa.Column("promoted_ts", sa.BigInteger, nullable=False),
        sa.Column("finalized_ts", sa.BigInteger),             # NULL: promoted, views not (yet) written
        sa.Column("source", sa.String(512)),                  # v0010: where the plan came from (bot.plan.drift)
    )
