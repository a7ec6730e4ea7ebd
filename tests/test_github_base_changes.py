"""A PR's prod plan preview separates the PR's own changes from changes already on its base branch but not
yet in prod (three tiers: merged to staging, not released): the base commit is the merge base of the
checkout and the base branch, its project is exported from git and loaded for its model versions. Real git;
GitHub mocked (OpenAPI-validated); FakeEngine for the engine."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import responses

from bot.github.action import Invocation, main
from bot.github.base_changes import Origin, base_commit, change_origins
from bot.github.checkout import GitCheckout
from bot.github.event import parse_pull_request
from github_support import FakeEngine, FakeRepository, default_branch_config, install, payload

ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_base_token", "GITHUB_API_URL": "https://api.github.com",
       "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
       "GITHUB_RUN_ID": "9"}


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit(path: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", message)
    return _git(path, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    """main: base commit B; the PR branch: H on top of B; the merge ref: M = merge of H into B2 (main moved)."""
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "master")
    base = _commit(path, {"project/models/orders.sql": "SELECT 1 AS id\n", "README.md": "x\n"}, "base")
    _git(path, "checkout", "-q", "-b", "feature")
    head = _commit(path, {"project/models/customers.sql": "SELECT 2 AS id\n"}, "pr")
    _git(path, "checkout", "-q", "master")
    moved = _commit(path, {"project/models/orders.sql": "SELECT 3 AS id\n"}, "main moves on")
    _git(path, "checkout", "-q", "--detach", moved)
    _git(path, "merge", "-q", "--no-ff", "-m", "merge ref", head)
    return path, {"base": base, "head": head, "moved": moved, "merge": _git(path, "rev-parse", "HEAD")}


def _pr(base_sha: str, head_sha: str) -> object:
    raw = copy.deepcopy(payload("pull_request/opened.payload.json"))["pull_request"]
    raw["base"]["sha"], raw["head"]["sha"] = base_sha, head_sha
    return parse_pull_request(raw)


def test_the_base_commit_is_the_merge_base_of_the_checkout_and_the_base_branch(repo, tmp_path):
    path, commits = repo
    checkout = GitCheckout(path / "project")
    # the merge ref (actions/checkout's default for pull_request) with the base it merged into
    assert base_commit(checkout, _pr(commits["moved"], commits["head"])) == commits["moved"]
    _git(path, "checkout", "-q", commits["head"])                       # a checkout of the PR head
    assert base_commit(checkout, _pr(commits["moved"], commits["head"])) == commits["base"]
    exported = tmp_path / "exported"
    assert checkout.export(commits["moved"], exported)
    assert (exported / "models/orders.sql").read_text() == "SELECT 3 AS id\n"
    assert not (exported / "models/customers.sql").exists() and not (exported / "README.md").exists()

    shallow = tmp_path / "shallow"                                       # actions/checkout's depth 1
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{path}", str(shallow)], check=True)
    assert base_commit(GitCheckout(shallow), _pr(commits["moved"], commits["head"])) is None
    _git(path, "checkout", "-q", commits["merge"])
    two = tmp_path / "two"                                               # meshbot-pr.yml's fetch-depth: 2
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{path}", str(two)], check=True)
    assert _git(two, "rev-parse", "HEAD") == commits["merge"]
    assert base_commit(GitCheckout(two), _pr("", commits["head"])) == commits["moved"]


def test_change_origins_compare_the_plans_versions_with_the_bases():
    engine = FakeEngine(changed=("shop.orders", "shop.customers"))
    plan = engine.plan("prod")
    versions = engine.model_versions()
    assert change_origins(plan, {"shop.orders": versions["shop.orders"], "shop.customers": "older"}) == {
        "shop.orders": Origin.BASE, "shop.customers": Origin.PULL_REQUEST}


def test_the_prod_preview_splits_the_prs_changes_from_the_bases(repo, tmp_path):
    """shop.orders changed on main after the last prod deploy; the PR changes shop.customers: the preview
    lists them under two headings. Without the base in the checkout's history, one list as before."""
    path, commits = repo
    engine = FakeEngine(changed=("shop.orders", "shop.customers"))
    base = FakeEngine(changed=("shop.orders", "shop.customers"))
    base.versions = {"shop.orders": engine.model_versions()["shop.orders"], "shop.customers": "0"}
    opened = []

    def factory(project: str, gateway: str | None) -> FakeEngine:
        opened.append(project)
        return engine if Path(project) == path / "project" else base

    raw = copy.deepcopy(payload("pull_request/opened.payload.json"))
    raw["pull_request"]["base"]["sha"], raw["pull_request"]["head"]["sha"] = commits["moved"], commits["head"]
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repository = FakeRepository(gh, permissions={}, default_config=default_branch_config({}, ()))
        repository.set_pull(raw["pull_request"])
        event = tmp_path / "event.json"
        event.write_text(json.dumps(raw))
        code = main(Invocation(event_name="pull_request", event_path=str(event), project_path=str(path / "project")),
                    env={**ENV, "GITHUB_OUTPUT": str(tmp_path / "out.env")}, context_factory=factory,
                    out=lambda line: None)
        assert not gh.errors, gh.errors
    assert code == 0 and len(opened) == 2 and Path(opened[1]).parents[1].name.startswith("meshbot-base-")
    comment = next(c["body"] for c in repository.comments if "<!-- meshbot:pr-comment" in c["body"])
    prod = comment.split("Prod plan preview")[1]
    own, _, on_base = prod.partition("**On `master`, not yet in prod** (1)")
    assert "**This PR's changes** (1)" in own and "| shop.customers |" in own and "| shop.orders |" not in own
    assert "a deploy of this PR deploys them too" in on_base
    assert "| shop.orders |" in on_base.split("<details>")[0] and "| shop.customers |" not in on_base.split("<details>")[0]
    assert "SQL diff of shop.orders" in on_base and "SQL diff of shop.customers" in on_base   # diffs of both kept


def test_model_versions_are_the_snapshot_identifiers_a_plan_gives(tmp_path):
    """Context.model_versions reads the files only (no state, no Spark) and names the versions a plan would."""
    from bot.context import Context
    from bot.project.example import write_example

    write_example(tmp_path / "shop")
    context = Context(tmp_path / "shop")
    versions = context.model_versions()
    plan = context.plan("prod")
    assert versions == {name: snapshot.identifier for name, snapshot in plan.snapshots.items()}
    context.close()
