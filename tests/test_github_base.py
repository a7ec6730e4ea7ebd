"""bot.github.runners.base: what every runner shares: the PR comment kept under GitHub's limit, markdown
redaction that keeps the hidden markers, the refusal of state and catalog that die with the runner."""

from __future__ import annotations

import threading
from dataclasses import replace

import responses

from bot.github.action import Invocation, main
from bot.github.client import GithubClient
from bot.github.event import Repo, parse_event
from bot.github.local import StepOutputs
from bot.github.runners import BotRun
from bot.github.runners.base import ephemeral_storage_refusal, post_comment
from bot.github.settings import load_settings
from bot.github.views import ChangeView, CommentView, PlanView
from bot.github.comment_fitting import COMMENT_LIMIT
from bot.report.comment_state import comment_marker
from github_support import API_ENV, FakeRepository, NoEngine, install, payload, write_event


def test_comment_that_would_pass_the_limit_is_posted_shortened_and_valid(tmp_path):
    diff = "\n".join(f"-select {i} as old_{i}\n+select {i} as new_{i}" for i in range(900))
    changes = tuple(ChangeView(f"db.model_{i}", "directly modified", "Breaking", "FULL", diff=diff)
                    for i in range(12))
    view = CommentView(marker=comment_marker(None), status="status", prod_plan=PlanView("prod", changes=changes),
                       approval="1 of 1 required approval(s).")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh)
        client = GithubClient(token="t", repo=Repo("Codertocat", "Hello-World"), seconds_between_writes=0)
        run = BotRun(event=parse_event("pull_request", payload("pull_request/opened.payload.json")),
                     settings=load_settings({}), github=client, context=NoEngine(),
                     outputs=StepOutputs.in_folder(tmp_path))
        post_comment(run, 2, view)
        assert not gh.errors
    body = repo.comments[0]["body"]
    assert len(body) <= COMMENT_LIMIT < len((tmp_path / "summary.md").read_text())
    assert body.count("```") % 2 == 0 and body.count("<details>") == body.count("</details>")
    assert comment_marker(None) in body and "1 of 1 required approval(s)." in body and "shortened" in body


def test_state_and_catalog_on_the_runner_are_refused_inside_github_actions(tmp_path):
    """The default gateway keeps SQLite state and a Derby catalog under .meshbot/: on a fresh runner every
    job would start from nothing, so the PR Environment Synced check fails naming what to configure."""
    from bot.context import Context
    from bot.project.example import write_example

    project = tmp_path / "shop"
    write_example(project)
    raw = payload("pull_request/opened.payload.json")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh)
        code = main(Invocation(command="update-pr-environment", event_name="pull_request",
                               event_path=write_event(tmp_path, raw), project_path=str(project)),
                    env=API_ENV, out=lambda line: None)
        assert not gh.errors
    assert code == 1
    check = repo.check("meshbot - PR Environment Synced")
    assert check["conclusion"] == "failure"
    text = check["output"]["summary"]
    assert "the gateway `local`" in text and "the SQLite file" in text and "embedded Derby metastore" in text
    assert "type: postgres" in text and "remote: sc://" in text and "allow_ephemeral_state: true" in text
    assert "refuses to run on this GitHub Actions runner" in repo.comments[0]["body"]
    assert not (project / ".meshbot" / "state.db").exists()
    assert "meshbot-spark-start" not in {t.name for t in threading.enumerate()}   # no JVM for a refused run

    # The team gateway the example ships (PostgreSQL + Spark Connect) passes; a throwaway demo may opt in.
    run = BotRun(event=parse_event("pull_request", raw), settings=load_settings({}), github=None,
                 context=Context(project, gateway="ci"), outputs=StepOutputs.in_folder(tmp_path / "o"),
                 on_actions_runner=True)
    assert ephemeral_storage_refusal(run) is None
    local = BotRun(event=run.event, settings=load_settings({"allow_ephemeral_state": True}), github=None,
                   context=Context(project), outputs=run.outputs, on_actions_runner=True)
    assert ephemeral_storage_refusal(local) is None
    assert ephemeral_storage_refusal(replace(local, settings=load_settings({}))) is not None
    assert ephemeral_storage_refusal(replace(local, settings=load_settings({}), on_actions_runner=False)) is None


def test_a_secret_that_reads_meshbot_leaves_the_comment_findable():
    """A state user `meshbot` is masked in the text, but the hidden markers the bot finds its comment
    and sections by stay whole."""
    from bot.github.runners.base import redact_markdown
    from bot.report.comment_state import comment_marker, sections
    from bot.redact import register

    register("meshbot")
    body = (f"{comment_marker('ci')}\n<!-- meshbot:section status -->meshbot ran as MESHBOT"
            "<!-- /meshbot:section status -->\n<!-- meshbot:checks {\"detail\": \"user meshbot\"} -->")
    redacted = redact_markdown(body)
    assert comment_marker("ci") in redacted and sections(redacted) == {
        "status": "<!-- meshbot:section status -->*** ran as ***<!-- /meshbot:section status -->"}
    assert "<!-- meshbot:checks {\"detail\": \"user ***\"} -->" in redacted
