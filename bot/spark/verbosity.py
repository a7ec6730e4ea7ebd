"""Whether Spark's own output reaches the terminal (`meshbot -v`); imports nothing, so the CLI sets it for free."""

from __future__ import annotations

_VERBOSE = False


def set_verbose(verbose: bool) -> None:
    """Choose what a driver JVM this process starts later prints.

    Quiet (default): the JVM's stdout and stderr go to `<state_dir>/spark.log` and log4j logs
    errors only, so nothing from Spark reaches the terminal; errors reach the user as meshbot's
    own messages (exceptions through py4j). Verbose: the JVM shares this process's terminal and
    logs with Spark's default profile (WARN), as `pyspark` itself would.

    >>> set_verbose(True); is_verbose()
    True
    >>> set_verbose(False); is_verbose()
    False
    """
    global _VERBOSE
    _VERBOSE = bool(verbose)


def is_verbose() -> bool:
    return _VERBOSE
