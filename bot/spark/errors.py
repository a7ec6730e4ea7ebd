"""Spark failures as meshbot's EngineError: the first lines of the message, and Spark's error class."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from bot.errors import EngineError

_MAX_MESSAGE_LINES = 4


def spark_message(exc: BaseException) -> str:
    """Return the first meaningful line(s) of a Spark/py4j error, without the JVM stack trace.

    >>> spark_message(Exception("[X] Bad thing. SQLSTATE: 42000;\\n'Project [*]\\n+- x"))
    '[X] Bad thing. SQLSTATE: 42000;'
    """
    is_py4j = any(cls.__name__ == "Py4JJavaError" for cls in type(exc).__mro__)
    text = _java_message(exc) if is_py4j else str(exc)
    lines = [line.rstrip() for line in text.splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return type(exc).__name__
    first = lines[0].removeprefix(": ").strip()
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
