"""Spark failures as meshbot's EngineError: the first lines of the message, and Spark's error class."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from bot.errors import EngineError

_MAX_MESSAGE_LINES = 4
_RAISED, _RAISED_STATE = "[USER_RAISED_EXCEPTION] ", " SQLSTATE: P0001"
# Spark's hint to turn ANSI SQL off, that is to turn the error into a silent NULL or a wrapped number
_BYPASS_ANSI = re.compile(r'\s*If necessary set "?spark\.sql\.ansi\.enabled"? to "?false"? to bypass this error\.')


def spark_message(exc: BaseException) -> str:
    """Return the first meaningful line(s) of a Spark/py4j error, without the JVM stack trace.

    >>> spark_message(Exception("[X] Bad thing. SQLSTATE: 42000;\\n'Project [*]\\n+- x"))
    '[X] Bad thing. SQLSTATE: 42000;'
    >>> spark_message(Exception("[USER_RAISED_EXCEPTION] bad name: x SQLSTATE: P0001"))
    'bad name: x'
    >>> spark_message(Exception('[ARITHMETIC_OVERFLOW] overflow. If necessary set "spark.sql.ansi.enabled" '
    ...                         'to "false" to bypass this error. SQLSTATE: 22003'))
    '[ARITHMETIC_OVERFLOW] overflow. SQLSTATE: 22003'
    """
    is_py4j = any(cls.__name__ == "Py4JJavaError" for cls in type(exc).__mro__)
    text = _java_message(exc) if is_py4j else str(exc)
    lines = [line.rstrip() for line in text.splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return type(exc).__name__
    first = _BYPASS_ANSI.sub("", lines[0].removeprefix(": ").strip())
    if first.startswith(_RAISED):     # RAISE_ERROR's own text (a model's guard, a value that does not fit)
        first = first.removeprefix(_RAISED).removesuffix(_RAISED_STATE).rstrip()
    if "== SQL ==" in lines:
        start = lines.index("== SQL ==") + 1
        snippet = [line for line in lines[start:start + _MAX_MESSAGE_LINES] if not line.startswith("\tat ")]
        return "\n".join([first, *snippet])
    return first


def _java_message(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.startswith(": "):
            return line[2:]
    return str(exc)


def _is_spark_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    modules = {cls.__module__.split(".")[0] for cls in type(exc).__mro__}
    return "PySparkException" in names or "Py4JJavaError" in names or "py4j" in modules


@contextlib.contextmanager
def spark_errors(subject: str) -> Iterator[None]:
    """Turn a Spark failure inside the block into an EngineError naming `subject`."""
    try:
        yield
    except EngineError:
        raise
    except Exception as exc:
        if not _is_spark_error(exc):
            raise
        raise EngineError(f"{subject}: {spark_message(exc)}") from None


def error_class(exc: BaseException) -> str | None:
    """Spark's error class of an exception (`UNSUPPORTED_OVERWRITE.TABLE`...), when it has one."""
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    with contextlib.suppress(Exception):
        if getter is not None and getter():
            return str(getter())
    match = re.match(r"\s*\[([A-Z_.]+)\]", str(exc))
    return match.group(1) if match else None


_MISSING_FILE = (re.compile(r"FILE_NOT_EXIST\][^\n]*?reading file (\S+?)\.(?:\s|$)"),
                 re.compile(r"FileNotFoundException:? (?:File )?(\S+?) does not exist"))
_TABLE_DIRECTORY = re.compile(r"/([A-Za-z0-9_]+)\.db/([A-Za-z0-9_]+)/")


def missing_file(exc: BaseException) -> str | None:
    """The data file a query found gone (another process replaced the table's files since this session
    listed them), or None when `exc` is not that.

    >>> missing_file(Exception("[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file "
    ...                        "file:/w/s.db/t/part-0.parquet. File does not exist. It is possible..."))
    'file:/w/s.db/t/part-0.parquet'
    >>> missing_file(Exception("[TABLE_OR_VIEW_NOT_FOUND] nope")) is None
    True
    """
    text = str(exc)
    for pattern in _MISSING_FILE:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


_MISSING_TABLE = re.compile(r"TABLE_OR_VIEW_NOT_FOUND\][^\n]*?table or view (`[^`]+`(?:\.`[^`]+`)*)")


def missing_table(exc: BaseException) -> str | None:
    """The table a statement found missing (`schema.table`, unquoted), or None when `exc` is not that.

    >>> missing_table(Exception("[TABLE_OR_VIEW_NOT_FOUND] The table or view `sqlmesh__s`.`s__src__1` "
    ...                         "cannot be found. Verify the spelling ..."))
    'sqlmesh__s.s__src__1'
    >>> missing_table(Exception("[FAILED_READ_FILE.FILE_NOT_EXIST] gone")) is None
    True
    """
    match = _MISSING_TABLE.search(str(exc))
    return match.group(1).replace("`", "") if match else None


def table_of_file(path: str) -> str | None:
    """`schema.table` of a managed table's data file (`.../schema.db/table/...`), when the path says.

    >>> table_of_file("file:/w/sqlmesh__shop.db/shop__orders__1/ds=2024-01-01/part-0.parquet")
    'sqlmesh__shop.shop__orders__1'
    """
    match = _TABLE_DIRECTORY.search(path)
    return f"{match.group(1)}.{match.group(2)}" if match else None
