"""Test helpers for the GitHub bot: a `responses` mock of api.github.com that validates every request
and every mocked response against GitHub's OpenAPI description in tests/fixtures/github (unknown operations fail).

Where the GitHub layer's tests are: bot/github/X.py and bot/github/runners/X.py are tested in
tests/test_github_X.py (runners too, e.g. runners/pr.py in test_github_pr.py; the two folders share no module
name). A module without such a file is listed, with the files that test it, in GITHUB_TESTED_ELSEWHERE in
tests/test_architecture.py, which also names the end-to-end scenario files (comment, lifecycle, trust,
fresh_clone, workflows: event → gate → runners → comment and checks) and fails when a new module has neither.
Helpers two test files share live here, fixtures included (import them by name: `scenario`, `bot`,
`receiver`, `no_waiting`)."""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
import requests
import responses
from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse

from bot.plan.apply import ApplyResult
from bot.diff.table_diff import ModelDataDiff
from bot.diff.plan_regressions import PlanComparison
from bot.diff.review import ReviewOptions, ReviewResult
from bot.errors import EngineError
from bot.github.action import Invocation, main
from bot.plan.definition import (Backfill, BackfillKind, ChangeType, ModelChange, Plan, PlanOptions,
                                 ProgressCallback)
from bot.plan.drift import Drift, DriftedModel, DriftPlan
from bot.plan.janitor import JanitorResult
from bot.plan.estimate import BackfillEstimate, estimate_backfills
from bot.plan.rollback import RollbackResult
from bot.plan.cron_run import RunResult
from bot.project.config import ModelDefaults, ProjectConfig, UserConfig
from bot.quality.results import TestResult, TestSuiteResult
from bot.snapshot import ChangeCategory, Fingerprint, Snapshot
from bot.state.protocol import BatchTimes, Environment

GITHUB_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "github"   # see SOURCE.md there
SPEC_PATH = GITHUB_FIXTURES / "github-openapi-subset.json"
WEBHOOKS = GITHUB_FIXTURES / "webhooks"
API = "https://api.github.com"


@lru_cache(maxsize=1)
def spec_dict() -> dict[str, Any]:
    return json.loads(SPEC_PATH.read_text())


@lru_cache(maxsize=1)
def openapi() -> OpenAPI:
    """The validator. GitHub's description uses `discriminator` without `mapping` (check runs), which
    openapi-core resolves to non-existent component names; the `oneOf` alone still validates, so those
    hint-only discriminators are dropped."""
    return OpenAPI.from_dict(_drop_unmapped_discriminators(copy.deepcopy(spec_dict())))


def _drop_unmapped_discriminators(node: Any) -> Any:
    if isinstance(node, dict):
        if isinstance(node.get("discriminator"), dict) and "mapping" not in node["discriminator"]:
            del node["discriminator"]
        for value in node.values():
            _drop_unmapped_discriminators(value)
    elif isinstance(node, list):
        for value in node:
            _drop_unmapped_discriminators(value)
    return node


def payload(relative: str) -> dict[str, Any]:
    """A real webhook payload from tests/fixtures/github/webhooks."""
    return json.loads((WEBHOOKS / relative).read_text())


def _resolve(node: Any) -> Any:
    if isinstance(node, dict) and "$ref" in node:
        target: Any = spec_dict()
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _resolve(target)
    return node


def example(path: str, method: str, status: str = "200") -> Any:
    """The spec's first example body for an operation's response (deep copy, safe to edit)."""
    response = _resolve(spec_dict()["paths"][path][method.lower()]["responses"][status])
    content = response["content"]["application/json"]
    if "examples" in content:
        body = copy.deepcopy(_resolve(next(iter(content["examples"].values())))["value"])
    else:
        body = copy.deepcopy(content["example"])
    return _fill_gaps(path, body)


def _fill_gaps(path: str, body: Any) -> Any:
    """A few of GitHub's own examples miss fields their schemas require; fill exactly those."""
    if path.endswith("/permission"):
        body["user"].setdefault("role_name", body.get("role_name", "admin"))
    for pull in (body if isinstance(body, list) else [body]):
        if isinstance(pull, dict):
            for team in pull.get("requested_teams", None) or []:
                team.setdefault("type", "organization")
    return body


def _operations() -> list[tuple[str, re.Pattern[str], str]]:
    ops = []
    for path, item in spec_dict()["paths"].items():
        # `{path}` (a file's path in the contents API) holds slashes: `repos/o/r/contents/analytics/config.yaml`,
        # and so does a git reference: `repos/o/r/git/ref/heads/main`
        wide = path.replace("{path}", ".+").replace("/git/ref/{ref}", "/git/ref/.+")
        pattern = re.compile("^" + re.sub(r"\{[^}]+\}", r"[^/]+", wide) + "$")
        for method in item:
            if method in ("get", "post", "patch", "put", "delete"):
                ops.append((method.upper(), pattern, path))
    return ops


def _one_segment_path(request: requests.PreparedRequest, template: str) -> requests.PreparedRequest:
    """The request as openapi-core can match it: a `{path}` value's slashes (GitHub takes `contents/a/b.yaml`)
    written as %2F, since the validator reads a path parameter as one segment."""
    if template.endswith("/git/ref/{ref}"):
        head, _, ref = request.url.partition("/git/ref/")
        checked = request.copy()
        checked.url = f"{head}/git/ref/{ref.replace('/', '%2F')}"
        return checked
    if not template.endswith("/{path}"):
        return request
    head, _, rest = request.url.partition("/contents/")
    file_path, query = (rest.split("?", 1) + [""])[:2]
    checked = request.copy()
    checked.url = f"{head}/contents/{file_path.replace('/', '%2F')}" + (f"?{query}" if query else "")
    return checked


@dataclass(frozen=True)
class Answer:
    """A stateful fake's response with its own status (e.g. 404 for a file that does not exist)."""

    status: int
    body: Any


Handler = Callable[[requests.PreparedRequest], tuple[int, dict[str, str], Any]]


@dataclass
class GithubMock:
    """Routes keyed by (METHOD, spec path template); each route is a queue of responses (last repeats)."""

    routes: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, method: str, path: str, body: Any = None, *, status: int = 200,
            headers: dict[str, str] | None = None, validate: bool = True) -> None:
        """Queue a response for an operation of the spec (`path` is the spec's template).

        `body` may be a callable `(request path, request JSON) -> response JSON` for stateful fakes, or
        an `Answer` when the status depends on the request."""
        if path not in spec_dict()["paths"] or method.lower() not in spec_dict()["paths"][path]:
            raise AssertionError(f"{method} {path} is not an operation of the OpenAPI subset")
        self.routes.setdefault((method.upper(), path), []).append((status, headers or {}, body, validate))

    def handler(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        url = request.url.split("?")[0].replace("api.github.com:443", "api.github.com")
        path = url[len(API):]
        request.url = request.url.replace("api.github.com:443", "api.github.com")
        template = next((p for m, pat, p in _operations() if m == request.method and pat.match(path)), None)
        body = json.loads(request.body) if request.body else None
        self.calls.append((request.method, path, body))
        if template is None:
            self.errors.append(f"unknown operation {request.method} {path}")
            raise AssertionError(f"the bot called {request.method} {path}, not in the OpenAPI subset")
        checked = _one_segment_path(request, template)
        try:
            openapi().validate_request(RequestsOpenAPIRequest(checked))
        except Exception as error:   # noqa: BLE001 - report every validation failure as a test error
            self.errors.append(f"invalid request {request.method} {path}: {_why(error)}")
            raise AssertionError(self.errors[-1]) from error
        queue = self.routes.get((request.method, template))
        if not queue:
            self.errors.append(f"no mocked response for {request.method} {template}")
            raise AssertionError(self.errors[-1])
        status, headers, payload_, validate = queue.pop(0) if len(queue) > 1 else queue[0]
        if callable(payload_):
            payload_ = payload_(path, body)
            if isinstance(payload_, Answer):
                status, payload_ = payload_.status, payload_.body
        text = json.dumps(payload_) if payload_ is not None else ""
        if validate:
            self._validate_response(checked, status, headers, text)
        return status, {"Content-Type": "application/json", **headers}, text

    def _validate_response(self, request, status, headers, text) -> None:
        response = requests.Response()
        response.status_code = status
        response._content = text.encode()
        response.headers.update({"Content-Type": "application/json", **headers})
        response.request = request
        try:
            openapi().validate_response(RequestsOpenAPIRequest(request), RequestsOpenAPIResponse(response))
        except Exception as error:   # noqa: BLE001
            self.errors.append(f"mocked response of {request.method} {request.url} invalid: {_why(error)}")
            raise AssertionError(self.errors[-1]) from error

    def fail_once(self, method: str, path: str, *, status: int, headers: dict[str, str] | None = None,
                  message: str = "error") -> None:
        """Make the next call of an operation fail once before its current (last) response."""
        queue = self.routes[(method.upper(), path)]
        queue.insert(0, (status, headers or {}, {"message": message, "documentation_url": "https://docs.github.com"},
                         False))

    def sent(self, method: str, pattern: str) -> list[Any]:
        """Bodies of the calls whose path matches the regex `pattern`."""
        return [b for m, p, b in self.calls if m == method and re.search(pattern, p)]


def install(rsps: responses.RequestsMock) -> GithubMock:
    mock = GithubMock()
    for method in ("GET", "POST", "PATCH", "PUT", "DELETE"):
        rsps.add_callback(method, re.compile(r"https://api\.github\.com(:443)?/.*"), callback=mock.handler)
    return mock


def _why(error: BaseException) -> str:
    """The innermost schema errors with their paths, short enough to read."""
    cause = error.__cause__ or error
    details = getattr(cause, "schema_errors", None) or ()
    parts = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in details]
    return "; ".join(parts) or repr(cause)[:300]


def pull_request_example(**changes: Any) -> dict[str, Any]:
    """GET /pulls/{n} example. GitHub's own example lacks the `type` its schema requires in
    requested_teams, so that one field is filled in."""
    body = example("/repos/{owner}/{repo}/pulls/{pull_number}", "get")
    body.update(changes)
    return body


PATHS = {
    "comments": "/repos/{owner}/{repo}/issues/{issue_number}/comments",
    "comment": "/repos/{owner}/{repo}/issues/comments/{comment_id}",
    "reactions": "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
    "checks": "/repos/{owner}/{repo}/check-runs",
    "check": "/repos/{owner}/{repo}/check-runs/{check_run_id}",
    "pull": "/repos/{owner}/{repo}/pulls/{pull_number}",
    "files": "/repos/{owner}/{repo}/pulls/{pull_number}/files",
    "reviews": "/repos/{owner}/{repo}/pulls/{pull_number}/reviews",
    "commit_pulls": "/repos/{owner}/{repo}/commits/{commit_sha}/pulls",
    "permission": "/repos/{owner}/{repo}/collaborators/{username}/permission",
    "merge": "/repos/{owner}/{repo}/pulls/{pull_number}/merge",
    "contents": "/repos/{owner}/{repo}/contents/{path}",
    "compare": "/repos/{owner}/{repo}/compare/{basehead}",
    "branch": "/repos/{owner}/{repo}/git/ref/{ref}",
}


def default_branch_config(cicd_bot: dict[str, Any] | None = None, users: Sequence[UserConfig] = ()) -> str:
    """A config.yaml's bot sections, as the default branch would hold them (the trusted settings)."""
    import yaml

    data: dict[str, Any] = {"cicd_bot": dict(cicd_bot or {})}
    if users:
        data["users"] = [{"username": u.username, "github_username": u.github_username, "roles": list(u.roles)}
                         for u in users]
    return yaml.safe_dump(data)


@dataclass
class FakeRepository:
    """A small stateful GitHub repository behind GithubMock: comments, check runs, one pull request,
    its reviews and files, collaborator permissions. Every answer starts from the spec's example, so it
    validates against the OpenAPI subset like everything else."""

    mock: GithubMock
    bot_login: str = "github-actions[bot]"
    comments: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[int, dict[str, Any]] = field(default_factory=dict)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=lambda: ["models/customer_revenue.sql"])
    permissions: dict[str, str] = field(default_factory=dict)
    reactions: list[tuple[int, str]] = field(default_factory=list)
    pull: dict[str, Any] = field(default_factory=dict)
    merges: list[dict[str, Any]] = field(default_factory=list)
    default_config: str | None = ""          # config.yaml on the default branch; None: the file does not exist
    default_branch: str = "master"           # the payloads' repository.default_branch
    released_on_default_branch: bool = True  # what GET /compare/{default}...{sha} says of a tagged commit
    pr_behind_by: int = 0                    # commits of the base the PR head lacks (GET /compare/{base}...{head})
    default_branch_sha: str = "d" * 40       # the newest commit of every branch (GET /git/ref/heads/{branch})
    contents_reads: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        m, p = self.mock, PATHS
        m.add("GET", p["contents"], self._contents)
        m.add("GET", p["compare"], self._compare)
        m.add("GET", p["branch"], self._branch)

        m.add("GET", p["comments"], lambda path, body: self.comments)
        m.add("POST", p["comments"], self._create_comment, status=201)
        m.add("PATCH", p["comment"], self._edit_comment)
        m.add("POST", p["reactions"], self._react, status=201)
        m.add("POST", p["checks"], self._create_check, status=201)
        m.add("PATCH", p["check"], self._update_check)
        m.add("GET", p["pull"], lambda path, body: self.pull)
        m.add("GET", p["commit_pulls"], lambda path, body: [self._simple_pull()] if path.endswith(
            f"/{self.pull['merge_commit_sha']}/pulls") else [])
        m.add("GET", p["files"], lambda path, body: [self._file(n) for n in self.files])
        m.add("GET", p["reviews"], lambda path, body: self.reviews)
        m.add("GET", p["permission"], self._permission)
        m.add("PUT", p["merge"], self._merge)

    def refuse_merges(self, status: int = 405, message: str = "Pull Request is not mergeable") -> None:
        """PUT .../merge answers `status` (405 not mergeable, 409 head moved) from now on."""
        self.mock.routes[("PUT", PATHS["merge"])] = [(status, {}, {"message": message}, True)]

    def _merge(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.merges.append(dict(body))
        item = example(PATHS["merge"], "put")
        item.update(merged=True, sha="c" * 40)
        self.pull.update(state="closed", merged_at="2024-01-09T00:00:00Z", merge_commit_sha="c" * 40)
        return item

    def previewed(self, head: str, *, gateway: str | None = None) -> None:
        """The bot's PR comment as a sync of `head` leaves it (what `/deploy` requires): see previewed_comment."""
        self._create_comment("", {"body": previewed_comment(head, gateway=gateway)})

    def set_pull(self, raw: dict[str, Any], *, merged: bool = False, merge_sha: str | None = None,
                 **fields: Any) -> None:
        """The pull request GET /pulls/{n} answers: the spec example with the webhook's identity (and
        `fields` such as mergeable=None, mergeable_state="blocked")."""
        pull = pull_request_example(**fields)
        pull.update(number=raw["number"], title=raw["title"], state=fields.get("state", "closed" if merged else "open"),
                    merged_at="2024-01-08T00:00:00Z" if merged else None,
                    merge_commit_sha=merge_sha or pull["merge_commit_sha"])
        pull["user"]["login"] = raw["user"]["login"]
        for side in ("head", "base"):
            pull[side].update(sha=raw[side]["sha"], ref=raw[side]["ref"])
            if raw[side]["repo"] is None:
                pull[side]["repo"] = None
            else:
                pull[side]["repo"]["full_name"] = raw[side]["repo"]["full_name"]
        self.pull = pull

    def _simple_pull(self) -> dict[str, Any]:
        """The same pull request in the `pull-request-simple` shape of GET /commits/{sha}/pulls."""
        item = example(PATHS["commit_pulls"], "get")[0]
        for key in ("number", "title", "state", "merged_at", "merge_commit_sha"):
            item[key] = self.pull[key]
        item["user"]["login"] = self.pull["user"]["login"]
        for side in ("head", "base"):
            item[side].update(sha=self.pull[side]["sha"], ref=self.pull[side]["ref"])
            item[side]["repo"]["full_name"] = self.pull[side]["repo"]["full_name"]
        return item

    def review(self, login: str, state: str, commit_id: str, submitted_at: str) -> None:
        item = example(PATHS["reviews"], "get")[0]
        item.update(state=state, commit_id=commit_id, submitted_at=submitted_at, id=len(self.reviews) + 80)
        item["user"]["login"] = login
        self.reviews.append(item)

    def check(self, name: str) -> dict[str, Any]:
        """The latest check run with this name."""
        found = [c for _, c in sorted(self.checks.items()) if c["name"] == name]
        assert found, f"no check run named {name!r}; have {sorted({c['name'] for c in self.checks.values()})}"
        return found[-1]

    def _create_comment(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        item = example(PATHS["comments"], "post", "201")
        item.update(id=1000 + len(self.comments), body=body["body"])
        item["user"]["login"] = self.bot_login
        self.comments.append(item)
        return item

    def _edit_comment(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        comment_id = int(path.rsplit("/", 1)[1])
        item = next(c for c in self.comments if c["id"] == comment_id)
        item["body"] = body["body"]
        return item

    def _react(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.reactions.append((int(path.split("/")[-2]), body["content"]))
        item = example(PATHS["reactions"], "post", "201")
        item["content"] = body["content"]
        return item

    def _create_check(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        check_id = 5000 + len(self.checks)
        self.checks[check_id] = dict(body)
        item = example(PATHS["checks"], "post", "201")
        item.update(id=check_id, name=body["name"], head_sha=body["head_sha"], status=body.get("status", "queued"),
                    html_url=f"https://github.com/Codertocat/Hello-World/runs/{check_id}")
        return item

    def _update_check(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        check_id = int(path.rsplit("/", 1)[1])
        self.checks[check_id].update(body)
        item = example(PATHS["check"], "patch")
        item.update(id=check_id, name=self.checks[check_id]["name"])
        return item

    def _file(self, name: str) -> dict[str, Any]:
        item = example(PATHS["files"], "get")[0]
        item["filename"] = name
        return item

    def _contents(self, path: str, body: Any) -> dict[str, Any] | Answer:
        relative = path.split("/contents/", 1)[1]
        self.contents_reads.append(relative)
        if relative != "config.yaml" or self.default_config is None:
            return Answer(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
        item = copy.deepcopy(_resolve(spec_dict()["components"]["examples"][
            "content-file-response-if-content-is-a-file"])["value"])
        item.update(name="config.yaml", path="config.yaml", encoding="base64", type="file",
                    content=base64.b64encode(self.default_config.encode()).decode(),
                    size=len(self.default_config.encode()))
        return item

    def _branch(self, path: str, body: Any) -> dict[str, Any]:
        item = example(PATHS["branch"], "get")
        item["ref"] = "refs/" + path.split("/git/ref/", 1)[1]
        item["object"]["sha"] = self.default_branch_sha
        return item

    def _compare(self, path: str, body: Any) -> dict[str, Any]:
        item = example(PATHS["compare"], "get")
        base, head = path.rsplit("/", 1)[1].split("...", 1)
        if base == head:                                       # a branch against itself: its newest commit
            item.update(status="identical", ahead_by=0, behind_by=0)
            item["base_commit"]["sha"] = self.default_branch_sha
        elif self.pull and head == self.pull["head"]["sha"]:   # a PR head against its base
            item.update(status="ahead" if not self.pr_behind_by else "diverged", behind_by=self.pr_behind_by)
        else:                                                  # a tagged commit against the default branch
            item["status"] = "behind" if self.released_on_default_branch else "diverged"
        return item

    def _permission(self, path: str, body: Any) -> dict[str, Any]:
        login = path.split("/")[-2]
        level = self.permissions.get(login, "read")
        item = example(PATHS["permission"], "get")
        item.update(permission=level, role_name=level)
        item["user"]["login"] = login
        return item


class FakeEngine:
    """A small stand-in for bot.context.Context where no engine behaviour is asserted: a prod plan with
    `changed` models until it is deployed, PR environments that exist once applied, unit tests that pass.
    It answers with the engine's own result types (it satisfies bot.github.ports.EngineContext) and records
    what it was asked (plans, applies, invalidations)."""

    def __init__(self, cicd_bot: dict[str, Any] | None = None, *, users: tuple[UserConfig, ...] = (),
                 changed: tuple[str, ...] = ("shop.orders",), environments: tuple[str, ...] = ()) -> None:
        self._config = ProjectConfig(root=Path("."), gateways={}, default_gateway="local",
                                     model_defaults=ModelDefaults(), cicd_bot=dict(cicd_bot or {}), users=users)
        self.changed = changed
        self.envs = set(environments)
        self.deployed = False
        self.plans: list[str] = []
        self.applied: list[str] = []
        self.invalidated: list[str] = []
        self.rolled_back: list[tuple[str, str | None]] = []   # (environment, --to plan id) of each rollback
        self.runs: list[str] = []
        self.options: list[PlanOptions] = []     # the options of each plan, in order
        self.batches = 0          # batches each changed model's backfill computes in a plan
        self.batch_days = 1       # daily intervals per batch
        self.due: dict[str, list[tuple[int, int]]] = {}
        self.failing: set[str] = set()
        self.busy: dict[str, str] = {}
        self.batch_times: dict[tuple[str, str], BatchTimes] = {}   # what earlier batches took, as recorded
        self.versions: dict[str, str] | None = None    # model_versions(); None: the changed models' new versions
        # rendered queries, model -> (before, after): unchanged models (before == after) join the plan's snapshots
        self.queries: dict[str, tuple[str, str]] = {}
        self.parents: dict[str, tuple[str, ...]] = {}   # depends_on of the models in `queries`
        self.diffs: tuple[ModelDataDiff, ...] = ()     # the review's data diffs
        self.plans_compared: tuple[PlanComparison, ...] = ()   # the review's plan comparisons
        self.review_options: list[ReviewOptions] = []           # what each review was asked
        self.failing_tests: dict[str, str] = {}        # unit test name -> its failure message
        self.children: dict[str, tuple[str, ...]] = {} # changed model -> the breaking children it lists
        self.promoted: frozenset[str] | None = None    # the models a PR environment's plan gives views (None: all)
        self.drifted: dict[str, tuple[str, str]] = {}  # drift(): model -> (deployed identifier, identifier now)
        self.drift_asked: list[dict[str, str] | None] = []

    @property
    def config(self) -> ProjectConfig:
        return self._config

    def load(self) -> None:
        pass

    def start_engine(self) -> None:
        pass

    def _snapshot(self, name: str, version: str) -> Snapshot:
        before, after = self.queries.get(name, ("", ""))
        return Snapshot(name=name, fingerprint=Fingerprint(data_hash=version, metadata_hash="0"),
                        version=version, kind="FULL", rendered_query=before if version == "1" else after,
                        definition={"depends_on": list(self.parents[name])} if name in self.parents else {})

    def _changes(self, environment: str, snapshots: dict[str, Snapshot]) -> tuple[ModelChange, ...]:
        if (environment == "prod" and self.deployed) or (environment != "prod" and environment in self.envs):
            return ()
        return tuple(ModelChange(
            name=name, change=ChangeType.DIRECTLY_MODIFIED, category=ChangeCategory.BREAKING, kind="FULL",
            snapshot=snapshots[name], previous=self._snapshot(name, "1") if name in self.queries else None,
            diff=f"- SELECT 1 AS {name.split('.')[-1]}\n+ SELECT 2 AS {name.split('.')[-1]}",
            indirect_children=self.children.get(name, ()))
            for name in self.changed)

    def plan(self, environment: str = "prod", *, options: PlanOptions = PlanOptions()) -> Plan:
        self.plans.append(environment)
        self.options.append(options)
        version = "1" if environment == "prod" and self.deployed else "2"
        snapshots = {name: self._snapshot(name, version) for name in self.changed}
        snapshots.update({name: self._snapshot(name, "1") for name in self.queries if name not in snapshots})
        exists = environment in self.envs or (environment == "prod" and self.deployed)
        previous = Environment(name=environment, snapshots=(), plan_id="applied", finalized_ts=1) if exists else None
        return Plan(plan_id=f"plan_{len(self.plans)}", environment=environment,
                    new_environment=not exists, expected_plan_id=None,
                    previous_environment=previous, snapshots=snapshots, new_snapshots=(),
                    changes=self._changes(environment, snapshots), options=options,
                    promoted=None if environment == "prod" else self.promoted,
                    backfills=tuple(Backfill(snapshot_id=s.snapshot_id, kind=BackfillKind.INTERVALS,
                                             intervals=tuple((d * 86_400_000, (d + 1) * 86_400_000)
                                                             for d in range(self.batches * self.batch_days)),
                                             batches=tuple((d * self.batch_days * 86_400_000,
                                                            (d + 1) * self.batch_days * 86_400_000)
                                                           for d in range(self.batches)))
                                    for s in snapshots.values() if self.batches and not exists
                                    and s.name in self.changed))

    def apply(self, plan: Plan, *, progress: ProgressCallback | None = None) -> ApplyResult:
        self.applied.append(plan.environment)
        if plan.environment == "prod":
            self.deployed = True
        else:
            self.envs.add(plan.environment)
        names = {snap.snapshot_id: snap.name for snap in plan.snapshots.values()}
        evaluated = () if plan.options.skip_backfill else tuple(
            (names[b.snapshot_id], start, end) for b in plan.backfills for start, end in b.batches)
        return ApplyResult(plan_id=plan.plan_id, environment=plan.environment, evaluated=evaluated,
                           views_created=0, skipped_backfill=plan.options.skip_backfill)

    def test(self, *, patterns: Sequence[str] = (), files: Sequence[str] = ()) -> TestSuiteResult:
        return TestSuiteResult(results=tuple(
            TestResult(name=name, file=Path("tests/test_models.yaml"), model="shop.orders",
                       passed=name not in self.failing_tests, message=self.failing_tests.get(name, ""))
            for name in dict.fromkeys(("test_1", "test_2", *self.failing_tests))))

    def environment_names(self) -> list[str]:
        return sorted(self.envs)

    def run(self, environment: str = "prod", *, execution_time: str | None = None,
            progress: ProgressCallback | None = None, skip_when_busy: bool = False) -> RunResult:
        """Everything in `due` (model -> batches as (start ms, end ms)) is processed once; `failing`
        environments raise as a failed model would; a `busy` environment (name -> holder) is skipped by a
        run that does not wait (Context.run's contract, tested on real state in test_cron_run)."""
        self.runs.append(environment)
        if skip_when_busy and environment in self.busy:
            return RunResult(environment=environment, execution_time=0, busy=self.busy[environment])
        if environment in self.failing:
            raise EngineError(f"model `shop.orders` failed for [2024-01-07 00:00, 2024-01-08 00:00): boom in {environment}")
        evaluated = tuple((model, s, e) for model, spans in sorted(self.due.items()) for s, e in spans)
        self.due = {}
        return RunResult(environment=environment, execution_time=0, evaluated=evaluated)

    def rollback(self, environment: str, *, to_plan_id: str | None = None) -> RollbackResult:
        self.rolled_back.append((environment, to_plan_id))
        return RollbackResult(environment=environment, plan_id="c" * 32, from_plan_id="b" * 32,
                              to_plan_id=to_plan_id or "a" * 32, repointed=tuple(self.changed), seconds=0.5)

    def invalidate(self, environment: str, *, sync: bool = False) -> JanitorResult | None:
        self.invalidated.append(environment)
        self.envs.discard(environment)
        return None

    def model_versions(self) -> dict[str, str]:
        if self.versions is not None:
            return dict(self.versions)
        return {name: self._snapshot(name, "2").identifier for name in self.changed}

    def backfill_estimates(self, plan: Plan) -> tuple[BackfillEstimate, ...]:
        return estimate_backfills(plan, self.batch_times)

    def machine_local_storage(self) -> tuple[str, ...]:
        return ()          # stands for a team gateway: state and catalog outlive the runner

    def drift(self, environment: str = "prod", *, head_versions: dict[str, str] | None = None) -> Drift:
        """`drifted` (model -> (deployed, now)) as changed by a local plan after the last deploy."""
        self.drift_asked.append(head_versions)
        if not self.drifted:
            return Drift(environment, DriftPlan("deployed", 0, "deploy main@aaaa"))
        return Drift(environment, DriftPlan("deployed", 0, "deploy main@aaaa"),
                     tuple(DriftedModel(name, before, now, "local1") for name, (before, now) in self.drifted.items()),
                     (DriftPlan("local1", 86_400_000, "plan by ann@laptop"),))

    def view_name(self, model_name: str, environment: str) -> str:
        schema, table = model_name.split(".")
        return f"{schema}__{environment}.{table}"

    def review(self, plan: Plan, options: ReviewOptions | None = None) -> ReviewResult:
        # the review itself is asserted on the real engine (test_preview_diff, test_plan_regressions, lifecycle)
        self.review_options.append(options or ReviewOptions())
        return ReviewResult(diffs=self.diffs, plan_comparisons=self.plans_compared
                            if (options or ReviewOptions()).plan_queries else ())


def pr_comment_event(body: str = "/deploy", login: str = "writer", *, number: int = 2,
                     comment_id: int = 77) -> dict[str, Any]:
    """The real issue_comment payload, turned into a comment by `login` on pull request `number`."""
    raw = copy.deepcopy(payload("issue_comment/created.payload.json"))
    raw["issue"]["number"] = number
    raw["issue"]["pull_request"] = {"url": f"{API}/repos/Codertocat/Hello-World/pulls/{number}"}
    raw["comment"].update(body=body, id=comment_id)
    raw["comment"]["user"]["login"] = login
    return raw


def git_checkout(path: Path, files: dict[str, str] | None = None, *, default_branch: str = "master") -> str:
    """A git repository at `path` with `files` committed, as a job's checkout: its `origin/<default_branch>`
    ref points at the commit (the trusted default branch in local mode). Returns the commit's SHA."""
    import subprocess

    path.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"README.md": "checkout\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com",
                               "-c", "commit.gpgsign=false", *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q", "-b", default_branch)
    git("add", "-A")
    git("commit", "-q", "-m", "checkout")
    git("update-ref", f"refs/remotes/origin/{default_branch}", "HEAD")
    return git("rev-parse", "HEAD")


def git_commit(path: Path, files: dict[str, str], message: str = "next") -> str:
    """Write `files` into the repository at `path` and commit them (its HEAD from now on); returns the SHA."""
    import subprocess

    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


# -- running main() in tests ------------------------------------------------------------------------------

COMMENT_EVENT = "_supplementary/go-playground__webhooks/testdata/github/pull-request-issue-comment.json"
API_ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_token_value", "GITHUB_API_URL": "https://api.github.com"}


class NoEngine:
    """These scenarios must never reach the project: any use of it fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the engine was called ({name}) but should not have been")


def write_event(tmp_path: Path, raw: dict[str, Any]) -> str:
    """`raw` written as the event payload file main() reads; returns its path."""
    path = tmp_path / "event.json"
    path.write_text(json.dumps(raw))
    return str(path)


@pytest.fixture
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """main() builds the real client, whose PyGithub throttles writes with time.sleep: record, never wait."""
    import time

    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits

# -- a deploy job (test_github_deploy, test_github_rollback) ------------------------------------------------

DEPLOY_ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_deploy_token", "GITHUB_API_URL": "https://api.github.com",
              "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
              "GITHUB_RUN_ID": "7"}


def opened_payload(head: str) -> dict:
    """The opened payload, its head being the commit the job checked out."""
    raw = copy.deepcopy(payload("pull_request/opened.payload.json"))
    raw["pull_request"]["head"]["sha"] = head
    return raw


def previewed_comment(head: str, *, gateway: str | None = None) -> str:
    """The bot's PR comment as a sync of `head` leaves it: its checks recorded for that commit and a prod plan
    preview with its digest (what `/deploy` requires before it deploys)."""
    from bot.report.comment_state import checks_marker, comment_marker, plan_digest_marker, section_close, section_open

    return (f"{comment_marker(gateway)}\n{checks_marker(head, ())}\n{section_open('prod_plan')}\n"
            f"{plan_digest_marker('d1g35t', 'shop.orders@1')}\nProd plan preview\n{section_close('prod_plan')}\n")


def dispatch_payload(login: str, **inputs: str) -> dict:
    """meshbot-deploy.yml's `workflow_dispatch` by `login` with `inputs`, on the default branch of the PR payloads' repository."""
    raw = copy.deepcopy(payload("workflow_dispatch/payload.json"))
    raw["repository"] = copy.deepcopy(payload("pull_request/opened.payload.json"))["repository"]
    raw["sender"]["login"] = login
    raw["inputs"] = inputs
    return raw


def pull_payload(head: str, **changes) -> dict:
    raw = opened_payload(head)["pull_request"]
    for key, value in changes.items():
        if key == "head_repo":
            raw["head"]["repo"] = {**raw["head"]["repo"], "full_name": value}
    return raw


class Scenario:
    """A deploy job: main() on a git checkout (its HEAD the PR head), GitHub mocked, a FakeEngine."""

    def __init__(self, tmp_path, gh, engine: FakeEngine) -> None:
        self.tmp_path, self.gh, self.engine = tmp_path, gh, engine
        self.repo = FakeRepository(gh, permissions={"writer": "write"}, default_config=default_branch_config(
            engine.config.cicd_bot, engine.config.users))
        self.outputs = tmp_path / "outputs.env"
        self.lines: list[str] = []
        self.checkout = tmp_path / "checkout"
        self.head = git_checkout(self.checkout)     # the commit the deploy job checked out

    def __call__(self, raw: dict, name: str = "issue_comment", **env: str) -> int:
        path = self.tmp_path / "event.json"
        path.write_text(json.dumps(raw))
        self.summary = self.tmp_path / "summary.md"
        return main(Invocation(event_name=name, event_path=str(path), project_path=str(self.checkout)),
                    env={**DEPLOY_ENV, "GITHUB_OUTPUT": str(self.outputs), "GITHUB_STEP_SUMMARY": str(self.summary),
                         **env},
                    context_factory=lambda p, g: self.engine, out=self.lines.append)

    def commit(self, message: str) -> str:
        """A new commit in the job's checkout (its HEAD from now on); returns its SHA."""
        return git_commit(self.checkout, {"change.txt": message}, message)

    @property
    def replies(self) -> list[str]:
        return [c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" not in c["body"]]

    @property
    def comment(self) -> str:
        return next(c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" in c["body"])

    def output(self, key: str) -> str | None:
        found = [line.split("=", 1)[1] for line in self.outputs.read_text().splitlines()
                 if line.startswith(f"{key}=")] if self.outputs.exists() else []
        return found[-1] if found else None


@pytest.fixture
def scenario(tmp_path):
    """Scenario factory: `scenario(cicd_bot)`, /deploy enabled; fails the test on any invalid GitHub call."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        yield lambda cicd_bot=None: Scenario(tmp_path, gh, FakeEngine({"enable_deploy_command": True,
                                                                        **(cicd_bot or {})}))
        assert not gh.errors, gh.errors


@dataclass
class Played:
    """What a run of `play` left: the repository, the job's HEAD, each event's exit code, the log and the job summary."""

    repo: "FakeRepository"
    head: str
    codes: list[int]
    lines: list[str]
    summary: str


def play(tmp_path: Path, engine: FakeEngine, events: Sequence[tuple[str, dict[str, Any] | None]], *,
         env: dict[str, str]) -> Played:
    """Each (event name, payload) through main() on one checkout whose HEAD is PR #2's head (GitHub answered
    by the OpenAPI-validated mock, loopback passed through for notification receivers); a None payload is
    the real `pull_request` opened payload of that head."""
    import time

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add_passthru("http://127.0.0.1")
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"writer": "write"},
                              default_config=default_branch_config(engine.config.cicd_bot))
        head = git_checkout(tmp_path / "checkout")
        opened = copy.deepcopy(payload("pull_request/opened.payload.json"))
        opened["pull_request"]["head"]["sha"] = head
        repo.set_pull(opened["pull_request"])
        played = Played(repo, head, [], [], "")
        summary, event = tmp_path / "summary.md", tmp_path / "event.json"
        for name, raw in events:
            event.write_text(json.dumps(opened if raw is None else raw))
            sleep, time.sleep = time.sleep, lambda seconds: None   # PyGithub's write throttle
            try:
                played.codes.append(main(
                    Invocation(event_name=name, event_path=str(event), project_path=str(tmp_path / "checkout")),
                    env={**env, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(tmp_path / "out.env"),
                         "GITHUB_SHA": head, "GITHUB_REF": "refs/heads/master"},
                    context_factory=lambda p, g: engine, out=played.lines.append))
            finally:
                time.sleep = sleep
        assert not gh.errors, gh.errors
    played.summary = summary.read_text() if summary.exists() else ""
    return played


# -- notification targets (test_notify, test_github_notify) ------------------------------------------------

TOKEN = "tok-4f9a2c1e"             # in the Slack URL's query: a credential


HEADER_SECRET = "hdr-b7e3d05a91"   # an Authorization header value


RUN_URL = "https://github.com/Codertocat/Hello-World/actions/runs/7"


class Receiver:
    """An HTTP server on 127.0.0.1 (ephemeral port, its own thread) recording each POST; paths under
    /fail answer 500."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 5

            def do_POST(self) -> None:   # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append((self.path, dict(self.headers), body))
                self.send_response(500 if self.path.startswith("/fail") else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def bodies(self, prefix: str) -> list[dict]:
        return [json.loads(body) for path, _, body in self.requests if path.startswith(prefix)]

    def raw(self) -> str:
        return "\n".join(body.decode() for _, _, body in self.requests)


@pytest.fixture
def receiver():
    """A Receiver for one test, stopped after it."""
    server = Receiver()
    yield server
    server.stop()


def refused_url() -> str:
    """A loopback port nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


# -- a PR's bot, event after event (test_github_comment, test_github_cleanup) ---------------------------------

COMMENT_ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_comment_token", "GITHUB_API_URL": API,
               "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
               "GITHUB_RUN_ID": "4242"}


class Bot:
    """A PR's bot: main() for one event at a time, GitHub mocked, a FakeEngine; the PR comment and replies."""

    def __init__(self, tmp_path, gh, engine: FakeEngine) -> None:
        self.tmp_path, self.gh, self.engine = tmp_path, gh, engine
        self.repo = FakeRepository(gh, permissions={"writer": "write"}, default_config=default_branch_config(
            engine.config.cicd_bot, engine.config.users))
        self.repo.set_pull(payload("pull_request/opened.payload.json")["pull_request"])
        self.outputs = tmp_path / "outputs.env"

    def __call__(self, name: str, raw: dict) -> int:
        path = self.tmp_path / "event.json"
        path.write_text(json.dumps(raw))
        self.outputs.write_text("")
        return main(Invocation(event_name=name, event_path=str(path)),
                    env={**COMMENT_ENV, "GITHUB_OUTPUT": str(self.outputs), "GITHUB_STEP_SUMMARY": str(self.tmp_path / "s.md")},
                    context_factory=lambda p, g: self.engine, out=lambda line: None)

    @property
    def comment(self) -> str:
        marked = [c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" in c["body"]]
        assert len(marked) == 1
        return marked[0]

    @property
    def status(self) -> str:
        return self.comment.split("<!-- meshbot:section status -->")[1].split("<!-- /meshbot:section status -->")[0]

    @property
    def replies(self) -> list[str]:
        return [c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" not in c["body"]]

    def outputs_dict(self) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.outputs.read_text().splitlines() if "=" in line)


@pytest.fixture
def bot(tmp_path):
    """Bot factory: `bot(cicd_bot, **FakeEngine options)`; fails the test on any invalid GitHub call."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        yield lambda cicd_bot=None, **kw: Bot(tmp_path, gh, FakeEngine(cicd_bot, **kw))
        assert not gh.errors, gh.errors
