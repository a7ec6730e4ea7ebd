"""SparkEngine: catalog and SQL operations on one SparkSession, with cached listings and readable errors."""

from __future__ import annotations

import contextlib
import functools
import shutil
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from bot.errors import EngineError
from bot.spark.errors import error_class, missing_file, missing_table, spark_errors, table_of_file
from bot.spark.sql import (column_defs, parse_query, quote_table, set_properties_sql, spark_sql, split_table,
                           table_expression)
from bot.spark.stand_ins import table_key
from bot.spark.table_dirs import empty_directory, local_table_directory, made_beforehand
from bot.spark.types import schema_columns

SWAP_SUFFIX = "__meshbot_swap"   # a table's rewritten copy, renamed over it once written (materialize.common)

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

class SparkEngine:
    """DDL, DML and queries on one SparkSession; table listings are cached per schema."""

    def __init__(self, session: "SparkSession"):
        self.session = session
        self._objects: dict[str, set[str]] = {}
        self._schemas: set[str] | None = None
        self._table_schemas: dict[str, "StructType"] = {}
        self._partitions: dict[str, list[str]] = {}
        self._schema_locations: dict[str, str | None] = {}
        # (name, type) of each table this engine created, in the catalog's order, keyed by
        # stand_ins.table_key: queries over them are analyzed against stand-ins (no metastore call).
        self.created_columns: dict[str, list[tuple[str, str]]] = {}
        # Output column names of the query last written into a table (same model version, so the
        # same names batch after batch); lets a batch's write skip a separate analysis.
        self.query_outputs: dict[str, list[str]] = {}
        # The query shape (literals masked) those outputs came from: a changed model query under
        # the same table (forward-only) is analyzed afresh instead of trusting stale outputs.
        self.query_shapes: dict[str, str] = {}
        # End (epoch ms) of the latest interval written per incremental table, known only after a
        # first run in this process; any DDL through this engine forgets it.
        self.watermarks: dict[str, int] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # Schemas holding meshbot's versioned tables (SparkRunner adds them): a table directory there
        # that the catalog has no entry for is a leftover of a killed drop or write, removed on CREATE.
        self.physical_schemas: set[str] = set()

    def table_lock(self, table: str) -> threading.Lock:
        """A lock per table, so batches writing the same table from several threads run one at a time."""
        with self._locks_guard:
            return self._locks.setdefault(table.lower(), threading.Lock())

    def sql(self, statement: str) -> "DataFrame":
        """`session.sql(statement)` in one JVM round trip: every statement meshbot runs goes through here.

        pyspark's `sql()` costs more round trips than the statement: without `args` it builds an
        empty Java array through `PythonUtils`, a short name the JVM resolves by trying each package
        pyspark imported (a search of the whole class path per miss), and with `args={}` it creates
        a Java map first (and later tells the JVM to free it). The session's own Java `sql(String)`
        is what both end up calling; a Spark Connect session has no JVM here and goes through `sql()`.
        """
        try:
            return self._sql(statement)
        except Exception as exc:   # noqa: BLE001 - re-raised unless it is a table another writer replaced
            if not (self.refresh_after(exc) or self._swapped_in_after(exc)):
                raise
            return self._sql(statement)   # once: the table's files as they are now

    def _sql(self, statement: str) -> "DataFrame":
        java_session = self._java_session
        if java_session is None:
            return self.session.sql(statement)
        return self._classic_frame(java_session.sql(statement), self.session)

    def refresh_after(self, exc: BaseException) -> bool:
        """When `exc` says a data file is gone (another process rewrote the table since this session
        listed its files), refresh what the session knows of that table and return True: the caller
        runs its statement once more. Anything else: False."""
        path = missing_file(exc)
        if path is None:
            return False
        table = table_of_file(path)
        with contextlib.suppress(Exception):
            if table is not None:
                self._sql(f"REFRESH TABLE {quote_table(table)}")
            self.session.catalog.refreshByPath(path.rsplit("/", 1)[0])
        self.invalidate(table)
        return True

    def _swapped_in_after(self, exc: BaseException, *, wait_s: float = 10.0) -> bool:
        """When `exc` says a table is missing while another writer swaps its rewritten copy in (the
        copy exists, the name is absent between its drop and rename), wait for the rename and return
        True: the caller runs its statement once more. A table simply missing: False at once."""
        table = missing_table(exc)
        if table is None or "." not in table:
            return False
        deadline = time.monotonic() + wait_s
        while True:
            found = self.tables_exist_now([table, table + SWAP_SUFFIX])
            if found[table]:
                return True
            if not found[table + SWAP_SUFFIX] or time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    @functools.cached_property
    def _java_session(self) -> Any:
        """The classic session's JVM side; None on Spark Connect, which has no JVM in this process."""
        from bot.spark.connect import is_connect

        return None if is_connect(self.session) else getattr(self.session, "_jsparkSession", None)

    @functools.cached_property
    def _classic_frame(self) -> Any:
        from pyspark.sql.classic.dataframe import DataFrame

        return DataFrame

    # ------------------------------------------------------------ scheduler pools
    _JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")

    def _spark_context(self) -> Any:
        """The SparkContext, or None on Spark Connect (which has none)."""
        from bot.spark.connect import is_connect

        return None if is_connect(self.session) else self.session.sparkContext

    def job_properties(self) -> dict[str, str]:
        """This thread's job group and description, for tasks it hands to other threads."""
        context = self._spark_context()
        if context is None:
            return {}
        found = {key: context.getLocalProperty(key) for key in self._JOB_PROPERTIES}
        return {key: value for key, value in found.items() if value is not None}

    @contextlib.contextmanager
    def scheduler_pool(self, pool: str, inherited: dict[str, str] | None = None) -> Iterator[None]:
        """Run this thread's Spark jobs in the FAIR scheduler pool `pool` (with `inherited` job
        properties); on Spark Connect nothing to set."""
        context = self._spark_context()
        if context is None:
            yield
            return
        for key, value in (inherited or {}).items():
            context.setLocalProperty(key, value)
        context.setLocalProperty("spark.scheduler.pool", pool)
        try:
            yield
        finally:
            context.setLocalProperty("spark.scheduler.pool", None)

    # ----------------------------------------------------------------- schemas
    def create_schemas(self, names: Iterable[str]) -> None:
        """Create each schema that does not exist yet (one fresh listing, then one statement per new schema)."""
        self._schemas = None
        known = self._known_schemas()
        for name in dict.fromkeys(names):
            key = name.lower()
            if key in known:
                continue
            with spark_errors(f"creating schema {name}"):
                self.sql(spark_sql(exp.Create(this=table_expression(name), kind="SCHEMA", exists=True)))
            known.add(key)
            self._objects[key] = set()

    def drop_schema(self, name: str, *, cascade: bool = True) -> None:
        with spark_errors(f"dropping schema {name}"):
            self.sql(spark_sql(exp.Drop(tables=[table_expression(name)], kind="SCHEMA", exists=True,
                                        cascade=cascade)))
        self._objects.pop(name.lower(), None)
        self._schema_locations.pop(name.lower(), None)
        self._forget_all()
        if self._schemas is not None:
            self._schemas.discard(name.lower())

    def _known_schemas(self) -> set[str]:
        if self._schemas is None:
            with spark_errors("listing schemas"):
                rows = self.sql("SHOW SCHEMAS").collect()
            self._schemas = {row[0].lower() for row in rows}
        return self._schemas

    # ----------------------------------------------------------------- listing
    def existing_objects(self, schema: str, *, fresh: bool = False) -> set[str]:
        """Lowercase names of the tables and views in `schema` (empty when the schema is absent)."""
        return set(self._listing(schema, fresh=fresh))

    def _listing(self, schema: str, *, fresh: bool = False) -> set[str]:
        """The cached listing of `schema` itself: other threads may add to it, so copy it before iterating."""
        key = schema.lower()
        if fresh or key not in self._objects:
            self._objects[key] = self._list(schema)
        return self._objects[key]

    def _list(self, schema: str, pattern: str | None = None) -> set[str]:
        like = "" if pattern is None else f" LIKE '{pattern}'"
        try:
            rows = self.sql(f"SHOW TABLES IN {quote_table(schema)}{like}").collect()
        except Exception as exc:  # noqa: BLE001 - a missing schema lists as empty
            if error_class(exc) and error_class(exc).startswith("SCHEMA_NOT_FOUND"):
                return set()
            with spark_errors(f"listing schema {schema}"):
                raise
        return {row["tableName"].lower() for row in rows if not row["isTemporary"]}

    def table_exists(self, table: str) -> bool:
        schema, name = self._schema_and_name(table)
        return name.lower() in self._listing(schema)   # one lookup, no copy of a listing of thousands

    def tables_exist_now(self, tables: Sequence[str]) -> dict[str, bool]:
        """Whether each table of one schema exists now: one catalog call, whatever the schema holds
        (cached listings may predate another process's DDL); the cached listing learns the answers."""
        schemas = {self._schema_and_name(table)[0].lower() for table in tables}
        if len(schemas) != 1:
            raise ValueError(f"tables of one schema expected: {list(tables)}")
        schema = self._schema_and_name(tables[0])[0]
        names = [self._schema_and_name(table)[1].lower() for table in tables]
        # SHOW TABLES' pattern: `|` separates alternatives, `*` is a wildcard; model names have neither
        found = self._list(schema, "|".join(names))
        for table, name in zip(tables, names):
            self._note(table, exists=name in found)
        return {table: name in found for table, name in zip(tables, names)}

    def invalidate(self, table: str | None = None) -> None:
        """Forget cached listings (of `table`'s schema, or all) after changes made outside this engine."""
        if table is None:
            self._forget_all()
            self._objects.clear()
            self._schemas = None
            self._schema_locations.clear()
        else:
            self._forget(table)
            self._objects.pop(self._schema_and_name(table)[0].lower(), None)

    def _forget(self, table: str) -> None:
        # query_outputs describe the model's query, not the table, so DDL on the table keeps them
        key = table.lower()
        for cache in (self._table_schemas, self._partitions, self.watermarks):
            cache.pop(key, None)
        self.created_columns.pop(table_key(split_table(table)), None)

    def _forget_all(self) -> None:
        for cache in (self._table_schemas, self._partitions, self.query_outputs, self.query_shapes,
                      self.watermarks, self.created_columns):
            cache.clear()

    def note_created(self, table: str) -> None:
        """Record a table created outside the engine's own DDL helpers (e.g. DataFrameWriter.saveAsTable)."""
        self._note(table, exists=True)

    def _schema_and_name(self, table: str) -> tuple[str, str]:
        parts = split_table(table)
        if len(parts) == 1:
            return self.session.catalog.currentDatabase(), parts[0]
        return ".".join(parts[:-1]), parts[-1]

    def _note(self, table: str, *, exists: bool) -> None:
        self._forget(table)
        schema, name = self._schema_and_name(table)
        cached = self._objects.get(schema.lower())
        if cached is not None:
            (cached.add if exists else cached.discard)(name.lower())

    # ----------------------------------------------------------------- queries
    def columns(self, table: str) -> list[tuple[str, str]]:
        """(name, Spark type) of a table or view, in order; reads only the catalog (cached until DDL)."""
        return schema_columns(self._schema(table))

    def dtypes(self, table: str) -> list[tuple[str, str]]:
        """(name, type) of a table or view as `DataFrame.dtypes` spells them (`decimal(10,2)`, `string`)."""
        return [(field.name, field.dataType.simpleString()) for field in self._schema(table).fields]

    def query_dtypes(self, sql: str, *, subject: str = "analyzing query") -> list[tuple[str, str]]:
        """(name, type) of a query's output as `DataFrame.dtypes` spells them; analysis only, no Spark job."""
        frame = self.dataframe(sql, subject=subject)
        with spark_errors(subject):
            return list(frame.dtypes)

    def _schema(self, table: str) -> "StructType":
        key = table.lower()
        if key not in self._table_schemas:
            with spark_errors(f"reading columns of {table}"):
                self._table_schemas[key] = self.session.table(quote_table(table)).schema
        return self._table_schemas[key]

    def execute(self, sql: str, *, subject: str = "executing SQL") -> None:
        """Run a statement; cached columns and watermarks are forgotten since it may be DDL."""
        self._forget_all()
        with spark_errors(subject):
            self.sql(sql)

    def fetch(self, sql: str, *, limit: int | None = None, subject: str = "running query") -> list[dict[str, Any]]:
        """Run a query and return its rows as dicts; `limit` is applied in Spark. A table whose files another
        process replaced while this session held their listing is refreshed and the query run once more."""
        try:
            return self.collect(self.dataframe(sql, subject=subject), limit=limit, subject=subject)
        except EngineError as exc:
            if not self.refresh_after(exc):
                raise
            return self.collect(self.dataframe(sql, subject=subject), limit=limit, subject=subject)

    def fetch_one(self, sql: str, *, subject: str = "running query") -> dict[str, Any]:
        """The first row of a query that always returns one (an aggregate without GROUP BY)."""
        rows = self.fetch(sql, subject=subject)
        if not rows:
            raise EngineError(f"{subject}: the query returned no row")
        return rows[0]

    def collect(self, frame: "DataFrame", *, limit: int | None = None,
                subject: str = "running query") -> list[dict[str, Any]]:
        """The rows of a DataFrame (a Python model's, a query's) as dicts; `limit` is applied in Spark."""
        with spark_errors(subject):
            if limit is not None:
                frame = frame.limit(limit)
            return [row.asDict(recursive=True) for row in frame.collect()]

    def dataframe(self, sql: str, *, subject: str = "analyzing query") -> "DataFrame":
        """A lazy DataFrame of `sql`; analysis errors surface here as EngineError (on Spark Connect,
        which analyzes lazily, use `schema_of` for the output)."""
        with spark_errors(subject):
            return self.sql(sql)

    def schema_of(self, sql: str, *, subject: str = "analyzing query") -> "StructType":
        """The analyzed output schema of `sql` (no Spark job), errors as EngineError. Spark Connect
        analyzes only here, so a table another writer is swapping in is waited for here too."""
        with spark_errors(subject):
            try:
                return self.sql(sql).schema
            except Exception as exc:   # noqa: BLE001 - re-raised unless it is a table another writer replaced
                if not (self.refresh_after(exc) or self._swapped_in_after(exc)):
                    raise
                return self.sql(sql).schema

    # ----------------------------------------------------------------- objects
    def create_view(self, view: str, select_sql: str, *, replace: bool = True,
                    columns: Sequence[tuple[str, str]] | None = None) -> None:
        """CREATE [OR REPLACE] VIEW; `columns`, when the caller knows the query's output, are kept
        like a created table's (`created_columns`)."""
        statement = exp.Create(this=table_expression(view), kind="VIEW", replace=replace, exists=not replace,
                               expression=parse_query(select_sql, f"creating view {view}"))
        with spark_errors(f"creating view {view}"):
            self.sql(spark_sql(statement))
        self._note(view, exists=True)
        if columns:
            self.created_columns[table_key(split_table(view))] = list(columns)

    def create_star_view(self, view: str, table: str) -> None:
        """CREATE OR REPLACE VIEW `view` AS SELECT * FROM `table`."""
        self.create_view(view, spark_sql(exp.select(exp.Star()).from_(table_expression(table))))

    def drop_view(self, view: str) -> None:
        with spark_errors(f"dropping view {view}"):
            self.sql(spark_sql(exp.Drop(tables=[table_expression(view)], kind="VIEW", exists=True)))
        self._note(view, exists=False)

    # ----------------------------------------------------------- temporary views
    def create_temp_view(self, name: str, select_sql: str) -> None:
        """CREATE OR REPLACE TEMPORARY VIEW: lives in this session only, nothing reaches the warehouse."""
        statement = exp.Create(this=exp.table_(name, quoted=True), kind="VIEW", replace=True,
                               expression=parse_query(select_sql, f"creating temporary view {name}"),
                               properties=exp.Properties(expressions=[exp.TemporaryProperty()]))
        with spark_errors(f"creating temporary view {name}"):
            self.sql(spark_sql(statement))
        self._table_schemas.pop(name.lower(), None)

    def register_temp_view(self, name: str, frame: "DataFrame") -> None:
        """Register a DataFrame (a Python model's or a seed's rows) as a session-only temporary view."""
        with spark_errors(f"creating temporary view {name}"):
            frame.createOrReplaceTempView(name)
        self._table_schemas.pop(name.lower(), None)

    def drop_temp_view(self, name: str) -> None:
        with spark_errors(f"dropping temporary view {name}"):
            self.session.catalog.dropTempView(name)
        self._table_schemas.pop(name.lower(), None)

    def drop_table(self, table: str) -> None:
        with spark_errors(f"dropping table {table}"):
            self.sql(spark_sql(exp.Drop(tables=[table_expression(table)], kind="TABLE", exists=True)))
        self._note(table, exists=False)

    def create_table(self, table: str, *, columns: Sequence[tuple[str, str]],
                     partitioned_by: Iterable[str] = ()) -> None:
        """CREATE TABLE IF NOT EXISTS as Parquet from (name, Spark type) pairs; no Spark job runs."""
        partitioned_by = list(partitioned_by)
        ordered = catalog_order(columns, partitioned_by)
        directory = self._new_table_directory(table)
        with spark_errors(f"creating table {table}"), made_beforehand(directory):
            self._creating(table, _create_table_sql(table, columns, partitioned_by), directory)
        self._note(table, exists=True)
        self._partitions[table.lower()] = partitioned_by
        self.created_columns[table_key(split_table(table))] = ordered

    def create_table_like(self, table: str, source: str) -> None:
        """An empty `table` with `source`'s columns, partitioning, format and table properties."""
        with spark_errors(f"creating table {table}"):
            properties = [(row["key"], row["value"]) for row in
                          self.sql(f"SHOW TBLPROPERTIES {quote_table(source)}").collect()
                          if not row["key"].startswith(_CATALOG_PROPERTIES)]
            self._creating(table, f"CREATE TABLE {quote_table(table)} LIKE {quote_table(source)}",
                           self._new_table_directory(table))
        self._note(table, exists=True)
        if properties:
            self.set_table_properties(table, properties)

    def _creating(self, table: str, statement: str, directory: "Path | None") -> None:
        """Run a statement creating `table`; a leftover directory in its way is emptied first and the
        statement run once more (Spark takes an empty directory as a new managed table's location)."""
        try:
            self.sql(statement)
        except Exception as exc:
            if not self._leftover_directory(table, directory, exc):
                raise
            empty_directory(directory)
            self.sql(statement)

    def _leftover_directory(self, table: str, directory: "Path | None", exc: Exception) -> bool:
        """True when CREATE TABLE failed only because a directory the catalog does not know is in the
        way, on a local warehouse, in one of meshbot's physical schemas."""
        if directory is None or error_class(exc) != "LOCATION_ALREADY_EXISTS":
            return False
        schema, name = self._schema_and_name(table)
        return schema.lower() in self.physical_schemas and name.lower() not in self._listing(schema, fresh=True)


    def set_table_properties(self, table: str, properties: Sequence[tuple[str, str]]) -> None:
        """ALTER TABLE ... SET TBLPROPERTIES (a model's `physical_properties`); the table's columns,
        partitions and rows stay as they were, so nothing cached about it is forgotten."""
        with spark_errors(f"setting the properties of {table}"):
            self.sql(set_properties_sql(table, properties))

    def _new_table_directory(self, table: str) -> "Path | None":
        """Where a new managed `table` will live, when that is on this process's file system (see table_dirs)."""
        if self._java_session is None:
            return None   # Spark Connect: the warehouse is the server's
        schema, name = self._schema_and_name(table)
        key = schema.lower()
        if key not in self._schema_locations:
            try:
                rows = self.sql(f"DESCRIBE SCHEMA {quote_table(schema)}").collect()
            except Exception:  # noqa: BLE001 - CREATE TABLE itself will say what is wrong with the schema
                return None
            self._schema_locations[key] = next((row[1] for row in rows if row[0] == "Location"), None)
        return local_table_directory(self._schema_locations[key], name)

    def add_columns(self, table: str, *, columns: Sequence[tuple[str, str]]) -> None:
        """ALTER TABLE ... ADD COLUMNS (existing rows read NULL); rows are unchanged, so the watermark stays."""
        statement = exp.Alter(this=table_expression(table), kind="TABLE",
                              actions=[exp.Schema(expressions=column_defs(columns))])
        with spark_errors(f"adding columns to {table}"):
            self.sql(spark_sql(statement))
        key = table.lower()
        self._table_schemas.pop(key, None)
        self._partitions.pop(key, None)
        self.created_columns.pop(table_key(split_table(table)), None)

    def rename_table(self, source: str, target: str) -> None:
        """ALTER TABLE ... RENAME TO; a directory `target` left without its catalog entry (a drop killed
        after its catalog change, on a local warehouse, in a physical schema) is removed first."""
        statement = spark_sql(exp.Alter(this=table_expression(source), kind="TABLE",
                                        actions=[exp.AlterRename(this=table_expression(target))]))
        with spark_errors(f"renaming {source} to {target}"):
            try:
                self.sql(statement)
            except Exception as exc:
                directory = self._new_table_directory(target)
                if not self._leftover_directory(target, directory, exc):
                    raise
                shutil.rmtree(directory)   # a rename needs the location free, not just empty
                self.sql(statement)
        self._note(source, exists=False)
        self._note(target, exists=True)

    def partition_columns(self, table: str) -> list[str]:
        """Partition columns of a table, from `DESCRIBE TABLE` (a catalog read, no Spark job; cached until DDL).

        `Catalog.listColumns` would run three Spark jobs per call.
        """
        key = table.lower()
        if key not in self._partitions:
            with spark_errors(f"describing {table}"):
                rows = self.sql(spark_sql(exp.Describe(this=table_expression(table)))).collect()
            self._partitions[key] = _partition_names([row[0] for row in rows])
        return list(self._partitions[key])


def _create_table_sql(table: str, columns: Sequence[tuple[str, str]], partitioned_by: Sequence[str]) -> str:
    properties: list[exp.Expression] = [exp.FileFormatProperty(this=exp.Var(this="parquet"))]
    if partitioned_by:
        properties.append(exp.PartitionedByProperty(this=exp.Schema(
            expressions=[exp.to_identifier(name, quoted=True) for name in partitioned_by])))
    return spark_sql(exp.Create(this=exp.Schema(this=table_expression(table), expressions=column_defs(columns)),
                                kind="TABLE", exists=True, properties=exp.Properties(expressions=properties)))


def catalog_order(columns: Sequence[tuple[str, str]], partitioned_by: Sequence[str]) -> list[tuple[str, str]]:
    """A new table's columns in the order Spark's catalog keeps them: partition columns last, in
    PARTITIONED BY order (matched without case).

    >>> catalog_order([("ds", "STRING"), ("id", "INT"), ("kind", "STRING")], ["KIND", "ds"])
    [('id', 'INT'), ('kind', 'STRING'), ('ds', 'STRING')]
    """
    by_name = {name.lower(): (name, kind) for name, kind in columns}
    partitions = [by_name[name.lower()] for name in partitioned_by if name.lower() in by_name]
    keys = {name.lower() for name, _ in partitions}
    return [column for column in columns if column[0].lower() not in keys] + partitions


def _partition_names(described: list[str]) -> list[str]:
    """Column names listed under `# Partition Information` in DESCRIBE TABLE output.

    >>> _partition_names(["a", "ds", "# Partition Information", "# col_name", "ds"])
    ['ds']
    >>> _partition_names(["a", "ds"])
    []
    """
    if "# Partition Information" not in described:
        return []
    names = []
    for name in described[described.index("# Partition Information") + 1:]:
        if not name or name.startswith("#"):
            if names:
                break
            continue
        names.append(name)
    return names


# properties the catalog keeps itself (Hive's bookkeeping, Spark's own), not a model's physical_properties
_CATALOG_PROPERTIES = ("transient_", "spark.sql.", "numFiles", "totalSize", "numRows", "rawDataSize",
                       "COLUMN_STATS_ACCURATE", "last_modified", "bucketing_version")

