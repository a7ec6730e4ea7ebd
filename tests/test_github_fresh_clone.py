"""A whole pull request as GitHub Actions runs it: every event in a fresh clone on a "fresh runner".

Each event is one `meshbot github ... run-all` process with GITHUB_ACTIONS=true, in a new `git clone` of
the repository (no `.meshbot/` from the event before), on the example project's `ci` gateway as shipped:
state in the machine's PostgreSQL (a database of its own), catalog and warehouse on a Spark Connect server
the test starts. What GitHub would answer (the pull request, reviews) comes from an answers file, and the
bot's comment and check runs land in one output folder that outlives the runners, as GitHub's would.

bootstrap prod → opened → synchronize → approving review → push to the default branch (deploy) → closed.

End to end: `meshbot github` (cli) → action.main → gate → runners → local mode's output folder, on Spark Connect.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import subprocess
from collections import defaultdict
from pathlib import Path


from bot.project.example import EXAMPLE_DIR, write_example
from conftest import POSTGRES
from github_support import payload
from spark_servers import PYTHON, ROOT

ENV = "hello_world_2"                 # repository Codertocat/Hello-World, pull request #2
BRANCH, DEFAULT_BRANCH = "changes", "master"
CONFIG_EXTRA = """
cicd_bot:
  deploy_on: merge
users:
  - username: ann
    github_username: ann-gh
    roles: [required_approver]
"""
SCHEMAS = ("shop", "sqlmesh__shop", f"shop__{ENV}")


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
                            cwd=cwd, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def _drop_schemas(url: str) -> None:
    """The Connect server's catalog is shared with other modules: leave it as found."""
    drops = "; ".join(f"s.sql('DROP DATABASE IF EXISTS `{name}` CASCADE')" for name in SCHEMAS)
    script = f"from pyspark.sql import SparkSession; s = SparkSession.builder.remote({url!r}).getOrCreate(); {drops}"
    subprocess.run([str(PYTHON), "-c", script], check=True, capture_output=True, timeout=180)


class Repository:
    """A bare `origin` plus the author's working copy; every event runs in a fresh clone of origin."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env, self.runs = root, env, 0
        self.origin, self.work = root / "origin.git", root / "author"
        self.github = root / "github"               # what GitHub keeps between jobs: comment, checks
        self.answers = root / "answers.json"
        _git(root, "init", "-q", "--bare", "-b", DEFAULT_BRANCH, str(self.origin))
        _git(root, "clone", "-q", str(self.origin), str(self.work))
        _git(self.work, "checkout", "-q", "-b", DEFAULT_BRANCH)
        self.answer()

    def commit(self, message: str) -> str:
        _git(self.work, "add", "-A")
        _git(self.work, "commit", "-q", "-m", message)
        return self.push()

    def push(self) -> str:
        _git(self.work, "push", "-q", "origin", "HEAD")
        return _git(self.work, "rev-parse", "HEAD")

    def answer(self, **answers: object) -> None:
        self.answers.write_text(json.dumps(answers))

    def fresh_clone(self, sha: str) -> Path:
        self.runs += 1
        clone = self.root / f"runner_{self.runs}"
        _git(self.root, "clone", "-q", str(self.origin), str(clone))
        _git(clone, "checkout", "-q", sha)
        assert not (clone / "warehouse" / ".meshbot").exists()
        return clone

    def meshbot(self, clone: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([str(PYTHON), "-m", "bot", "-p", str(clone / "warehouse"), "--gateway", "ci", *args],
                                cwd=clone, env={**self.env, "GITHUB_WORKSPACE": str(clone)},
                                capture_output=True, text=True, timeout=400)
        if check:
            assert result.returncode == 0, f"meshbot {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result

    def event(self, name: str, raw: dict, sha: str) -> subprocess.CompletedProcess:
        """Handle one webhook the way the workflow does, on a fresh runner checked out at `sha`."""
        clone = self.fresh_clone(sha)
        path = self.root / f"event_{self.runs}.json"
        path.write_text(json.dumps(raw))
        result = subprocess.run(
            [str(PYTHON), "-m", "bot", "github", "--event-name", name, "--event-path", str(path),
             "--output-dir", str(self.github), "--answers", str(self.answers),
             "-p", str(clone / "warehouse"), "--gateway", "ci", "run-all"],
            cwd=clone, env={**self.env, "GITHUB_WORKSPACE": str(clone), "GITHUB_SHA": sha},
            capture_output=True, text=True, timeout=600)
        assert "Traceback" not in result.stderr, result.stderr
        state_left = clone / "warehouse" / ".meshbot"
        assert not (state_left / "state.db").exists() and not (state_left / "metastore_db").exists()
        return result

    @property
    def comment(self) -> str:
        return (self.github / "comment.md").read_text()

    def output(self, key: str) -> str | None:
        """The step output's last value (outputs.env collects every job's outputs)."""
        lines = (self.github / "outputs.env").read_text().splitlines()
        return next((line.split("=", 1)[1] for line in reversed(lines) if line.startswith(f"{key}=")), None)

    def checks(self) -> dict[str, str | None]:
        rows = json.loads((self.github / "check_runs.json").read_text())
        return {row["name"].removeprefix("meshbot - ").removesuffix(" (ci)"): row["conclusion"] for row in rows}

    def fetch(self, sql: str) -> list[dict]:
        clone = self.fresh_clone(_git(self.work, "rev-parse", "HEAD"))
        return json.loads(self.meshbot(clone, "fetchdf", "--json", sql).stdout)


def _expected_revenue(factor: float) -> dict[str, float]:
    rows = lambda name: list(csv.DictReader((EXAMPLE_DIR / "seeds" / name).read_text().splitlines()))  # noqa: E731
    names = {row["customer_id"]: row["name"] for row in rows("raw_customers.csv")}
    totals: dict[str, float] = defaultdict(float)
    for row in rows("raw_orders.csv"):
        if "2024-01-01" <= row["ds"] <= "2024-01-07" and row["customer_id"] in names:
            totals[names[row["customer_id"]]] += float(row["amount"]) * factor
    return {name: round(value, 2) for name, value in totals.items()}


def _pull(raw: dict, head: str, *, merged_sha: str | None = None) -> dict:
    pull = copy.deepcopy(raw)
    pull["head"]["sha"] = head
    if merged_sha:
        pull.update(state="closed", merged=True, merge_commit_sha=merged_sha)
    return pull


def test_a_pull_request_from_open_to_close_on_fresh_runners(connect_server, state_database, tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GITHUB_", "SPARK_", "PYSPARK_"))}
    env.update(GITHUB_ACTIONS="true", MESHBOT_SPARK_REMOTE=connect_server.url,
               MESHBOT_STATE_HOST=POSTGRES["host"], MESHBOT_STATE_PORT=str(POSTGRES["port"]),
               MESHBOT_STATE_DATABASE=state_database, MESHBOT_STATE_USER=POSTGRES["user"],
               PYTHONPATH=str(ROOT))
    _drop_schemas(connect_server.url)
    repo = Repository(tmp_path, env)
    project = repo.work / "warehouse"
    write_example(project)
    with (project / "config.yaml").open("a") as handle:
        handle.write(CONFIG_EXTRA)
    (repo.work / ".gitignore").write_text(".meshbot/\n")
    main_sha = repo.commit("the shop project")
    try:
        # The team bootstraps prod once, from a clone, on the shared gateway.
        repo.meshbot(repo.fresh_clone(main_sha), "plan", "--auto-apply", "--no-prompts")

        # opened: the PR doubles revenue
        _git(repo.work, "checkout", "-q", "-b", BRANCH)
        model = project / "models" / "customer_revenue.sql"
        model.write_text(model.read_text().replace("SUM(o.amount) AS revenue", "SUM(o.amount) * 2 AS revenue"))
        test = project / "tests" / "test_customer_revenue.yaml"
        test.write_text(test.read_text().replace("revenue: 15.5", "revenue: 31.0").replace("revenue: 20.0", "revenue: 40.0"))
        head_a = repo.commit("double revenue")
        opened = copy.deepcopy(payload("pull_request/opened.payload.json"))
        opened["pull_request"] = _pull(opened["pull_request"], head_a)
        repo.answer(pulls=[opened["pull_request"]])
        repo.event("pull_request", opened, head_a)
        checks = repo.checks()
        assert (checks["Unit Tests"], checks["PR Environment Synced"], checks["Prod Plan Preview"]) == ("success",) * 3
        assert checks["Required Approval"] == "failure"
        assert "shop.customer\\_revenue" in repo.comment and f"`{ENV}`" in repo.comment
        assert repo.output("created_pr_environment") == "true"

        # synchronize: a second push; the environment from the first runner is found in the shared state
        view = project / "models" / "top_customers.sql"
        view.write_text(view.read_text().replace("revenue >= 100", "revenue >= 200"))
        head_b = repo.commit("a higher bar for top customers")
        pushed = copy.deepcopy(payload("pull_request/synchronize.payload.json"))
        pushed["pull_request"] = _pull(pushed["pull_request"], head_b)
        repo.answer(pulls=[pushed["pull_request"]])
        repo.event("pull_request", pushed, head_b)
        assert "shop.top\\_customers" in repo.comment and repo.checks()["PR Environment Synced"] == "success"
        assert repo.output("created_pr_environment") == "false"

        # an approving review by the required approver, on the head commit
        review = copy.deepcopy(payload("pull_request_review/submitted.payload.json"))
        review["pull_request"] = _pull(review["pull_request"], head_b)
        review["review"].update(state="approved", commit_id=head_b)
        review["review"]["user"]["login"] = "ann-gh"
        approval = {**review["review"], "state": "APPROVED"}
        repo.answer(pulls=[pushed["pull_request"]], reviews={"2": [approval]})
        assert repo.event("pull_request_review", review, head_b).returncode == 0
        assert repo.checks()["Required Approval"] == "success"

        # merge: the push to the default branch deploys what was reviewed
        _git(repo.work, "checkout", "-q", DEFAULT_BRANCH)
        _git(repo.work, "merge", "-q", "--no-ff", "-m", "Merge pull request #2", BRANCH)
        merge_sha = repo.push()
        push = copy.deepcopy(payload("push/payload.json"))
        push.update(ref=f"refs/heads/{DEFAULT_BRANCH}", before=main_sha, after=merge_sha, deleted=False, created=False)
        merged_pull = _pull(pushed["pull_request"], head_b, merged_sha=merge_sha)
        repo.answer(pulls=[merged_pull], reviews={"2": [approval]})
        result = repo.event("push", push, merge_sha)
        assert result.returncode == 0, result.stdout + result.stderr
        assert re.search(r"^Stage \d+/\d+ promote: done in [\d.]+ s$", result.stdout, re.M), result.stdout   # the job log
        assert repo.checks()["Prod Environment Synced"] == "success"
        rows = repo.fetch("SELECT name, ROUND(revenue, 2) AS revenue, name IN (SELECT name FROM shop.top_customers) "
                          "AS top FROM shop.customer_revenue")
        assert {row["name"]: row["revenue"] for row in rows} == _expected_revenue(2.0)
        assert {row["name"] for row in rows if row["top"]} == {n for n, v in _expected_revenue(2.0).items() if v >= 200}

        # closed: the PR environment goes, prod stays
        closed = copy.deepcopy(payload("pull_request/closed.payload.json"))
        closed["pull_request"] = _pull(closed["pull_request"], head_b, merged_sha=merge_sha)
        assert repo.event("pull_request", closed, merge_sha).returncode == 0
        databases = {row["namespace"] for row in repo.fetch("SHOW DATABASES")}
        assert f"shop__{ENV}" not in databases and "shop" in databases
        environments = json.loads(repo.meshbot(repo.fresh_clone(merge_sha), "environments", "--json").stdout)
        assert [e["name"] for e in environments] == ["prod"]
    finally:
        _drop_schemas(connect_server.url)
