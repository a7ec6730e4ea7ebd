"""The PR comment as named sections: a later command replaces its sections and keeps the others."""

from __future__ import annotations

import json
import re

SECTION_ORDER = ("status", "tests", "pr_plan", "diffs", "prod_plan", "approval", "deploy", "hint")
_SECTION = re.compile(r"<!-- meshbot:section (\w+) -->\n?(.*?)<!-- /meshbot:section \1 -->", re.S)
_CHECKS = re.compile(r"<!-- meshbot:checks (\{.*?\}) -->")
_DIGEST = re.compile(r"<!-- meshbot:plan-digest (\w+) ?([^ ]*) -->")


def sections(body: str) -> dict[str, str]:
    """Section name → its whole marked text (markers included).

    >>> sections("x\\n<!-- meshbot:section a -->\\nhi\\n<!-- /meshbot:section a -->\\n")
    {'a': '<!-- meshbot:section a -->\\nhi\\n<!-- /meshbot:section a -->'}
    """
    return {m.group(1): m.group(0) for m in _SECTION.finditer(body)}


def merge_comment(old: str | None, new: str, *, drop: tuple[str, ...] = ()) -> str:
    """`new` plus every section that `old` has and `new` lacks (except the stale ones in `drop`), in the
    canonical order."""
    if not old:
        return new
    old_parts, new_parts = sections(old), sections(new)
    missing = {k: v for k, v in old_parts.items() if k not in new_parts and k not in drop}
    if not missing:
        return new
    first = _SECTION.search(new)
    header = new[:first.start()] if first else new.rstrip() + "\n\n"
    tail = new[_last_end(new):] if first else ""
    merged = {**missing, **new_parts}
    names = [n for n in SECTION_ORDER if n in merged] + sorted(set(merged) - set(SECTION_ORDER))
    return header + "\n\n".join(merged[n] for n in names) + "\n" + tail.lstrip("\n")


def _last_end(text: str) -> int:
    end = 0
    for match in _SECTION.finditer(text):
        end = match.end()
    return end


def recorded_plan_digest(body: str | None) -> tuple[str, dict[str, str]] | None:
    """The prod plan digest recorded in a comment and its `name@identifier` list, if any."""
    match = _DIGEST.search(body or "")
    if not match:
        return None
    models = dict(item.rsplit("@", 1) for item in match.group(2).split(",") if "@" in item)
    return match.group(1), models


def recorded_checks(body: str | None) -> tuple[str | None, list[tuple[str, str | None, str | None, str]]]:
    """(head sha, [(name, conclusion, url, detail)]) of the checks an earlier run recorded in the comment.

    >>> recorded_checks('<!-- meshbot:checks {"sha": "ab", "checks": [["Unit Tests", "success", null, ""]]} -->')
    ('ab', [('Unit Tests', 'success', None, '')])
    >>> recorded_checks("no record")
    (None, [])
    """
    match = _CHECKS.search(body or "")
    if not match:
        return None, []
    try:
        data = json.loads(match.group(1))
        return data.get("sha"), [(str(n), c, u, str(d or "")) for n, c, u, d in data.get("checks") or ()]
    except (ValueError, TypeError):
        return None, []
