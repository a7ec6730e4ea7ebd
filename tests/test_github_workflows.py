"""action.yml and the workflows validate against the SchemaStore schemas; permissions and concurrency."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from github_support import GITHUB_FIXTURES

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _schema(name: str) -> dict:
    return json.loads((GITHUB_FIXTURES / "schemas" / name).read_text())


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    if True in data:   # YAML 1.1 reads the `on:` key as a boolean; GitHub reads it as "on"
        data["on"] = data.pop(True)
    return data


def test_action_yml_is_valid_and_declares_the_issue_interface():
    action = _load(ROOT / "action.yml")
    jsonschema.validate(action, _schema("github-action.json"))
    assert action["runs"]["using"] == "composite"
    assert {"project_path", "gateway", "command", "github_token", "python_version", "extra_pip",
            "config"} <= set(action["inputs"])
    assert {"pr_environment_name", "plan_id", "unit_tests", "required_approval",
            "prod_environment_synced"} <= set(action["outputs"])
    assert action["inputs"]["command"]["default"] == "run-all"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflows_are_valid_with_least_permissions(path):
    workflow = _load(path)
    jsonschema.validate(workflow, _schema("github-workflow.json"))
    permissions = workflow["permissions"]
    assert permissions.get("contents") == "read"
    assert not any(v == "write" for k, v in permissions.items() if k in ("contents", "actions", "packages"))


def test_user_workflows_cover_the_events_and_never_cancel_deploys():
    names = {p.name for p in WORKFLOWS}
    assert {"ci.yml", "meshbot-pr.yml", "meshbot-deploy.yml", "meshbot-release.yml"} <= names
    pr = _load(ROOT / ".github/workflows/meshbot-pr.yml")
    assert {"pull_request", "pull_request_review", "issue_comment"} <= set(pr["on"])
    for name in ("meshbot-pr.yml", "meshbot-deploy.yml", "meshbot-release.yml"):
        assert _load(ROOT / ".github/workflows" / name)["concurrency"]["cancel-in-progress"] is False
    release = _load(ROOT / ".github/workflows/meshbot-release.yml")
    assert release["jobs"]["promote"]["environment"]["name"] == "production"
    assert "bash .ci/run" in (ROOT / ".github/workflows/ci.yml").read_text()
