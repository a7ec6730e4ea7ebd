"""`meshbot environments` for people: relative times, what each plan of a history changed, and who applied it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.state.protocol import EnvironmentSnapshot, HistoryEntry

_DAY = 86_400_000
_URL = re.compile(r"\s+https?://\S+")
_ACTIONS_RUN = re.compile(r"\s*\(GitHub Actions run \d+ of [^)]*\)")


@dataclass(frozen=True)
class PlanChanges:
    """One plan of an environment's history against the plan it replaced (the first: against nothing)."""

    entry: HistoryEntry
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()      # served in another version than before

    @property
    def summary(self) -> str:
        """'changed a.b; added c.d' (models by name), or 'no model changed'."""
        parts = [f"{what} {', '.join(names)}" for what, names in
                 (("changed", self.changed), ("added", self.added), ("removed", self.removed)) if names]
        return "; ".join(parts) or "no model changed"


def history_changes(entries: list[HistoryEntry]) -> list[PlanChanges]:
    """Each plan of `entries` (newest first, as the state lists them) with the models it changed, added and
    removed against the one before it."""
    found = []
    for i, entry in enumerate(entries):
        before = _served(entries[i + 1].snapshots) if i + 1 < len(entries) else {}
        now = _served(entry.snapshots)
        found.append(PlanChanges(
            entry, added=tuple(sorted(set(now) - set(before))), removed=tuple(sorted(set(before) - set(now))),
            changed=tuple(sorted(name for name in set(now) & set(before) if now[name] != before[name]))))
    return found


def _served(snapshots: tuple[EnvironmentSnapshot, ...]) -> dict[str, str]:
    return {s.name: s.identifier for s in snapshots}


def applied_by(source: str) -> str:
    """Who or what applied a plan, from the source the state recorded (bot.plan.drift), without the run's link.

    >>> applied_by("deploy main@0123456789ab release v1.2 https://github.com/o/r/actions/runs/7")
    'deploy of main@0123456789ab (release v1.2)'
    >>> applied_by("/deploy of #12 at 0123456789ab by ann https://github.com/o/r/actions/runs/7")
    '/deploy of PR #12 at 0123456789ab by ann'
    >>> applied_by("sync of #12 at 0123456789ab https://github.com/o/r/actions/runs/7")
    'PR #12 synced at 0123456789ab'
    >>> applied_by("plan by ann@laptop"), applied_by("rollback to 0a1b2c by ann@laptop"), applied_by("")
    ('CLI plan by ann@laptop', 'rollback to 0a1b2c by ann@laptop', 'unknown (recorded before state schema 10)')
    """
    text = _ACTIONS_RUN.sub("", _URL.sub("", source)).strip()
    if not text:
        return "unknown (recorded before state schema 10)"
    if text.startswith("deploy "):
        where, _, release = text[len("deploy "):].partition(" release ")
        return f"deploy of {where}" + (f" (release {release})" if release else "")
    if text.startswith("/deploy of #"):
        return "/deploy of PR #" + text[len("/deploy of #"):]
    if text.startswith("sync of #"):
        return "PR #" + text[len("sync of #"):].replace(" at ", " synced at ", 1)
    if text.startswith("plan by "):
        return "CLI " + text
    return text


def relative(ms: int | None, now_ms: int, *, none: str = "never") -> str:
    """A time as people say it, from `now_ms`: 'in 6 days', '3 hours ago', 'just now'; `none` for None.

    >>> relative(7 * 86_400_000, 86_400_000 // 2), relative(0, 3 * 3_600_000 + 5), relative(None, 0)
    ('in 6 days', '3 hours ago', 'never')
    """
    if ms is None:
        return none
    delta = ms - now_ms
    size = abs(delta)
    for unit, length in (("day", _DAY), ("hour", 3_600_000), ("minute", 60_000)):
        if size >= length:
            count = size // length
            span = f"{count} {unit}{'' if count == 1 else 's'}"
            return f"in {span}" if delta > 0 else f"{span} ago"
    return "just now"
