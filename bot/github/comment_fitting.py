"""The PR comment and check summaries rendered to fit GitHub's limits: whole when they fit, else shortened
section by section, lowest priority first, and cut at a line boundary as the last resort."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from bot.github.views import CheckSummaryView, CommentView, PlanView
from bot.report.markdown import render

COMMENT_LIMIT = 65_536
SUMMARY_LIMIT = 1_000_000   # bytes: GitHub refuses a job summary of more than 1 MiB
SAFETY = 512            # room for the "shortened" note and multi-byte surprises


def render_comment(view: CommentView, *, limit: int = COMMENT_LIMIT,
                   summary_limit: int = SUMMARY_LIMIT) -> tuple[str, str]:
    """(body for the PR comment, full text for the job summary); the body always fits `limit` characters
    and the summary `summary_limit` bytes (shortened the same way only when a plan lists thousands of
    models). The job summary has this run's sections only, not those kept from the earlier comment."""
    whole = replace(view, earlier=())
    full = _fitted(whole, render("comment.md.j2", whole), summary_limit, lambda text: len(text.encode()))
    body = render("comment.md.j2", view) if view.earlier else full
    return _fitted(view, body, limit, len), full


def _fitted(view: CommentView, text: str, limit: int, size: Callable[[str], int]) -> str:
    """`text` (the rendering of `view`) if it fits `limit`, else `view` rendered shorter and shorter."""
    if size(text) <= limit:
        return text
    for shorten in _SHORTENERS:
        view = shorten(view)
        text = render("comment.md.j2", replace(view, shortened=True))
        if size(text) <= limit - SAFETY:
            return text
    return truncate_markdown(text, limit - SAFETY)


def _cut_diffs(lines: int):
    def shorten(view: CommentView) -> CommentView:
        return replace(view, prod_plan=_plan_cut_diffs(view.prod_plan, lines))
    return shorten


def _plan_cut_diffs(plan: PlanView | None, lines: int) -> PlanView | None:
    if plan is None:
        return None
    return replace(plan, changes=tuple(replace(c, diff=_head(c.diff, lines)) for c in plan.changes))


def _head(text: str, lines: int) -> str:
    rows = text.splitlines()
    if len(rows) <= lines:
        return text
    return "\n".join(rows[:lines] + [f"... {len(rows) - lines} more lines in the job summary"]) if lines else ""


def _cut_diff_tables(view: CommentView) -> CommentView:
    keep = view.diffs[:5]
    return replace(view, diffs=tuple(replace(d, columns=d.columns[:10], samples=()) for d in keep),
                   omitted_diffs=view.omitted_diffs + len(view.diffs) - len(keep),
                   plans=tuple(replace(p, rows=()) for p in view.plans))


def _cut_lists(size: int):
    def shorten(view: CommentView) -> CommentView:
        env = view.pr_environment
        if env is not None:
            env = replace(env, views=env.views[:size], omitted_views=env.omitted_views + max(0, len(env.views) - size),
                          backfills=env.backfills[:size])
        return replace(view, pr_environment=env, prod_plan=_plan_cut_lists(view.prod_plan, size),
                       diffs=view.diffs[:size],
                       omitted_diffs=view.omitted_diffs + max(0, len(view.diffs) - size),
                       plans=tuple(p for p in view.plans if p.findings)[:size])
    return shorten


def _plan_cut_lists(plan: PlanView | None, size: int) -> PlanView | None:
    if plan is None:
        return None
    return replace(plan, changes=plan.changes[:size], backfills=plan.backfills[:size],
                   omitted_changes=plan.omitted_changes + max(0, len(plan.changes) - size),
                   omitted_backfills=plan.omitted_backfills + max(0, len(plan.backfills) - size))


def _cut_failures(view: CommentView) -> CommentView:
    if view.tests is None:
        return view
    failures = tuple(replace(f, message=_head(f.message, 5)) for f in view.tests.failures[:20])
    return replace(view, tests=replace(view.tests, failures=failures))


def _cut_impact(view: CommentView) -> CommentView:
    """The impact's summary lines stay; its folded details go."""
    if view.impact is None:
        return view
    return replace(view, impact=replace(view.impact, models=tuple(replace(m, details=False)
                                                                  for m in view.impact.models)))


# Lowest-priority sections first: SQL diffs, table_diff detail, backfill and change lists, test output. A list
# of more than 500 rows never fits a comment: it is cut first, so the steps after it render small texts
# (a 10,000-model preview's 6,500 backfills rendered at every step took 2 s).
_SHORTENERS = (_cut_lists(500), _cut_diffs(40), _cut_diffs(10), _cut_diff_tables, _cut_diffs(0), _cut_impact,
               _cut_lists(50), _cut_lists(10), _cut_failures, _cut_lists(0))

_FENCE = re.compile(r"^(`{3,}|~{3,})")


def truncate_markdown(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters at a line boundary, closing open fences and <details>.

    >>> print(truncate_markdown("<details>\\n```sql\\nselect 1\\nfrom t\\n```\\n</details>", 95), end="")
    <details>
    ```sql
    select 1
    ```
    </details>
    _(truncated; the full text is in the job summary)_
    """
    note = "_(truncated; the full text is in the job summary)_"
    kept: list[str] = []
    used, fence, details = 0, None, 0
    for line in text.splitlines():
        new_fence, new_details = _track(line, fence, details)
        closers = (len(new_fence) + 1 if new_fence else 0) + new_details * len("</details>\n")
        if used + len(line) + 1 + closers + len(note) + 1 > limit:
            break
        kept.append(line)
        used += len(line) + 1
        fence, details = new_fence, new_details
    if fence:
        kept.append(fence)
    kept.extend(["</details>"] * details)
    return "\n".join(kept + [note]) + "\n"


def _track(line: str, fence: str | None, details: int) -> tuple[str | None, int]:
    """Markdown state after `line`: the open fence (if any) and how many <details> are open."""
    stripped = line.strip()
    if fence is not None:
        closes = stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence)
        return (None if closes else fence), details
    match = _FENCE.match(stripped)
    if match:
        return match.group(1), details
    return None, max(0, details + stripped.count("<details") - stripped.count("</details>"))


def render_check_summary(view: CheckSummaryView, *, limit: int = COMMENT_LIMIT) -> str:
    """A check run's output text (same 65,535 limit as comments)."""
    text = render("check_summary.md.j2", view)
    if len(text) > limit - SAFETY:
        text = render("check_summary.md.j2", replace(view, plan=_plan_cut_diffs(view.plan, 0)))
    return text if len(text) <= limit - SAFETY else truncate_markdown(text, limit - SAFETY)
