"""Text meshbot did not write never speaks in its voice: the same hostile strings (as a warehouse row, an
error text, a column name, a unit test's failure, a comment's arguments) go through every output: the PR
comment, each check summary, the job summary, replies, the run summary, the log, and each notification
target. GitHub's output is read as cmark-gfm renders it, Slack's by its mrkdwn grammar (tests/rendered.py).
No Spark: the engine is FakeEngine."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from bot.diff.rows import RowDiff
from bot.diff.schema import schema_diff
from bot.diff.table_diff import ModelDataDiff
from bot.errors import EngineError
from bot.project.notifications import parse_notification_targets
from bot.report.markdown import TEMPLATES_DIR, render
from bot.report.media import Medium
from bot.report.notify import Message
from github_support import (RUN_URL, FakeEngine, FakeRepository, play, pr_comment_event,  # noqa: F401 (fixture)
                            receiver)
from rendered import render_markdown, shown, slack_controls, slack_shown

EVIL = "evil.example"
FORGED = "forged-marker"
HOSTILE = (f"<!channel> <https://{EVIL}/login|Re-authenticate meshbot> <@U024BE7LH> <!subteam^S1|@ops> "
           f"<img src=https://{EVIL}/x.png> <a href=https://{EVIL}>click</a> [log in](https://{EVIL}/a) "
           f"![pic](https://{EVIL}/i.png) @octo-org/admins @here https://{EVIL}/bare www.{EVIL} "
           f"a `code` span `` ` `` <!-- meshbot:checks {{\"{FORGED}\": 1}} --> <script>alert(1)</script>\n"
           "::error::forged annotation\n::add-mask::nothing\n# heading\n\x1b[31mred\x1b[0m")
NAME = "amount`](https://evil.example/c) @octo-org/admins <b>x</b>"   # a column name (quoted identifiers allow it)

ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_hostile_token", "GITHUB_API_URL": "https://api.github.com",
       "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World", "GITHUB_RUN_ID": "7"}


def assert_inert(markdown: str, *, mentions: tuple[str, ...] = ()) -> None:
    """What GitHub shows of `markdown` holds no link, image, HTML, mention or hidden record that came from
    the hostile text, and the text itself is shown (not swallowed)."""
    page = render_markdown(markdown)
    assert not [link for link in page.links if EVIL in link], page.links
    assert not page.images, page.images
    assert not {"img", "script", "b", "h1"} & set(page.tags), page.tags
    assert set(page.mentions) <= set(mentions), page.mentions
    assert FORGED not in "".join(re.findall(r"<!--(.*?)-->", page.html, re.S)), "a forged hidden record"
    assert "evil.example" in page.text or EVIL not in markdown


def assert_plain(text: str) -> None:
    """A log or console text: no control sequence, no line GitHub Actions reads as a workflow command."""
    assert "\x1b" not in text
    forged = [line for line in text.splitlines() if line.lstrip().startswith(("::error::forged", "::add-mask::nothing"))]
    assert not forged, forged


class HostileEngine(FakeEngine):
    """FakeEngine whose unit test fails with HOSTILE, whose data diff names a hostile column, and whose prod
    apply fails quoting HOSTILE (as a RAISE_ERROR guard quoting a row value would)."""

    def __init__(self, targets=(), **kwargs) -> None:
        super().__init__({"enable_deploy_command": True}, **kwargs)
        self._config = replace(self._config, notification_targets=targets)
        self.failing_tests = {"test_hostile": HOSTILE}
        columns = ((NAME, "double"), ("id", "int"))
        self.diffs = (ModelDataDiff(
            model="shop.orders", kind="FULL", reason=HOSTILE, window="whole query", previewed=True, keys=(NAME,),
            rows=RowDiff(source_count=4, target_count=14, joined_count=14, full_match_count=0, partial_match_count=14,
                         source_only_count=0, target_only_count=0, distinct_key_source_count=4,
                         distinct_key_target_count=4, duplicate_key_target_count=14),
            schema=schema_diff(list(columns), list(columns[:1])), source_count=4, target_count=14),)

    def apply(self, plan, *, progress=None):
        if plan.environment == "prod":
            raise EngineError(f"model `shop.orders` failed: [USER_RAISED_EXCEPTION] invalid name: {HOSTILE}")
        return super().apply(plan, progress=progress)

    def run(self, environment="prod", *, execution_time=None, progress=None, skip_when_busy=False):
        raise EngineError(f"model `shop.orders` failed: {HOSTILE}")


def _bot(tmp_path: Path, engine: FakeEngine, events: list[tuple[str, dict | None]]) -> tuple[FakeRepository, list[str], str]:
    """Each event through main(): the repository, the printed log lines and the job summary."""
    played = play(tmp_path, engine, events, env=ENV)
    return played.repo, played.lines, played.summary


def test_hostile_text_in_a_pull_request_s_comment_checks_and_job_summary_is_shown_as_text(tmp_path):
    repo, lines, summary = _bot(tmp_path, HostileEngine(), [("pull_request", None)])
    comment = next(c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    assert "test_hostile" in comment and "Re-authenticate meshbot" in shown(comment)
    assert "amount`](https://evil.example/c)" in shown(comment)       # the column name, shown exactly
    assert_inert(comment)
    summaries = {check["name"]: check["output"]["summary"] for check in repo.checks.values() if check.get("output")}
    assert {"meshbot - Unit Tests", "meshbot - Data Diff"} <= set(summaries)
    for text in summaries.values():
        assert_inert(text)
    assert "Re-authenticate meshbot" in shown(summaries["meshbot - Unit Tests"])
    assert summary and "Re-authenticate meshbot" in shown(summary)
    assert_inert(summary)
    assert_plain("\n".join(lines))


def test_a_deploy_reply_keeps_backticks_links_and_mentions_of_its_arguments_as_text(tmp_path):
    """`/deploy` with options it does not know answers before any permission check: the options are
    quoted in code that a backtick cannot close."""
    args = "--now`](https://evil.example/r) ![i](https://evil.example/i.png) @octo-org/admins <img src=x>`"
    repo, lines, _ = _bot(tmp_path, HostileEngine(), [("issue_comment", pr_comment_event(f"/deploy {args}",
                                                                                       "outsider"))])
    (reply,) = [c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" not in c["body"]]
    assert "does not know" in reply
    page = render_markdown(reply)
    assert "--now`](https://evil.example/r)" in "".join(page.code)
    assert_inert(reply, mentions=("@outsider",))
    assert_plain("\n".join(lines))


def test_warehouse_text_in_a_failed_deploy_reaches_slack_the_webhook_and_the_console_as_text(tmp_path, receiver,
                                                                                            capsys):
    events = ["apply_failure", "run_failure"]
    targets = parse_notification_targets([
        {"type": "slack_webhook", "url": f"{receiver.base}/slack", "notify_on": events},
        {"type": "webhook", "url": f"{receiver.base}/json", "notify_on": events},
        {"type": "console", "notify_on": events}], Path("config.yaml"))
    repo, lines, summary = _bot(tmp_path, HostileEngine(targets), [
        ("pull_request", None), ("issue_comment", pr_comment_event("/deploy", "writer"))])

    (slack,) = receiver.bodies("/slack")
    block = slack["blocks"][0]["text"]
    assert block["type"] == "mrkdwn" and block["verbatim"] is True
    for mrkdwn in (slack["text"], block["text"]):
        assert slack_controls(mrkdwn) == [slack_controls(f"<{RUN_URL}>")[0]]   # the workflow run, nothing else
        assert f"<https://{EVIL}/login|Re-authenticate meshbot>" in slack_shown(mrkdwn)   # shown as text
        assert "<!channel>" in slack_shown(mrkdwn) and "@here" in slack_shown(mrkdwn)
        assert "@here" not in mrkdwn                                                        # no broadcast
    (hook,) = receiver.bodies("/json")
    assert HOSTILE.split("\n")[0] in hook["error"]          # JSON carries the text exactly; JSON is its escaping
    assert_plain(hook["text"])
    assert_plain(capsys.readouterr().err)                   # the console target
    assert_plain("\n".join(lines))
    deploy_reply = [c["body"] for c in repo.comments if "failed" in c["body"]]
    assert deploy_reply and all(assert_inert(body, mentions=("@writer",)) is None for body in deploy_reply)
    assert_inert(summary)


def test_a_failed_scheduled_run_s_summary_shows_the_error_as_text(tmp_path):
    engine = HostileEngine(environments=("prod",))
    _, lines, summary = _bot(tmp_path, engine, [("schedule", {"schedule": "0 * * * *"})])
    assert "Re-authenticate meshbot" in shown(summary)
    assert_inert(summary)
    assert_plain("\n".join(lines))


def test_every_notification_medium_escapes_the_message_it_carries():
    message = Message(event="run_failure", environment="prod`<!here>", models=("shop.<!channel>",), error=HOSTILE,
                      run_url=f"https://{EVIL}|relabelled")
    mrkdwn = render("notification.txt.j2", message, medium=Medium.SLACK)
    assert slack_controls(mrkdwn) == []
    assert "prodˋ<!here>" in slack_shown(mrkdwn)
    text = render("notification.txt.j2", message)
    assert_plain(text)
    assert "::error::forged annotation" in text               # still readable, but never at a line's start


@pytest.mark.parametrize("template", sorted(p.name for p in TEMPLATES_DIR.glob("*.j2")))
def test_no_template_quotes_a_value_by_hand(template):
    """Code spans, mentions and links around a value are the renderer's filters (`code`, `mention`, `url`):
    a backtick, `@` or `](` written next to `{{ }}` by hand is what let a backtick close a span."""
    source = (TEMPLATES_DIR / template).read_text()
    assert not re.search(r"`\{\{|\}\}`", source), "use `| code`, not backticks around {{ }}"
    assert not re.search(r"@\{\{", source), "use `| mention`, not @{{ }}"
    for target in re.findall(r"\]\(\{\{(.*?)\}\}\)", source):
        assert "| url" in target, f"a link target without `| url`: {target}"


def test_only_the_renderer_marks_text_as_written():
    """`Markup(...)` (text Jinja places unescaped) is made in bot/report/markdown.py alone, and `| safe` fails."""
    root = Path(__file__).resolve().parents[1] / "bot"
    makers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "Markup(" in p.read_text())
    assert makers == ["report/markdown.py"]
    from bot.report import markdown
    env = markdown._environment(str(TEMPLATES_DIR), Medium.MARKDOWN)
    with pytest.raises(Exception, match="unescaped"):
        env.from_string("{{ x | safe }}").render(x="<b>")
