"""New managed tables' directories, made on the driver's file system before CREATE TABLE so the metastore need not."""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

# Names Spark writes to disk as they are (lowercased); anything else keeps the metastore's own mkdir.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")


def local_table_directory(schema_location: str | None, table_name: str) -> Path | None:
    """The directory Spark's catalog gives a new managed table `table_name` in a schema at
    `schema_location`, when that is on the local file system; None otherwise.

    >>> local_table_directory("file:/w/sqlmesh__db.db", "DB__Orders__1")
    PosixPath('/w/sqlmesh__db.db/db__orders__1')
    >>> local_table_directory("file:/w/my%20db.db", "t")
    PosixPath('/w/my db.db/t')
    >>> local_table_directory("s3a://lake/db.db", "t"), local_table_directory("file:/w/db.db", "a-b")
    (None, None)
    """
    if not schema_location or not _PLAIN_NAME.fullmatch(table_name):
        return None
    uri = urlparse(schema_location)
    if uri.scheme != "file" or not uri.path.startswith("/"):
        return None
    return Path(unquote(uri.path)) / table_name.lower()


@contextlib.contextmanager
def made_beforehand(directory: Path | None) -> Iterator[None]:
    """Create `directory` for the CREATE TABLE run in the block, unless it exists; if the block fails,
    remove the directory again when this made it and it is still empty.

    Without Hadoop's native library (PySpark ships none) the metastore creating a table's directory
    starts a `chmod` process, while it holds Spark's Hive client lock (one metastore call at a time);
    Spark accepts an existing empty directory as a new managed table's location.
    """
    made = False
    if directory is not None and directory.parent.is_dir():
        with contextlib.suppress(OSError):
            directory.mkdir()
            made = True
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


def empty_directory(directory: Path) -> None:
    """Leave `directory` empty: a table's files whose catalog entry is gone (a drop or a write killed
    halfway) would otherwise refuse the table's name for good (LOCATION_ALREADY_EXISTS)."""
    shutil.rmtree(directory)
    directory.mkdir()
