"""What meshbot keeps hidden in its PR comment (marker, sections, checks, plan digest): written and parsed here only."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from bot.report.media import WrittenMarkdown

# The records that carry state (checks, plan digest) say their format; one without `v=` was written by a
# release before versioning, in the same layout as version 1. The comment marker and the section markers
# are names, not records: they stay as they are, so that every release finds the same comment.
FORMAT_VERSION = 1
SECTION_ORDER = ("status", "tests", "pr_plan", "diffs", "prod_plan", "drift", "approval", "queue", "deploy", "hint")

_COMMENT = re.compile(r"<!-- meshbot:pr-comment [^>]*-->")
_SECTION = re.compile(r"<!-- meshbot:section (\w+) -->\n?(.*?)<!-- /meshbot:section \1 -->", re.S)
_CHECKS = re.compile(r"<!-- meshbot:checks (?:v=(\d+) )?(\{.*?\}) -->")
_DIGEST = re.compile(r"<!-- meshbot:plan-digest (?:v=(\d+) )?(\w+) ?([^ ]*) -->")
_QUEUE = re.compile(r"<!-- meshbot:queue (?:v=(\d+) )?([0-9a-f]+) (\w+) -->")
# what redaction keeps whole: the structural markers, and a record's name and version (not its payload)
_KEPT = re.compile(r"<!-- /?meshbot:(?:section \w+ -->|pr-comment gateway=\S+ -->|[a-z-]+(?: v=\d+)?)")


class Marker(WrittenMarkdown):
    """A hidden marker written by this module: the renderer places it as it is, and escapes `<!--` in any
    other text."""


@dataclass(frozen=True)
class CheckState:
    """A check run as the comment's status line sees it (recorded in the comment for later runs)."""

    name: str                   # CheckName, e.g. "Unit Tests"
    conclusion: str | None      # success, failure, skipped...; None while in progress
    url: str | None = None      # the check run's page (html_url), when GitHub said it
    detail: str = ""            # the check's one-line summary

    @property
    def failed(self) -> bool:
        return self.conclusion in ("failure", "error", "cancelled", "timed_out", "action_required")


# -- writing -------------------------------------------------------------------------------------

def comment_marker(gateway: str | None) -> Marker:
    """The hidden marker that identifies the bot's PR comment (one per gateway).

    >>> comment_marker(None)
    '<!-- meshbot:pr-comment gateway=default -->'
    """
    return Marker(f"<!-- meshbot:pr-comment gateway={gateway or 'default'} -->")


def section_open(name: str) -> Marker:
    return Marker(f"<!-- meshbot:section {name} -->")


def section_close(name: str) -> Marker:
    return Marker(f"<!-- /meshbot:section {name} -->")


def checks_marker(sha: str | None, checks: Iterable[CheckState]) -> Marker:
    """The checks of commit `sha` as a hidden JSON record, readable back with `recorded_checks` whatever
    their text (`-` and `>` are escaped, so no `-->` inside ends the comment early).

    >>> checks_marker("ab", [CheckState("Unit Tests", "success")])
    '<!-- meshbot:checks v=1 {"sha": "ab", "checks": [["Unit Tests", "success", null, ""]]} -->'
    """
    data = {"sha": sha, "checks": [[c.name, c.conclusion, c.url, c.detail] for c in checks]}
    payload = json.dumps(data, ensure_ascii=True).replace("-", "\\u002d").replace(">", "\\u003e")
    return Marker(f"<!-- meshbot:checks v={FORMAT_VERSION} {payload} -->")


def format_models(models: Mapping[str, str], *, limit: int | None = None) -> str:
    """`name@identifier,...`, sorted by name; past `limit` models, `+N` counts the ones left out.

    >>> format_models({"db.b": "2", "db.a": "1"})
    'db.a@1,db.b@2'
    >>> format_models({"db.c": "3", "db.b": "2", "db.a": "1"}, limit=2)
    'db.a@1,db.b@2,+1'
    """
    items = sorted(models.items())
    kept = items if limit is None else items[:limit]
    text = ",".join(f"{name}@{identifier}" for name, identifier in kept)
    return text + (f",+{len(items) - len(kept)}" if len(kept) < len(items) else "")


def left_out_models(text: str) -> int:
    """How many models a `format_models` list left out (its `+N`).

    >>> left_out_models("db.a@1,+7"), left_out_models("db.a@1")
    (7, 0)
    """
    return sum(int(item[1:]) for item in text.split(",") if item[1:].isdigit() and item.startswith("+"))


def plan_digest_marker(digest: str, models: str) -> Marker:
    """The approved prod plan preview's digest and the models it changes (a `format_models` list), as a
    hidden record. (Records written before named every model of the plan: a 10,000-model plan's list
    alone was larger than a comment; readers compare either kind with the plan at hand.)

    >>> plan_digest_marker("abc", "db.a@1")
    '<!-- meshbot:plan-digest v=1 abc db.a@1 -->'
    """
    return Marker(f"<!-- meshbot:plan-digest v={FORMAT_VERSION} {digest} {models} -->")


def queue_marker(sha: str, digest: str) -> Marker:
    """The merge queue's record: the merge commit it checked and the digest of the plan it checked there,
    which the deploy of that commit compares with.

    >>> queue_marker("ab12", "cd34")
    '<!-- meshbot:queue v=1 ab12 cd34 -->'
    """
    return Marker(f"<!-- meshbot:queue v={FORMAT_VERSION} {sha} {digest} -->")


# -- reading -------------------------------------------------------------------------------------

def has_comment_marker(text: str) -> bool:
    return _COMMENT.search(text) is not None


def parse_models(text: str) -> dict[str, str]:
    """The inverse of `format_models`.

    >>> parse_models("db.a@1,db.b@2")
    {'db.a': '1', 'db.b': '2'}
    """
    return dict(item.rsplit("@", 1) for item in text.split(",") if "@" in item)


def recorded_plan_digest(body: str | None) -> tuple[str, dict[str, str]] | None:
    """The prod plan digest recorded in a comment and its models (name → identifier), if any.

    >>> recorded_plan_digest("<!-- meshbot:plan-digest abc db.a@1 -->")   # before versioning
    ('abc', {'db.a': '1'})
    """
    found = recorded_plan_record(body)
    return None if found is None else (found[0], found[1])


def recorded_plan_record(body: str | None) -> tuple[str, dict[str, str], int] | None:
    """(digest, models, how many models the record left out) of the plan digest recorded in a comment.

    >>> recorded_plan_record("<!-- meshbot:plan-digest v=1 abc db.a@1,+4 -->")
    ('abc', {'db.a': '1'}, 4)
    """
    match = _DIGEST.search(body or "")
    if not match or not _readable(match.group(1)):
        return None
    return match.group(2), parse_models(match.group(3)), left_out_models(match.group(3))


def recorded_queue(body: str | None) -> tuple[str, str] | None:
    """(merge commit, plan digest) the merge queue recorded as checked, if any.

    >>> recorded_queue("x <!-- meshbot:queue v=1 ab12 cd34 --> y")
    ('ab12', 'cd34')
    """
    match = _QUEUE.search(body or "")
    if not match or not _readable(match.group(1)):
        return None
    return match.group(2), match.group(3)


def recorded_checks(body: str | None) -> tuple[str | None, tuple[CheckState, ...]]:
    """(head sha, checks) an earlier run recorded in the comment; (None, ()) when there is no record it can read.

    >>> recorded_checks('<!-- meshbot:checks {"sha": "ab", "checks": [["Unit Tests", "success", null, ""]]} -->')
    ('ab', (CheckState(name='Unit Tests', conclusion='success', url=None, detail=''),))
    >>> recorded_checks("no record")
    (None, ())
    """
    match = _CHECKS.search(body or "")
    if not match or not _readable(match.group(1)):
        return None, ()
    try:
        data = json.loads(match.group(2))
        return data.get("sha"), tuple(CheckState(str(n), c, u, str(d or "")) for n, c, u, d in data.get("checks") or ())
    except (ValueError, TypeError):
        return None, ()


def _readable(version: str | None) -> bool:
    """A record without a version predates versioning (version 1's layout); a newer one this release cannot read."""
    return version is None or int(version) <= FORMAT_VERSION


def sections(body: str) -> dict[str, str]:
    """Section name → its whole marked text (markers included).

    >>> sections("x\\n<!-- meshbot:section a -->\\nhi\\n<!-- /meshbot:section a -->\\n")
    {'a': '<!-- meshbot:section a -->\\nhi\\n<!-- /meshbot:section a -->'}
    """
    return {m.group(1): m.group(0) for m in _SECTION.finditer(body)}


def kept_sections(old: str | None, written: Iterable[str], *, drop: Iterable[str] = ()) -> tuple[tuple[str, Marker], ...]:
    """The sections of the earlier comment `old` that a new one keeps: those it does not write itself and
    that are not stale (`drop`), whole, in the canonical order (names this release does not know last).
    A later command replaces its own sections and keeps the others; the template places them.

    >>> kept_sections(section_open("a") + "x" + section_close("a"), ["status"])
    (('a', '<!-- meshbot:section a -->x<!-- /meshbot:section a -->'),)
    """
    skip = set(written) | set(drop)
    found = {name: text for name, text in sections(old or "").items() if name not in skip}
    names = [n for n in SECTION_ORDER if n in found] + sorted(set(found) - set(SECTION_ORDER))
    return tuple((name, Marker(found[name])) for name in names)


def outside_markers(text: str, change: Callable[[str], str]) -> str:
    """`change` applied to the text around meshbot's markers, which stay whole (a record's payload does not):
    redaction must not stop the bot from finding its comment and sections again.

    >>> outside_markers("a<!-- meshbot:section s -->b<!-- meshbot:checks v=1 {} -->", str.upper)
    'A<!-- meshbot:section s -->B<!-- meshbot:checks v=1 {} -->'
    """
    parts, kept = _KEPT.split(text), _KEPT.findall(text)
    return change(parts[0]) + "".join(marker + change(part) for marker, part in zip(kept, parts[1:]))
