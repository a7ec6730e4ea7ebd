"""Notifier: tells the config's notification targets (Slack, JSON webhooks, the console) how applies and runs went."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

import requests

from bot.plan.definition import Plan
from bot.project.config import ProjectConfig
from bot.project.notifications import NotificationTarget
from bot.quality.results import AuditResult, TestResult
from bot.redact import redact
from bot.report.markdown import render
from bot.report.media import Medium

TIMEOUT = (3.05, 5.0)      # connect, read: a slow target must not hold up a deploy
MAX_ERROR = 1500           # characters of an error a message carries
_BODIES = {"slack_webhook": "notification_slack.json.j2", "webhook": "notification_webhook.json.j2"}


@dataclass(frozen=True)
class Origin:
    """What a message names besides the environment: the commit, the PR and the workflow run, when known."""

    commit: str | None = None
    pull_request: int | None = None
    run_url: str | None = None
    repository: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Origin:
        """The GitHub Actions workflow the CLI runs in, if any.

        >>> Origin.from_environ({"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "7", "GITHUB_SHA": "abc"}).run_url
        'https://github.com/o/r/actions/runs/7'
        >>> Origin.from_environ({})
        Origin(commit=None, pull_request=None, run_url=None, repository=None)
        """
        repo, run_id = environ.get("GITHUB_REPOSITORY"), environ.get("GITHUB_RUN_ID")
        server = environ.get("GITHUB_SERVER_URL") or "https://github.com"
        return cls(commit=environ.get("GITHUB_SHA") or None, repository=repo or None,
                   run_url=f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else None)


@dataclass(frozen=True)
class Message:
    """One event as the templates see it; every string already redacted."""

    event: str
    environment: str | None
    models: tuple[str, ...] = ()
    error: str | None = None
    commit: str | None = None
    pull_request: int | None = None
    repository: str | None = None
    run_url: str | None = None
    text: str = ""             # notification.txt.j2 as plain text: the console, the JSON webhook's `text`
    mrkdwn: str = ""           # the same as Slack mrkdwn, for the Slack body
    max_models: int = 20

    @property
    def status(self) -> str:
        return "failure" if self.event.endswith("_failure") else "success" if self.event.endswith("_end") else "info"


def plan_models(plan: Plan) -> tuple[str, ...]:
    """The models a plan changes or backfills, in order."""
    names = {s.snapshot_id: s.name for s in plan.snapshots.values()}
    backfilled = (names.get(b.snapshot_id, b.snapshot_id.name) for b in plan.backfills)
    return tuple(dict.fromkeys([*(c.name for c in plan.changes), *backfilled]))


def evaluated_models(evaluated: Sequence[tuple[str, int, int]]) -> tuple[str, ...]:
    """The models of an apply's or run's (model, start, end) batches.

    >>> evaluated_models([("b", 0, 1), ("a", 0, 1), ("b", 1, 2)])
    ('a', 'b')
    """
    return tuple(sorted({model for model, _, _ in evaluated}))


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _warn_stderr(text: str) -> None:
    _stderr(f"Warning: {text}")


class Notifier:
    """Sends each event to the targets that asked for it. A target that fails costs one warning line,
    never the apply or run it reports on."""

    def __init__(self, targets: Sequence[NotificationTarget], *, origin: Origin = Origin(),
                 warn: Callable[[str], None] = _warn_stderr, out: Callable[[str], None] = _stderr,
                 session: Any = None) -> None:
        self.targets = tuple(targets)
        self.origin = origin
        self._warn = warn
        self._out = out                           # where a console target prints
        self._session = session or requests

    @classmethod
    def from_config(cls, config: ProjectConfig, **kwargs: Any) -> Notifier:
        return cls(config.notification_targets, **kwargs)

    def send(self, event: str, environment: str | None = None, *, models: Sequence[str] = (),
             error: BaseException | str | None = None) -> None:
        """Tell every target whose `notify_on` holds `event`."""
        targets = [t for t in self.targets if t.wants(event)]
        if not targets:
            return
        message = self._message(event, environment, models, error)
        for target in targets:
            try:
                self._deliver(target, message)
            except Exception as error:   # noqa: BLE001 - a notification never fails what it reports on
                self._warn(redact(f"notification `{event}` to {target.config_key} failed: "
                                  f"{type(error).__name__}: {error}; nothing else is affected"))

    def failed(self, stage: str, environment: str | None, error: BaseException, *,
               models: Sequence[str] = ()) -> None:
        """`<stage>_failure` (apply or run), preceded by audit_failure / test_failure when those caused it."""
        failures = getattr(error, "failures", ()) or ()
        audits = sorted({f.model for f in failures if isinstance(f, AuditResult)})
        tests = sorted({f.model for f in failures if isinstance(f, TestResult)})
        if audits:
            self.send("audit_failure", environment, models=audits, error=error)
        if tests:
            self.send("test_failure", environment, models=tests, error=error)
        self.send(f"{stage}_failure", environment, models=models, error=error)

    def _message(self, event: str, environment: str | None, models: Sequence[str],
                 error: BaseException | str | None) -> Message:
        text = redact(str(error)) if error is not None else None
        if text and len(text) > MAX_ERROR:
            text = text[:MAX_ERROR] + " ..."
        o = self.origin
        message = Message(event=event, environment=environment, models=tuple(dict.fromkeys(models)),
                          error=text, commit=o.commit, pull_request=o.pull_request,
                          repository=o.repository, run_url=redact(o.run_url) if o.run_url else None)
        return replace(message, text=redact(render("notification.txt.j2", message)).strip(),
                       mrkdwn=redact(render("notification.txt.j2", message, medium=Medium.SLACK)).strip())

    def _deliver(self, target: NotificationTarget, message: Message) -> None:
        if target.type == "console":
            self._out(message.text)
            return
        body = redact(render(_BODIES[target.type], message))
        json.loads(body)   # never post a body a template (or a redaction) left invalid
        problem = self._post(target, body.encode("utf-8"))
        if problem:
            host = urlsplit(target.url or "").hostname or "?"
            self._warn(redact(f"notification `{message.event}` to {target.config_key} ({target.type}, "
                              f"{host}) failed: {problem}; nothing else is affected"))

    def _post(self, target: NotificationTarget, body: bytes) -> str | None:
        """None once the target took it; else why not, after one retry of a connection error or 5xx."""
        problem = "not sent"
        for _ in range(2):
            try:
                response = self._session.post(target.url, data=body, timeout=TIMEOUT,
                                              headers={"Content-Type": "application/json", **dict(target.headers)})
            except requests.Timeout:
                problem = f"no answer within {TIMEOUT[1]:.0f} s"
                continue
            except requests.RequestException as error:   # the text names the URL: say only what kind
                problem = "connection failed" if isinstance(error, requests.ConnectionError) else type(error).__name__
                continue
            if response.status_code < 300:
                return None
            problem = f"HTTP {response.status_code}"
            if response.status_code < 500 and response.status_code != 429:
                return problem
        return problem
