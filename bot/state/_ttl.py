"""Parse relative TTLs such as 'in 1 week' or '3 days' into milliseconds (private to state)."""

from __future__ import annotations

import re

from bot.errors import StateError

_UNIT_MS = {
    "millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000,
    "day": 86_400_000, "week": 7 * 86_400_000, "month": 30 * 86_400_000, "year": 365 * 86_400_000,
}
_TTL = re.compile(r"^\s*(?:in\s+)?(\d+)\s*([a-z]+?)s?\s*$", re.IGNORECASE)


def ttl_ms(ttl: str) -> int:
    """The length of a TTL in milliseconds (months are 30 days, years 365).

    >>> ttl_ms("in 1 week")
    604800000
    >>> ttl_ms("2 hours")
    7200000
    """
    match = _TTL.match(ttl)
    unit = match.group(2).lower() if match else ""
    if unit not in _UNIT_MS:
        raise StateError(f"cannot read the TTL {ttl!r}; expected something like 'in 1 week'")
    return int(match.group(1)) * _UNIT_MS[unit]
